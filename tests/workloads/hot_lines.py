# Two hot loops on known lines (marked LINE-A / LINE-B) in one function.
import sys
import time

def two_loops(n):
    total = 0
    for i in range(n):
        total += i * i  # LINE-A
    for j in range(n):
        total -= j % 7  # LINE-B
    return total

def main():
    end = time.monotonic() + float(sys.argv[1]) if len(sys.argv) > 1 else float("inf")
    while time.monotonic() < end:
        two_loops(200000)

if __name__ == "__main__":
    main()
