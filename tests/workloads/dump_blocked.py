# Five named threads, each asleep in a different blocking call, for `pybpfprof dump`
# (tests/integration/test_dump.cpp). Prints "NAME TID" for each (its host tid), then "ready"
# once every one is about to block; each blocking call's line carries a "# BLOCK" marker.
# Python 3.6+: no f-strings; no threading.get_native_id before 3.8 (the gettid syscall).
import queue
import select
import socket
import sys
import threading
import time


def tid():
    try:
        return threading.get_native_id()
    except AttributeError:
        import ctypes
        return ctypes.CDLL(None).syscall(186)  # SYS_gettid on x86_64


started = threading.Barrier(6)
lock = threading.Lock()


def report(name):
    with lock:
        sys.stdout.write("%s %d\n" % (name, tid()))
        sys.stdout.flush()
    started.wait()


def in_sleep():
    report("sleeper")
    time.sleep(100000)  # BLOCK in_sleep


def in_event_wait():
    ev = threading.Event()
    report("waiter")
    ev.wait()  # BLOCK in_event_wait


def in_select():
    r, w = socket.socketpair()
    report("selector")
    select.select([r], [], [], 100000)  # BLOCK in_select


def in_accept():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    report("acceptor")
    s.accept()  # BLOCK in_accept


def in_queue_get():
    q = queue.Queue()
    report("getter")
    q.get()  # BLOCK in_queue_get


threads = [
    threading.Thread(target=in_sleep, name="sleeper", daemon=True),
    threading.Thread(target=in_event_wait, name="waiter", daemon=True),
    threading.Thread(target=in_select, name="selector", daemon=True),
    threading.Thread(target=in_accept, name="acceptor", daemon=True),
    threading.Thread(target=in_queue_get, name="getter", daemon=True),
]
for t in threads:
    t.start()
started.wait()
print("ready", flush=True)
time.sleep(100000)  # the main thread waits too
