# One thread (the main one) alternating 20 ms of computing with 20 ms of time.sleep for
# argv[1] seconds: in wall mode half its time is on CPU in compute(), on the COMPUTE line,
# and half asleep in rest(), on the SLEEP line (tests/integration/test_wall.cpp).
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
    while time.monotonic() < end:
        compute(20)
        rest(20)


main()
