# Four threads, each busy in its own function, each with its own name (worker-0 .. worker-3),
# in Python (threading) and for the OS (prctl, so /proc/PID/task/TID/comm shows it too). Each thread
# spins for a quarter of argv[1] seconds of its own CPU time (3.7+; wall time on 3.6), so
# the samples per thread do not depend on the machine's load.
import ctypes
import sys
import threading
import time

PR_SET_NAME = 15

def set_os_thread_name(name):
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(PR_SET_NAME, name.encode(), 0, 0, 0)
    except Exception:
        pass

def spin(end):
    x = 0
    if hasattr(time, "thread_time"):
        cpu_end = time.thread_time() + end[1]
        while time.thread_time() < cpu_end and time.monotonic() < end[0]:
            x += 1
    else:
        while time.monotonic() < end[0]:
            x += 1
    return x

def busy_0(end): return spin(end)
def busy_1(end): return spin(end)
def busy_2(end): return spin(end)
def busy_3(end): return spin(end)

def worker(i, fn, end):
    set_os_thread_name("worker-%d" % i)
    fn(end)

def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3600.0
    # (wall-clock bound, CPU seconds per thread); the wall bound is only a safety net
    # where thread_time exists.
    if hasattr(time, "thread_time"):
        end = (time.monotonic() + 20 * seconds, seconds / 4)
    else:
        end = (time.monotonic() + seconds, 0)
    fns = [busy_0, busy_1, busy_2, busy_3]
    ts = [threading.Thread(target=worker, args=(i, f, end), name="worker-%d" % i) for i, f in enumerate(fns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()

if __name__ == "__main__":
    main()
