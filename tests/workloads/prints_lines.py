# Prints "line N" 20 times a second for SECONDS (argv[1]), with a little CPU between lines:
# a launched program that talks while pybpfprof draws its status line on the same terminal.
import sys
import time

end = time.time() + float(sys.argv[1])
i = 0
while time.time() < end:
    x = 0
    for _ in range(100000):
        x += 1
    print("line", i, flush=True)
    i += 1
    time.sleep(0.05)
print("done after", i, "lines", flush=True)
