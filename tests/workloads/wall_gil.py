# Two threads for argv[2] seconds (tests/integration/test_wall.cpp):
#   "python": loop_a and loop_b, both pure-Python loops, contending for the GIL: each holds
#             it about half the time and waits for it the other half (on 2+ CPUs);
#   "hash":   loop_a, and hash_b hashing 8 MiB buffers with hashlib.sha256, which releases the
#             GIL while it hashes: hash_b is on CPU mostly without it. Without OpenSSL's
#             _hashlib (pyenv's 3.6 here) hashlib's own sha256 keeps the GIL: hash_b then
#             compresses with zlib, which releases it around deflate();
#   "held":   loop_a, and hold_b sleeping 200 ms at a time in a C call that keeps the GIL
#             (usleep through ctypes.PyDLL): loop_a waits for the GIL nearly all the time,
#             however fast the machine.
# The main thread waits in join(). Each thread prints "NAME TID" once it runs.
import ctypes
import hashlib
import sys
import threading
import time


def native_id():
    """The thread's kernel id (threading.get_native_id is 3.8+)."""
    try:
        return threading.get_native_id()
    except AttributeError:
        return ctypes.CDLL(None).syscall(186)  # SYS_gettid on x86_64


def say(name):
    sys.stdout.write("%s %d\n" % (name, native_id()))
    sys.stdout.flush()


def loop_a(end):
    say("loop_a")
    n = 0
    while time.monotonic() < end: n += 1  # LOOP-A
    return n


def loop_b(end):
    say("loop_b")
    n = 0
    while time.monotonic() < end: n += 1  # LOOP-B
    return n


def hash_b(end):
    say("hash_b")
    try:
        import _hashlib  # noqa: F401  (OpenSSL: its sha256 releases the GIL)
        buf = b"\x5a" * (8 << 20)
        work = lambda: hashlib.sha256(buf).digest()
    except ImportError:
        import zlib
        buf = bytes(range(256)) * (32 << 10)
        work = lambda: zlib.compress(buf, 1)
    n = 0
    while time.monotonic() < end:
        work()  # HASH
        n += 1
    return n


def hold_b(end):
    say("hold_b")
    libc = ctypes.PyDLL(None)  # PyDLL, unlike CDLL, keeps the GIL during the call
    while time.monotonic() < end:
        libc.usleep(200000)  # HOLD
    return 0


def main():
    kind, seconds = sys.argv[1], float(sys.argv[2])
    end = time.monotonic() + seconds
    second = {"python": loop_b, "hash": hash_b, "held": hold_b}[kind]
    ts = [threading.Thread(target=f, args=(end,), name=f.__name__) for f in (loop_a, second)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


main()
