# Spins in late_worker_busy for argv[1] seconds: started after the profiler.
# With argv[2] (a file name) it first says "waiting" and idles until that file exists, so a
# test can start it, have it profiled, and only then let it work.
# Prints the CPU seconds it used in all (cpu_seconds) and in late_worker_busy alone
# (busy_cpu), so tests can expect samples in proportion.
import os
import sys
import time

def late_worker_busy(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass

if len(sys.argv) > 2:
    print("waiting", flush=True)
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.01)
before = time.process_time()
late_worker_busy(float(sys.argv[1]) if len(sys.argv) > 1 else 3.0)
after = time.process_time()
print("cpu_seconds %.3f" % after)
print("busy_cpu %.3f" % (after - before))
