# A busy Python process for the agent, loss and discovery benchmarks: for argv[1] seconds
# (forever if 0) it runs a fixed, seeded mix of 24 functions called through one another at
# depths 3-40, so a profile of it has a few hundred distinct stacks, like an application.
#   busy.py SECONDS [SEED]
import random
import sys
import time

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
sys.setrecursionlimit(200)


def leaf_sum(n):
    acc = 0
    for i in range(n):
        acc += i & 7
    return acc


def leaf_str(n):
    s = ""
    for i in range(n // 8):
        s = str(i) + s[:16]
    return len(s)


def leaf_dict(n):
    d = {}
    for i in range(n // 4):
        d[i & 63] = d.get(i & 63, 0) + 1
    return len(d)


LEAVES = [leaf_sum, leaf_str, leaf_dict]

# 21 intermediate functions, each a distinct code object with its own name and line.
_src = []
for _k in range(21):
    _src.append(
        "def step_%d(path, i, n):\n"
        "    if i >= len(path):\n"
        "        return LEAVES[path[-1] %% 3](n)\n"
        "    return STEPS[path[i]](path, i + 1, n) + %d\n" % (_k, _k)
    )
_ns = {"LEAVES": LEAVES}
exec(compile("\n".join(_src), __file__ + ":steps", "exec"), _ns)
STEPS = [_ns["step_%d" % k] for k in range(21)]
_ns["STEPS"] = STEPS

rng = random.Random(seed)
# A fixed set of 60 call paths (the stacks this process shows), depth 3-40.
PATHS = [[rng.randrange(21) for _ in range(rng.choice([3, 5, 8, 12, 20, 30, 40]))] for _ in range(60)]


def run():
    end = time.monotonic() + seconds if seconds > 0 else float("inf")
    k = 0
    while time.monotonic() < end:
        path = PATHS[k % len(PATHS)]
        STEPS[path[0]](path, 1, 2000)
        k += 1


run()
