# Blocked in select() on a pipe that never becomes readable, for argv[1] seconds (default: an
# hour), after saying "ready" on stdout: an idle process, all of whose wall time is off CPU
# under the SELECT line (tests/integration/test_wall.cpp).
import os
import select
import sys


def wait_here(r, seconds):
    select.select([r], [], [], seconds)  # SELECT


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3600.0
    r, w = os.pipe()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    wait_here(r, seconds)


main()
