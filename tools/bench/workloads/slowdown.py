# Fixed CPU-bound pure-Python work of one kind, timed by itself (interpreter start-up and
# exit are left out). Prints "elapsed SECONDS" on stdout.
#   slowdown.py recursion|loop|pool SCALE
# recursion: SCALE x fib(22), a call tree ~22 frames deep (28 657 calls each)
# loop:      SCALE x a 100 000-iteration arithmetic loop in one frame
# pool:      SCALE tasks (each a 20 000-iteration loop plus fib(12)) on a 2-thread pool
import sys
import time
from concurrent.futures import ThreadPoolExecutor


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def recursion(scale):
    total = 0
    for _ in range(scale):
        total += fib(22)
    return total


def spin(n):
    acc = 0
    for i in range(n):
        acc = (acc + i * i) % 1000003
    return acc


def loop(scale):
    total = 0
    for _ in range(scale):
        total += spin(100_000)
    return total


def task(i):
    return spin(20_000) + fib(12) + i


def pool(scale):
    with ThreadPoolExecutor(max_workers=2) as ex:
        return sum(ex.map(task, range(scale)))


def main():
    kind = sys.argv[1]
    scale = int(sys.argv[2])
    work = {"recursion": recursion, "loop": loop, "pool": pool}[kind]
    t0 = time.perf_counter()
    work(scale)
    elapsed = time.perf_counter() - t0
    print("elapsed %.6f" % elapsed, flush=True)


main()
