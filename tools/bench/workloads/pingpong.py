# Two Python processes (this one and a fork of it) passing one byte back and forth over two
# pipes: every read blocks until the other side writes, so each round trip is two voluntary
# context switches, the work of a scheduler-heavy program (tools/bench/run, section "wall").
#
#   python pingpong.py SECONDS
#
# Prints "pids PARENT CHILD", waits for a line on stdin (the benchmark sends one once the
# profiler runs; EOF starts it too), ping-pongs for SECONDS, then prints
# "roundtrips N elapsed S switches V": V = the voluntary context switches of both processes
# during those seconds (/proc/PID/status), the rate the workload reaches by itself. Both
# processes then wait for another line (or EOF) before they exit, so that a profiler of
# them is still running when the benchmark reads its BPF programs' counters.
import os
import sys
import time


def voluntary(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    return 0


def pong(r, w):
    while True:
        b = os.read(r, 1)
        if not b or b == b"q":
            return
        os.write(w, b)


def ping(r, w, seconds):
    n = 0
    end = time.monotonic() + seconds
    while True:
        for _ in range(1000):  # the clock read, 1000 times less often than a round trip
            os.write(w, b"x")
            os.read(r, 1)
        n += 1000
        if time.monotonic() >= end:
            return n


def main():
    seconds = float(sys.argv[1])
    a_r, a_w = os.pipe()  # parent -> child
    b_r, b_w = os.pipe()  # child -> parent
    child = os.fork()
    if child == 0:
        os.close(a_w)
        os.close(b_r)
        pong(a_r, b_w)
        os._exit(0)
    os.close(a_r)
    os.close(b_w)
    print("pids %d %d" % (os.getpid(), child), flush=True)
    sys.stdin.readline()
    v0 = voluntary(os.getpid()) + voluntary(child)
    t0 = time.monotonic()
    n = ping(b_r, a_w, seconds)
    el = time.monotonic() - t0
    v1 = voluntary(os.getpid()) + voluntary(child)
    print("roundtrips %d elapsed %.6f switches %d" % (n, el, v1 - v0), flush=True)
    sys.stdin.readline()
    os.write(a_w, b"q")
    os.waitpid(child, 0)


main()
