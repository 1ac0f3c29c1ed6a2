# A thread that never stops changing its stack, for dumps read while it runs
# (tests/integration/test_dump.cpp): it compiles new functions (gen_N, in "<gen>") and calls them
# at varying depths through a() and b(), so frames come and go and code objects are freed and
# replaced at the same addresses. Prints "ready" once it runs; runs until killed.
import sys
import threading


def a(depth, fn):
    return b(depth - 1, fn) if depth > 0 else fn()


def b(depth, fn):
    return a(depth - 1, fn) if depth > 0 else fn()


def churn():
    n = 0
    while True:
        n += 1
        ns = {}
        exec(compile("def gen_%d():\n    return sum(range(%d))\n" % (n, 200 + n % 300), "<gen>", "exec"), ns)
        a(n % 40, ns["gen_%d" % n])


t = threading.Thread(target=churn, name="churn", daemon=True)
t.start()
print("ready", flush=True)
t.join()
