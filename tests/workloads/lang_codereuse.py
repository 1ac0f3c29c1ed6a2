# Code objects freed and reallocated mid-run: argv[1] iterations (default 2000) each compile
# `def f_<i>()` afresh, call it once and drop it, so the next one's code object often lands
# at the address just freed. Ground truth for the profile that does not depend on the
# generated code's symbols: f_<i> is called from call site SITE-<i % 4> of caller(), whose
# code object lives all run. argv[2]: loop iterations of each f_<i> (default 20000).
# Prints how many code object addresses were seen again.
import sys


def caller(fn, k):
    if k == 0:
        return fn()  # SITE-0
    if k == 1:
        return fn()  # SITE-1
    if k == 2:
        return fn()  # SITE-2
    return fn()  # SITE-3


TEMPLATE = "def f_%d():\n    x = 0\n    for j in range(%d):\n        x += j\n    return x\n"
FILENAME = "<lang-generated>"


def main():
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    work = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    seen = set()
    reused = 0
    for i in range(iterations):
        ns = {}
        exec(compile(TEMPLATE % (i, work), FILENAME, "exec"), ns)
        fn = ns["f_%d" % i]
        addr = id(fn.__code__)
        reused += addr in seen
        seen.add(addr)
        caller(fn, i % 4)
        del fn, ns
    print("code objects: %d, distinct addresses: %d, reused: %d" % (iterations, len(seen), reused))


if __name__ == "__main__":
    main()
