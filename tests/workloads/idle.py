# Does nothing for argv[1] seconds: a target that uses no CPU.
import sys
import time

time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 3600.0)
