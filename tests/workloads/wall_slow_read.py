# A thread that reads a file for argv[2] seconds, 4 KiB at offsets 64 MiB apart so that every
# read misses the page cache: on tests/hosts/slow_fuse.c's file each read waits for the FUSE
# server in state D, under the READ line. Prints "reader TID" (its kernel thread id) once it
# runs (tests/integration/test_wall.cpp checks the state in /proc before profiling).
import os
import sys
import threading
import time


def native_id():
    """The thread's kernel id (threading.get_native_id is 3.8+)."""
    try:
        return threading.get_native_id()
    except AttributeError:
        import ctypes
        return ctypes.CDLL(None).syscall(186)  # SYS_gettid on x86_64


def read_slowly(path, seconds):
    fd = os.open(path, os.O_RDONLY)
    end = time.monotonic() + seconds
    off = 0
    sys.stdout.write("reader %d\n" % native_id())
    sys.stdout.flush()
    while time.monotonic() < end:
        os.pread(fd, 4096, off)  # READ
        off += 64 << 20
    os.close(fd)


def main():
    t = threading.Thread(target=read_slowly, args=(sys.argv[1], float(sys.argv[2])), name="reader")
    t.start()
    t.join()


main()
