# Frames whose names are not plain `def` names: <module>, class bodies (the code object is
# named after the class), lambdas, comprehensions (inlined into their function from 3.12)
# and unicode identifiers of every string kind (Latin-1, BMP, astral), method __init__ of
# a unicode class called often enough to be specialized (3.13+ pushes a shim frame for it).
# Every phase runs argv[1] seconds (default 0.3). Source must stay NFC: Python NFKC-normalizes
# identifiers, and the test compares the names byte for byte.
import sys
import time

cpu_time = getattr(time, "thread_time", time.process_time)  # CPU seconds: phases hold under load

PHASE = float(sys.argv[1]) if len(sys.argv) > 1 else 0.3

_end = cpu_time() + PHASE
_n = 0
while cpu_time() < _end: _n += 1  # HOT-MODULE


class Klass:
    _end = cpu_time() + PHASE
    _n = 0
    while cpu_time() < _end: _n += 1  # HOT-CLASS


def make_class(end):
    class Inner:
        _n = 0
        while cpu_time() < end: _n += 1  # HOT-INNER-CLASS
    return Inner


lam = lambda n: sum(range(n))  # HOT-LAMBDA


def run_lambda(end):
    while cpu_time() < end:
        lam(20000)


def make_lambda():
    return lambda n: sum(range(n))  # HOT-NESTED-LAMBDA


def run_nested_lambda(end):
    f = make_lambda()
    while cpu_time() < end:
        f(20000)


def comp_func(n):
    return [i * i for i in range(n) if i % 3]  # HOT-COMP


def run_comp(end):
    while cpu_time() < end:
        comp_func(5000)


def größe_berechnen(end):
    n = 0
    while cpu_time() < end: n += 1  # HOT-GROESSE
    return n


class Ünïcödé:
    def __init__(self, n):
        x = 0
        for i in range(n): x += i  # HOT-INIT
        self.x = x

    def 计算(self, end):
        n = 0
        while cpu_time() < end: n += 1  # HOT-JISUAN
        return n


def 𠀋_astral(end):
    n = 0
    while cpu_time() < end: n += 1  # HOT-ASTRAL
    return n


def run_init(end):
    while cpu_time() < end:
        Ünïcödé(3000)


def main():
    now = cpu_time
    make_class(now() + PHASE)
    run_lambda(now() + PHASE)
    run_nested_lambda(now() + PHASE)
    run_comp(now() + PHASE)
    größe_berechnen(now() + PHASE)
    Ünïcödé.__new__(Ünïcödé).计算(now() + PHASE)  # not via __init__: its samples are run_init's
    𠀋_astral(now() + PHASE)
    run_init(now() + PHASE)


if __name__ == "__main__":
    main()
