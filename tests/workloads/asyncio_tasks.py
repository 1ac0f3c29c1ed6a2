# Three named asyncio tasks (alpha, beta, gamma) that compute in turn on one thread for argv[1]
# seconds, under a main task named "main" that gathers them (tests/integration/test_asyncio.cpp,
# --async). Each compute step is short and the tasks take unequal steps (1:2:3), so each task's
# share of the CPU differs. Each task measures its own CPU time with time.thread_time() around
# every compute step, and at the end the workload prints it: "cpu alpha=MS beta=MS gamma=MS".
# The profile's share of samples under "<task alpha>" etc. is checked against that truth.
import asyncio
import sys
import time

STEP_MS = {"alpha": 2.0, "beta": 4.0, "gamma": 6.0}
cpu_ms = {name: 0.0 for name in STEP_MS}
stop = False


def compute(ms):
    end = time.thread_time() + ms / 1000.0
    n = 0
    while time.thread_time() < end: n += 1  # COMPUTE
    return n


async def step(name):
    t0 = time.thread_time()
    compute(STEP_MS[name])
    cpu_ms[name] += (time.thread_time() - t0) * 1e3


async def worker(name):
    while not stop:
        await step(name)
        await asyncio.sleep(0)  # the next task's turn


async def main(seconds):
    global stop
    asyncio.current_task().set_name("main")
    tasks = [asyncio.create_task(worker(name), name=name) for name in STEP_MS]

    async def timer():
        global stop
        await asyncio.sleep(seconds)
        stop = True

    asyncio.create_task(timer(), name="timer")
    await asyncio.gather(*tasks)


seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
asyncio.run(main(seconds))
sys.stdout.write("cpu " + " ".join("%s=%.3f" % (n, cpu_ms[n]) for n in STEP_MS) + "\n")
sys.stdout.flush()
