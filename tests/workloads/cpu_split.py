# 70/30 CPU split between two methods (qualified names Splitter.hot_seventy and
# Splitter.hot_thirty on 3.11+), measured in CPU time so the split holds whatever the
# machine's load. Runs for argv[1] seconds (default: forever).
import random
import sys
import time

cpu_time = getattr(time, "thread_time", time.process_time)  # thread_time is 3.7+


def spin_until(deadline):
    while cpu_time() < deadline:
        pass


class Splitter:
    def hot_seventy(self, step):
        spin_until(cpu_time() + 0.7 * step)

    def hot_thirty(self, step):
        spin_until(cpu_time() + 0.3 * step)


def main():
    end = time.monotonic() + float(sys.argv[1]) if len(sys.argv) > 1 else float("inf")
    s = Splitter()
    # A random step (5-15 ms of CPU per pair) so no sampling rate aliases with a fixed
    # 7 ms / 3 ms rhythm: at 199 Hz the fixed rhythm skewed the split to as much as 84/16.
    while time.monotonic() < end:
        step = 0.005 + 0.01 * random.random()
        s.hot_seventy(step)
        s.hot_thirty(step)


if __name__ == "__main__":
    main()
