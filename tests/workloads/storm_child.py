# One of many short Pythons (tests/integration/test_storms.cpp): spends argv[1] ms of CPU
# in storm_work, then exits 0.
import sys
import time

def storm_work(ms):
    end = time.process_time() + ms / 1000.0
    while time.process_time() < end:
        pass

storm_work(float(sys.argv[1]) if len(sys.argv) > 1 else 40)
