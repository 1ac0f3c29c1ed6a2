# -*- coding: utf-8 -*-
# Line-table corpus: syntax every CPython 3.6+ accepts. Compiled, never executed.
import os, sys
from functools import wraps

CONSTANT = 1

def simple(a, b=2, *args, c, d=4, **kw):
    x = a + b
    y = (x *
         2)
    return x + y


def deco(f):
    @wraps(f)
    def wrapper(*a, **k):
        return f(*a, **k)
    return wrapper


@deco
@deco
def decorated(n):
    total = 0
    for i in range(n):
        if i % 2:
            continue
        elif i > 100:
            break
        total += i
    else:
        total = -1
    while total > 10:
        total -= 3
    else:
        pass
    return total


def closures():
    a = 1
    def inner():
        nonlocal a
        a += 1
        def innermost():
            return a * 2
        return innermost
    return inner


def generator(n):
    for i in range(n):
        yield i
        yield from range(i)
    x = yield
    return x


def comprehensions(data):
    a = [x for x in data if x]
    b = {x: y for x, y in zip(data, data)}
    c = {x for x in data}
    d = (x
         for x in data
         if x)
    e = [[y for y in range(x)] for x in data]
    f = lambda q: [q
                   for _ in data]
    return a, b, c, d, e, f


def exceptions(path):
    try:
        f = open(path)
    except (OSError, ValueError) as e:
        print(e)
        raise RuntimeError("x") from e
    except Exception:
        pass
    else:
        f.close()
    finally:
        print("done")
    try:
        try:
            1 / 0
        finally:
            return 3
    except ZeroDivisionError:
        return 4


def with_statements(a, b):
    with open(a) as fa, open(b) as fb:
        data = fa.read() + fb.read()
    with open(a):
        pass
    return data


async def coro(session, urls):
    results = []
    async with session.get(urls[0]) as r:
        results.append(await r.text())
    async for item in session.stream():
        results.append(item)
    return [x async for x in session.stream() if await x]


async def async_gen():
    for i in range(3):
        yield i
        await something()


class Outer:
    attr = 1

    class Inner:
        value = [1, 2, 3]

        def method(self):
            class Local:
                def deep(self):
                    return __class__
            return Local

    @property
    def prop(self):
        return self.attr

    @staticmethod
    def smethod(
            a,
            b,
    ):
        return (a
                +
                b)

    @classmethod
    def cmethod(cls):
        return super().__init_subclass__()


def multiline_call():
    return simple(
        1,
        2,
        3,
        c=4,
        d=[
            5,
            6,
        ],
    )


def backwards_lines(cond, a, b):
    x = (a
         if cond
         else b)
    y = (
        a
        +
        b
    ) * (
        a
        -
        b
    )
    return foo(bar(baz(
        x,
        y),
        y),
        x)


def chained(a, b, c):
    assert a < b <= c, (
        "message"
    )
    del a
    first, *rest = b
    return f"{b!r:>{c}} and {rest}"


def función_ñ(λ, 变量=1):
    ñandú = λ + 变量
    return ñandú


class Ünïcode:
    def métod(self):
        return "ü"


def global_stuff():
    global CONSTANT
    CONSTANT += 1
    return CONSTANT


def star_args(*a, **k):
    return simple(*a, *a, **k, **k)


def conditional_returns(x):
    if x:
        return 1
    if not x:
        return 2
    return 3


def empty():
    pass


def only_docstring():
    """Docstring only."""


lam = lambda: 0
lam2 = (lambda x:
        x + 1)

if __name__ == "__main__":
    for z in range(3):
        print(z)
