# The container tests' workload (tests/integration/test_containers.cpp): a "service" that
# burns CPU under serve -> handle_request -> parse | render -> spin until the file argv[3]
# exists (at most argv[1] seconds), then prints how many requests it served and exits with
# argv[2], so a test can tell that profiling left the container's own process alone.
import os
import sys
import time


def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def parse():
    spin(0.002)


def render():
    spin(0.002)


def handle_request():
    parse()
    render()


def serve(seconds, stop):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        handle_request()
        n += 1
        # os.stat inline, not in a function of ours: the call chain stays the one above
        if n % 25 == 0:
            try:
                os.stat(stop)
                break
            except FileNotFoundError:
                pass
    return n


if __name__ == "__main__":
    served = serve(float(sys.argv[1]), sys.argv[3])
    print("served %d requests" % served, flush=True)
    sys.exit(int(sys.argv[2]))
