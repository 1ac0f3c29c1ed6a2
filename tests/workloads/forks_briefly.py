# Children that run Python briefly and exec (tests/integration/test_profiling.cpp, the live
# status line's process count): forks N children one after another; each spins Python for
# 40 ms in child_spin (too short to be announced: a forked child is announced once it has run
# Python for 50 ms) and then execs /bin/true. The parent then spins in parent_spin until
# SECONDS have passed. Prints "forked N" when the last child has exited.
import os
import sys
import time


def child_spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def parent_spin(until):
    while time.monotonic() < until:
        pass


if __name__ == "__main__":
    n, seconds = int(sys.argv[1]), float(sys.argv[2])
    start = time.monotonic()
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            child_spin(0.04)
            os.execv("/bin/true", ["true"])
        os.waitpid(pid, 0)
    print("forked", n, flush=True)
    parent_spin(start + seconds)
