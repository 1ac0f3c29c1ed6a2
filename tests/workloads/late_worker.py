# Spins in late_worker_busy for argv[1] seconds: started after the profiler.
# Prints the CPU seconds it used, so tests can expect samples in proportion.
import sys
import time

def late_worker_busy(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass

late_worker_busy(float(sys.argv[1]) if len(sys.argv) > 1 else 3.0)
print("cpu_seconds %.3f" % time.process_time())
