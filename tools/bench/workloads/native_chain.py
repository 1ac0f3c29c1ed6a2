# The --native cost benchmark (tools/bench/run --only native): a chain of PY_DEPTH Python frames
# (<module>, main() and PY_DEPTH - 2 distinct functions f0 -> ... -> fN-1) whose leaf calls the C
# extension native_chain_ext (tests/workloads/native_chain_ext.c, built by the bench with -O2
# -fomit-frame-pointer) in a loop: deep() -> down() x (NATIVE_DEPTH - 2) -> b(), which spins. So
# nearly every sample is PY_DEPTH Python frames over NATIVE_DEPTH frames of the extension (plus
# the interpreter's own call machinery and libc's start below them).
#   native_chain.py SECONDS PY_DEPTH NATIVE_DEPTH EXT_DIR
import sys
import time

seconds = float(sys.argv[1])
depth = int(sys.argv[2])
native_depth = int(sys.argv[3])
sys.path.insert(0, sys.argv[4])
import native_chain_ext  # noqa: E402

sys.setrecursionlimit(max(1000, depth + 100))
# deep(n, spins): deep, then down(n) .. down(1), then b. GCC -O2 makes down(1)'s call of b a tail
# call (jmp), so down(1) is not on the stack while b spins: deep, n - 1 down frames and b, n + 1.
n_down = max(2, native_depth - 1)
SPINS = 2_000_000  # about 2-4 ms in b per call: the Python loop around it is a few per mille

n = max(1, depth - 2)
src = ["import time", "from native_chain_ext import deep"]
for i in range(n - 1):
    src.append("def f%d(end):\n    return f%d(end) + 1" % (i, i + 1))
src.append("def f%d(end):\n    x = 0\n    while time.monotonic() < end:\n        x += deep(%d, %d) & 1\n    return x"
           % (n - 1, n_down, SPINS))
ns = {}
exec(compile("\n".join(src), "<nchain%d>" % depth, "exec"), ns)


def main():
    ns["f0"](time.monotonic() + seconds)


main()
