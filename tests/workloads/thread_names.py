# Threads named in Python, in several scripts, for tests/integration/test_thread_names.cpp.
# Started at once: "kiln", "café-ñ", "計算スレッド", "rename-me", and "os-only", a thread the
# threading module does not know (started with _thread) whose OS name is set with prctl.
# On SIGUSR1: "rename-me" becomes "renamed-ñ" and "late-後" starts. On SIGUSR2: all stop.
# Every thread but the main one spins on the CPU. Prints "started" and "renamed" (ASCII only:
# a chroot's stdout may have no UTF-8 locale). Ends on its own after 120 s.
import _thread
import ctypes
import signal
import sys
import threading
import time

deadline = time.monotonic() + 120
go = threading.Event()
stop = threading.Event()


def spin():
    x = 0
    while not stop.is_set() and time.monotonic() < deadline:
        for _ in range(2000):
            x += 1
    return x


def os_only():
    try:
        ctypes.CDLL(None).prctl(15, b"os-only", 0, 0, 0)  # PR_SET_NAME
    except Exception:
        pass
    spin()
    os_done.release()


os_done = _thread.allocate_lock()
os_done.acquire()


def main():
    signal.signal(signal.SIGUSR1, lambda *a: go.set())
    signal.signal(signal.SIGUSR2, lambda *a: stop.set())
    threads = [threading.Thread(target=spin, name=n) for n in ("kiln", "caf\u00e9-\u00f1",
                                                               "\u8a08\u7b97\u30b9\u30ec\u30c3\u30c9", "rename-me")]
    for t in threads:
        t.start()
    _thread.start_new_thread(os_only, ())
    print("started", flush=True)
    while not go.is_set() and not stop.is_set() and time.monotonic() < deadline:
        time.sleep(0.02)
    threads[3].name = "renamed-\u00f1"
    late = threading.Thread(target=spin, name="late-\u5f8c")
    late.start()
    threads.append(late)
    print("renamed", flush=True)
    while not stop.is_set() and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    for t in threads:
        t.join()
    os_done.acquire()


if __name__ == "__main__":
    main()
