# N threads in one process, for the per-sample BPF cost against the number of threads.
#   threads.py pool|spin N SECONDS [CONCURRENCY]
# pool: a thread pool's pattern. Thread k waits for its turn, runs about 20 ms of its own CPU
#       time, then hands the turn on to thread k + CONCURRENCY (default 2, one per
#       CPU here) and sleeps again, so the pool keeps cycling through all its threads: with
#       1000 threads each runs every ~10 s, and most samples are of a thread that has slept
#       since its last one.
# spin: every thread runs all the time (they take turns at the GIL), looking at the clock every
#       millisecond of its CPU.
# Every thread runs the same function (as a pool's threads do: only the thread differs, so the
# cost measured is that of finding the thread, not of new stacks), under its own name (t-0 ..
# t-N-1, in Python and for the OS). Prints "bursts TOTAL threads_run RAN" on stdout at the end.
import ctypes
import sys
import threading
import time

PR_SET_NAME = 15
BURST_S = 0.020
clock = getattr(time, "thread_time", time.perf_counter)  # 3.6 has no thread_time


def set_os_thread_name(name):
    try:
        ctypes.CDLL(None).prctl(PR_SET_NAME, name.encode(), 0, 0, 0)
    except Exception:
        pass


def spin(cpu_s):
    end = clock() + cpu_s
    x = 0
    while clock() < end:
        x += 1
    return x


def main():
    pattern, n, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    conc = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    threading.stack_size(256 * 1024)  # 1000 threads x the default 8 MiB is needless
    stop = threading.Event()
    turn = [threading.Event() for _ in range(n)]
    bursts = [0] * n

    def pool_thread(k):
        set_os_thread_name("t-%d" % k)
        while True:
            turn[k].wait()
            turn[k].clear()
            if stop.is_set():
                return
            spin(BURST_S)
            bursts[k] += 1
            turn[(k + conc) % n].set()

    def spin_thread(k):
        set_os_thread_name("t-%d" % k)
        # Each thread ends by itself at the deadline, 1 ms of its CPU at a time: with 1000
        # threads at the GIL, the main thread waits minutes for its turn to set stop
        while time.monotonic() < deadline:
            spin(0.001)
            bursts[k] += 1

    deadline = time.monotonic() + seconds
    body = {"pool": pool_thread, "spin": spin_thread}[pattern]
    ts = [threading.Thread(target=body, args=(k,), name="t-%d" % k) for k in range(n)]
    for t in ts:
        t.start()
    for k in range(min(conc, n)):
        turn[k].set()
    time.sleep(seconds)
    stop.set()
    for e in turn:
        e.set()
    for t in ts:
        t.join()
    print("bursts %d threads_run %d" % (sum(bursts), sum(1 for b in bursts if b)), flush=True)


main()
