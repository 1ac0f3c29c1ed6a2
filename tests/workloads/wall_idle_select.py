# Blocked in select() on a pipe that never becomes readable, for argv[1] seconds (default: an
# hour), after saying "ready" on stdout: an idle process, all of whose wall time is off CPU
# under the SELECT line (tests/integration/test_wall.cpp). With argv[2], the path of a FIFO, it
# also wakes (and exits) as soon as something is written to it: a test wakes it when it wants.
import os
import select
import sys


def wait_here(fds, seconds):
    select.select(fds, [], [], seconds)  # SELECT


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3600.0
    r, w = os.pipe()
    fds = [r]
    if len(sys.argv) > 2:
        # Opened to read and write: open does not wait for a writer, and select for data.
        fds.append(os.open(sys.argv[2], os.O_RDWR | os.O_NONBLOCK))
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    wait_here(fds, seconds)


main()
