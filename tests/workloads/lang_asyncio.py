# Two asyncio tasks, each CPU-bound inside an awaited coroutine chain, yielding to the
# event loop now and then:
#   task A: busy_a -> inner_a
#   task B: busy_b -> mid_b -> inner_b
# Runs for argv[1] seconds (default 2).
import asyncio
import sys
import time

cpu_time = getattr(time, "thread_time", time.process_time)  # CPU seconds: phases hold under load


async def inner_a(n):
    x = 0
    for i in range(n):  # HOT-A
        x += i
    return x


async def busy_a(end):
    while cpu_time() < end:
        await inner_a(4000)  # AWAIT-A
        await asyncio.sleep(0)


async def inner_b(n):
    x = 0
    for i in range(n):  # HOT-B
        x += i
    return x


async def mid_b(n):
    r = await inner_b(n)  # AWAIT-MID-B
    await asyncio.sleep(0)
    return r


async def busy_b(end):
    while cpu_time() < end:
        await mid_b(4000)  # AWAIT-B


async def main(seconds):
    end = cpu_time() + seconds
    create_task = getattr(asyncio, "create_task", asyncio.ensure_future)  # 3.7+
    ta = create_task(busy_a(end))
    tb = create_task(busy_b(end))
    await ta
    await tb


if __name__ == "__main__":
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    if hasattr(asyncio, "run"):  # 3.7+
        asyncio.run(main(seconds))
    else:
        asyncio.get_event_loop().run_until_complete(main(seconds))
