# A gather of gathers, asleep (tests/integration/test_asyncio.cpp, dump --async): the task
# "main" gathers the tasks outer-0 and outer-1, each of which gathers two tasks leaf-I-J, which
# wait on an Event in wait_here(). An unnamed task (Task-N) sleeps on its own, and one task
# ("finished") is done. Prints "ready" when every task is waiting, then waits to be killed.
import asyncio
import sys


async def wait_here(ev):
    await ev.wait()  # LEAF_WAIT


async def leaf(ev):
    await wait_here(ev)


async def outer(i, ev):
    await asyncio.gather(*(asyncio.create_task(leaf(ev), name="leaf-%d-%d" % (i, j)) for j in range(2)))  # OUTER_GATHER


async def quick():
    return 1


async def main():
    asyncio.current_task().set_name("main")
    ev = asyncio.Event()
    done = asyncio.create_task(quick(), name="finished")
    await done
    lonely = asyncio.create_task(asyncio.sleep(3600))
    outers = [asyncio.create_task(outer(i, ev), name="outer-%d" % i) for i in range(2)]
    await asyncio.sleep(0.2)
    print("ready", flush=True)
    await asyncio.gather(*outers)  # MAIN_GATHER
    lonely.cancel()


asyncio.run(main())
