# A call chain of N *distinct* functions (f0 -> f1 -> ... -> fN-1), spinning in the leaf for
# argv[1] seconds: a stack of N different code objects, as in real applications.
import sys
import time

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
depth = int(sys.argv[2]) if len(sys.argv) > 2 else 30
sys.setrecursionlimit(max(1000, depth + 100))

# <module> and main() are two frames, so the chain has depth - 2 functions: `depth` in total.
n = max(1, depth - 2)
src = ["import time"]
for i in range(n - 1):
    src.append("def f%d(end):\n    return f%d(end) + 1" % (i, i + 1))
src.append("def f%d(end):\n    x = 0\n    while time.monotonic() < end:\n        x += 1\n    return x" % (n - 1))
ns = {}
exec(compile("\n".join(src), "<chain%d>" % depth, "exec"), ns)


def main():
    ns["f0"](time.monotonic() + seconds)


main()
