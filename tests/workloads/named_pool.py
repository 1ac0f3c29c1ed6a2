# A pool of N threads named in Python only (threading.Thread(name="pool-K"); their OS name
# stays the interpreter's, e.g. "python3"), all running for SECONDS: each in turn runs a little
# pure Python in pool_work (holding the GIL, so the others wait for it) and sleeps 20 ms. Then
# prints "thread NAME TID" per thread (its kernel tid) and "done". Arguments after SECONDS are
# ignored (a test gives a long command line).
#   named_pool.py N SECONDS [IGNORED...]
import sys
import threading
import time


def native_id():
    if hasattr(threading, "get_native_id"):
        return threading.get_native_id()
    import ctypes
    return ctypes.CDLL(None).syscall(186)  # gettid on x86_64, before 3.8


def pool_work():
    x = 0
    for _ in range(20000):
        x += 1
    return x


def main():
    n, seconds = int(sys.argv[1]), float(sys.argv[2])
    threading.stack_size(256 * 1024)
    tids = {}
    ready = threading.Barrier(n + 1)
    end = [0.0]

    def body():
        tids[threading.current_thread().name] = native_id()
        ready.wait()
        while time.monotonic() < end[0]:
            pool_work()
            time.sleep(0.02)

    ts = [threading.Thread(target=body, name="pool-%d" % k) for k in range(n)]
    for t in ts:
        t.start()
    end[0] = time.monotonic() + seconds
    ready.wait()
    for t in ts:
        t.join()
    print("\n".join("thread %s %d" % (t.name, tids[t.name]) for t in ts) + "\ndone", flush=True)


main()
