# One thread (the main one) alternating 20 ms of computing with 20 ms of time.sleep for
# argv[1] seconds: in wall mode half its time is on CPU in compute(), on the COMPUTE line,
# and half asleep in rest(), on the SLEEP line (tests/integration/test_wall.cpp).
# At the end it prints the wall time it measured in each, "measured compute_ms=X rest_ms=Y":
# on a loaded machine compute() overruns its 20 ms when preempted at its deadline, and the
# profile is checked against this truth rather than against 50/50.
import sys
import time


def compute(ms):
    end = time.monotonic() + ms / 1000.0
    n = 0
    while time.monotonic() < end: n += 1  # COMPUTE
    return n


def rest(ms):
    time.sleep(ms / 1000.0)  # SLEEP


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    end = time.monotonic() + seconds
    in_compute = in_rest = 0.0
    while time.monotonic() < end:
        t0 = time.monotonic()
        compute(20)
        t1 = time.monotonic()
        rest(20)
        t2 = time.monotonic()
        in_compute += t1 - t0
        in_rest += t2 - t1
    sys.stdout.write("measured compute_ms=%.3f rest_ms=%.3f\n" % (in_compute * 1e3, in_rest * 1e3))
    sys.stdout.flush()


main()
