# A process whose finalization is slow on purpose: argv[1] (default 1500000) small objects (a
# list of dicts of lists and strs) kept in a module global, so that Py_FinalizeEx tears them down
# (in C: no Python frame) after the script ends. Prints "built N" once the graph is made, then
# computes for argv[2] seconds (default 0.3) in spin(), the script's own Python time.
import sys
import time


def build(n):
    return [{"key": [i, str(i)], "other": (i, i + 1)} for i in range(n)]


def spin(seconds):
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


GRAPH = build(int(sys.argv[1]) if len(sys.argv) > 1 else 1500000)
print("built %d" % len(GRAPH), flush=True)
spin(float(sys.argv[2]) if len(sys.argv) > 2 else 0.3)
