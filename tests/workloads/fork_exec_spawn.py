# Process churn as Python programs make it (tests/integration/test_storms.cpp): 200 runs of
# `uname -p` through subprocess (fork, then exec at once; enough for a few samples of the
# children between their fork and their exec at 999 Hz), 3 multiprocessing children
# started by "spawn" (fork, exec of Python again) and 2 by "fork" (no exec: Python goes on
# in the child). Each child spends about 150 ms of CPU in a function named for how it was
# started. Prints "uname PID", "spawned PID" and "forked PID" for each child.
import multiprocessing as mp
import subprocess
import sys
import time


def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def spawned_child_busy():
    burn(0.15)


def forked_child_busy():
    burn(0.15)


if __name__ == "__main__":
    for _ in range(200):
        p = subprocess.Popen(["uname", "-p"], stdout=subprocess.DEVNULL)
        if p.wait() != 0:
            sys.exit(1)
        print("uname", p.pid, flush=True)
    for method, target, word in (("spawn", spawned_child_busy, "spawned"), ("fork", forked_child_busy, "forked")):
        ctx = mp.get_context(method)
        children = [ctx.Process(target=target) for _ in range(3 if method == "spawn" else 2)]
        for c in children:
            c.start()
        for c in children:
            print(word, c.pid, flush=True)
        for c in children:
            c.join()
            if c.exitcode != 0:
                sys.exit(1)
