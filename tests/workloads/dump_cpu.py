# A fixed CPU-bound computation for "the target is unharmed" (tests/integration/test_dump.cpp):
# argv[1] chunks of argv[2] steps of a linear congruential generator, 20 frames deep, with a
# second thread asleep. Prints "ready", then "result R elapsed_s E max_chunk_ms M stopped_ms S":
# R depends only on the arguments; M is the slowest chunk, where a pause of the process would
# show; S is the time the computing thread spent neither on a CPU nor waiting for one (the
# kernel's schedstat: elapsed - run time - run-queue wait), i.e. stopped or blocked, which a
# computation that never blocks spends only when something outside stops it (a ptrace stop, a
# lock taken on its memory map).
import sys
import threading
import time


def step(x):
    return (x * 1103515245 + 12345) & 0x7FFFFFFF


def chunk(x, n):
    for _ in range(n):
        x = step(x)
    return x


def work(depth, x, chunks, n, slowest):
    if depth:
        return work(depth - 1, x, chunks, n, slowest)
    for _ in range(chunks):
        t = time.perf_counter()
        x = chunk(x, n)
        slowest[0] = max(slowest[0], time.perf_counter() - t)
    return x


threading.Thread(target=time.sleep, args=(100000,), name="idle", daemon=True).start()
chunks, n = int(sys.argv[1]), int(sys.argv[2])


def schedstat():
    with open("/proc/thread-self/schedstat") as f:
        run_ns, wait_ns = f.read().split()[:2]
    return time.monotonic_ns(), int(run_ns), int(wait_ns)


print("ready", flush=True)
start = time.perf_counter()
t0, run0, wait0 = schedstat()
slowest = [0.0]
result = work(20, 1, chunks, n, slowest)
t1, run1, wait1 = schedstat()
elapsed = time.perf_counter() - start
stopped_ms = ((t1 - t0) - (run1 - run0) - (wait1 - wait0)) / 1e6
print("result %d elapsed_s %.3f max_chunk_ms %.3f stopped_ms %.3f" % (result, elapsed, slowest[0] * 1e3, stopped_ms),
      flush=True)
