# Two Python processes (this one and a fork of it) passing one byte back and forth over two
# pipes: every read blocks until the other side writes, so each round trip is two context
# switches, the work of a scheduler-heavy program (tools/bench/run, section "wall").
#
#   python pingpong.py SECONDS [WORK] [PLACES]
#
# WORK (default 0): each side runs a pure-Python loop of WORK iterations before it answers, so
# that the switch rate can be brought down to a given one (tools/bench/run calibrates it: the
# issue's workload switches at >= 50,000/s; with no work it switches as fast as it can, every
# context switch on the critical path of each round trip: the worst case).
#
# Prints "pids PARENT CHILD", waits for a line on stdin (the benchmark sends one once the
# profiler runs; EOF starts it too), ping-pongs for SECONDS, then prints
# "roundtrips N elapsed S switches V cpu_ns C": V = the context switches of both processes
# during those seconds, voluntary and involuntary (/proc/PID/status: a write wakes the peer,
# which often preempts the writer there and then, so about half of them are involuntary), the
# rate the workload reaches by itself; C = the CPU time both used meanwhile (the run time in
# /proc/PID/schedstat, ns: pinned to one CPU, a profiler's work at each switch adds to it). Both
# processes then wait for another line (or EOF) before they exit, so that a profiler of
# them is still running when the benchmark reads its BPF programs' counters.
#
# PLACES (default 1): each side blocks in one of PLACES different functions in turn (read_0,
# read_1, ...). A wall profiler keeps the stacks of the last 2 places each thread blocked at, so
# with 3 or more every switch-out is at a place not kept: every one walks its stack (and, with
# --native, takes a machine-state capture): the worst case of the per-place work.
import os
import sys
import time


def switches(pid):
    n = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                n += int(line.split()[1])
    return n


def cpu_ns(pid):
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0])


def work(k):
    for _ in range(k):
        pass


def read_0(r):
    return os.read(r, 1)


def read_1(r):
    return os.read(r, 1)


def read_2(r):
    return os.read(r, 1)


def read_3(r):
    return os.read(r, 1)


READS = [read_0, read_1, read_2, read_3]


def pong(r, w, k, places):
    i = 0
    while True:
        b = READS[i % places](r) if places > 1 else os.read(r, 1)
        i += 1
        if not b or b == b"q":
            return
        work(k)
        os.write(w, b)


def ping(r, w, seconds, k, places):
    n = 0
    end = time.monotonic() + seconds
    while True:
        for i in range(1000):  # the clock read, 1000 times less often than a round trip
            work(k)
            os.write(w, b"x")
            if places > 1:
                READS[i % places](r)
            else:
                os.read(r, 1)
        n += 1000
        if time.monotonic() >= end:
            return n


def main():
    seconds = float(sys.argv[1])
    k = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    places = min(int(sys.argv[3]), len(READS)) if len(sys.argv) > 3 else 1
    a_r, a_w = os.pipe()  # parent -> child
    b_r, b_w = os.pipe()  # child -> parent
    child = os.fork()
    if child == 0:
        os.close(a_w)
        os.close(b_r)
        pong(a_r, b_w, k, places)
        os._exit(0)
    os.close(a_r)
    os.close(b_w)
    print("pids %d %d" % (os.getpid(), child), flush=True)
    sys.stdin.readline()
    v0 = switches(os.getpid()) + switches(child)
    c0 = cpu_ns(os.getpid()) + cpu_ns(child)
    t0 = time.monotonic()
    n = ping(b_r, a_w, seconds, k, places)
    el = time.monotonic() - t0
    c1 = cpu_ns(os.getpid()) + cpu_ns(child)
    v1 = switches(os.getpid()) + switches(child)
    print("roundtrips %d elapsed %.6f switches %d cpu_ns %d" % (n, el, v1 - v0, c1 - c0), flush=True)
    sys.stdin.readline()
    os.write(a_w, b"q")
    os.waitpid(child, 0)


main()
