# Two threads spinning in pure Python for argv[1] seconds of wall time. On a free-threaded
# build they run in parallel (up to 2 CPU-seconds per wall second on 2 CPUs); with a GIL
# they would share one. Prints whether the GIL is enabled and each thread's CPU time.
import sys
import threading
import time


cpu = {}


def spin_a(end):
    n = 0
    while time.monotonic() < end:
        n += 1
    cpu["spin_a"] = time.thread_time()


def spin_b(end):
    n = 0
    while time.monotonic() < end:
        n += 1
    cpu["spin_b"] = time.thread_time()


def main():
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print("gil", gil, flush=True)
    end = time.monotonic() + secs
    ts = [threading.Thread(target=f, args=(end,), name=f.__name__) for f in (spin_a, spin_b)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    # Each thread's own CPU time, and the overlap: process CPU time over wall time.
    for k in sorted(cpu):
        print("cpu", k, "%.3f" % cpu[k])
    print("parallelism %.2f" % (time.process_time() / secs), flush=True)


if __name__ == "__main__":
    main()
