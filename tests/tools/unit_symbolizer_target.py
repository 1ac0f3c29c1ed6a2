# -*- coding: utf-8 -*-
# Ground truth for tests/unit/test_symbolizer.cpp (CPython 3.11+). Defines functions, then
# prints for each code object its address, co_firstlineno, a chosen code-unit index and that
# instruction's line (from co_positions), and the line of every code unit. Sleeps until
# the file named by argv[1] appears, then frees one code object and allocates new ones until
# one lands at the freed address (a real address reuse), prints it, and sleeps again.
import dis
import gc
import os
import sys
import time

TRIGGER = sys.argv[1]


class Klass:
    def method(self, n):
        total = 0
        for i in range(n):
            total += i * 3
        return total


def grüße(name):
    greeting = "hallo " + name
    return greeting.upper()


def 計算する(values):
    result = 0
    for v in values:
        result += v
    return result


def module_function(a, b):
    c = a * b
    d = c - a
    return d


def outer():
    def inner(x):
        y = x + 1
        return y
    return inner


INNER_LINE = sys._getframe().f_lineno; inner = outer()  # noqa: E702
MODULE_CODE = sys._getframe().f_code


def hexs(s):
    return s.encode("utf-8").hex() or "-"


def unit_lines(code):
    pos = list(code.co_positions())
    if len(pos) != len(code.co_code) // 2:
        raise SystemExit("co_positions() is not per code unit")
    return [p[0] for p in pos]


def chosen(code, line):
    # The last real instruction (not a CACHE entry) on 'line'.
    lines = unit_lines(code)
    best = None
    for ins in dis.get_instructions(code):
        if lines[ins.offset // 2] == line:
            best = ins.offset // 2
    if best is None:
        raise SystemExit("no instruction on line %d of %s" % (line, code.co_qualname))
    return best


def report(label, code, line):
    i = chosen(code, line)
    lines = unit_lines(code)
    print("code", label, id(code), code.co_firstlineno, i, lines[i], hexs(code.co_qualname),
          hexs(code.co_filename))
    print("units", label, ",".join("-" if l is None else str(l) for l in lines))


TARGETS = [
    ("method", Klass.method.__code__, Klass.method.__code__.co_firstlineno + 3),
    ("latin", grüße.__code__, grüße.__code__.co_firstlineno + 2),
    ("cjk", 計算する.__code__, 計算する.__code__.co_firstlineno + 3),
    ("modfunc", module_function.__code__, module_function.__code__.co_firstlineno + 2),
    ("inner", inner.__code__, inner.__code__.co_firstlineno + 2),
    ("module", MODULE_CODE, INNER_LINE),
]


def make(name, first):
    src = "\n" * (first - 1) + "def %s(a, b):\n    c = a + b\n    return c * 2\n" % name
    ns = {}
    exec(compile(src, "<reuse>", "exec"), ns)
    code = ns[name].__code__
    ns.clear()
    return code


victim = make("victim", 10)
# Code objects of the victim's size, freed after it: a block freed later is handed out first
# (the allocators are LIFO), so the objects the next compile() allocates and keeps take these,
# and the victim's own block is left for a code object.
decoys = [make("decoy_%d" % i, 10) for i in range(64)]
for label, code, line in TARGETS:
    report(label, code, line)
report("victim", victim, 12)
print("ready")
sys.stdout.flush()

while not os.path.exists(TRIGGER):
    time.sleep(0.02)

addr = id(victim)
del victim
del decoys
gc.collect()
keep = []
found = None
for k in range(20000):
    c = make("newcomer_%d" % k, 100 + k)
    if id(c) == addr:
        found = c
        break
    keep.append(c)
if found is None:
    print("newcomer-none")
else:
    report("newcomer", found, found.co_firstlineno + 2)
print("swapped")
sys.stdout.flush()
time.sleep(600)
