# Native.EachFileParsedOnceForAllItsProcesses: N processes of this interpreter at once (children
# of this one), each spinning SECONDS of CPU time (not wall time: the machine may be shared) in
# the interpreter's C functions (sorted, sum) and in Python.
# Usage: native_spinners.py [N [SECONDS]]
import subprocess
import sys
import time


def spin():
    return sum(sorted(range(3000, 0, -1)))


if len(sys.argv) > 2 and sys.argv[1] == "child":
    end = time.process_time() + float(sys.argv[2])
    while time.process_time() < end:
        spin()
else:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    seconds = sys.argv[2] if len(sys.argv) > 2 else "1.5"
    kids = [subprocess.Popen([sys.executable, __file__, "child", seconds]) for _ in range(n)]
    for k in kids:
        k.wait()
