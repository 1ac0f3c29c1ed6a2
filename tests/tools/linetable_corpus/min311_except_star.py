# min-version: 3.11
# Line-table corpus: exception groups.
def groups():
    try:
        raise ExceptionGroup("eg", [ValueError(1), TypeError(2)])
    except* ValueError as e:
        print("value", e)
    except* TypeError:
        print("type")
    finally:
        print("done")


async def tasks(tg_factory):
    async with tg_factory() as tg:
        t1 = tg.create_task(work(1))
        t2 = tg.create_task(
            work(2)
        )
    return t1.result() + t2.result()
