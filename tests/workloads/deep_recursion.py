# Recurses to an exact depth (argv[2], default 900) and spins at the bottom.
import sys
import time

def spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass

def recurse(n, seconds):
    if n <= 1:
        spin(seconds)
        return 0
    return recurse(n - 1, seconds) + 1

def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3600.0
    depth = int(sys.argv[2]) if len(sys.argv) > 2 else 900
    sys.setrecursionlimit(max(1000, depth + 100))
    recurse(depth, seconds)

if __name__ == "__main__":
    main()
