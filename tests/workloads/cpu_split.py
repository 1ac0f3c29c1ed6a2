# 70/30 CPU split between two functions, measured in thread CPU time so the split holds
# whatever the machine's load. Runs for argv[1] seconds (default: forever).
import sys
import time

def spin_until(deadline):
    while time.thread_time() < deadline:
        pass

def hot_seventy(step):
    spin_until(time.thread_time() + 0.7 * step)

def hot_thirty(step):
    spin_until(time.thread_time() + 0.3 * step)

def main():
    end = time.monotonic() + float(sys.argv[1]) if len(sys.argv) > 1 else float("inf")
    while time.monotonic() < end:
        hot_seventy(0.01)
        hot_thirty(0.01)

if __name__ == "__main__":
    main()
