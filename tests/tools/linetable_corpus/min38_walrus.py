# min-version: 3.8
# Line-table corpus: walrus operator, positional-only parameters, f-string '='.
def walrus(data):
    if (n := len(data)) > 10:
        return n
    while (chunk := data[:2]):
        data = data[2:]
    return [y for x in data if (y := x * 2)]


def posonly(a, b, /, c, *, d):
    return f"{a=} {b=!r}"


try:
    pass
finally:
    for _ in range(2):
        continue
