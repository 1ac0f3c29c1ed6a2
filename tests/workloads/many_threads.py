# N threads in a thread pool's pattern, each thread in its own function: thread k (named t-k,
# in Python and for the OS) waits for its turn, runs BURST_MS of its own CPU time in work_k,
# hands the turn to thread k+1 and sleeps again, ROUNDS times round the pool (one thread
# runs at a time; no thread exits before all are done). Then, for each thread: "thread K TID CPU_MS" (its kernel tid as the
# process sees it, the CPU time it spent in work_k), and "done".
#   many_threads.py N BURST_MS ROUNDS
import ctypes
import sys
import threading
import time

PR_SET_NAME = 15
clock = getattr(time, "thread_time", time.perf_counter)  # 3.6 has no thread_time
libc = ctypes.CDLL(None, use_errno=True)


def native_id():
    if hasattr(threading, "get_native_id"):
        return threading.get_native_id()
    return libc.syscall(186)  # gettid on x86_64, before 3.8


def spin(cpu_s):
    end = clock() + cpu_s
    x = 0
    while clock() < end:
        x += 1
    return x


def make_work(k):
    # a function of its own per thread: a sample's function says whose it is
    ns = {"spin": spin, "clock": clock}
    exec("def work_%d(cpu_s):\n    t0 = clock()\n    spin(cpu_s)\n    return clock() - t0\n" % k, ns)
    return ns["work_%d" % k]


def main():
    n, burst, rounds = int(sys.argv[1]), float(sys.argv[2]) / 1000, int(sys.argv[3])
    threading.stack_size(256 * 1024)
    turn = [threading.Event() for _ in range(n)]
    tids = [0] * n
    cpu = [0.0] * n
    ready = threading.Barrier(n + 1)
    done = threading.Barrier(n)

    def body(k, work):
        libc.prctl(PR_SET_NAME, ("t-%d" % k).encode(), 0, 0, 0)
        tids[k] = native_id()
        ready.wait()
        for r in range(rounds):
            turn[k].wait()
            turn[k].clear()
            cpu[k] += work(burst)
            if k + 1 < n or r + 1 < rounds:
                turn[(k + 1) % n].set()
        done.wait()  # a pool keeps its threads: none exits before all have run

    ts = [threading.Thread(target=body, args=(k, make_work(k)), name="t-%d" % k) for k in range(n)]
    for t in ts:
        t.start()
    ready.wait()
    turn[0].set()
    for t in ts:
        t.join()
    out = ["thread %d %d %.3f" % (k, tids[k], cpu[k] * 1000) for k in range(n)]
    print("\n".join(out + ["done"]), flush=True)


main()
