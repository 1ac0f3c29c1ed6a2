# Computes for argv[1] seconds of wall time in spin(), never blocking: pinned with two
# others to one CPU, it waits runnable 2/3 of the time (tests/integration/test_wall.cpp).
import sys
import time


def spin(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end: n += 1  # SPIN
    return n


spin(float(sys.argv[1]) if len(sys.argv) > 1 else 3.0)
