# min-version: 3.10
# Line-table corpus: structural pattern matching, parenthesized context managers.
def matcher(command):
    match command.split():
        case [action]:
            return action
        case [action, obj]:
            return action, obj
        case ["go", ("north" | "south" | "east" | "west") as direction]:
            return direction
        case ["drop", *objects] if objects:
            return objects
        case {"x": x, "y": y, **rest}:
            return x, y, rest
        case Point(x=0, y=0):
            return "origin"
        case Point(
            x=px,
            y=py,
        ):
            return px, py
        case 1 | 2 | 3:
            return "small"
        case str() | bytes():
            return "text"
        case _:
            return None


def nested_match(value):
    match value:
        case [1, [2, [3, *tail]]]:
            match tail:
                case []:
                    return 0
                case [_, *_]:
                    return len(tail)
        case (a, b) if a > b:
            return a
        case other:
            return other


def parenthesized_with(a, b):
    with (
        open(a) as fa,
        open(b) as fb,
    ):
        return fa.read(), fb.read()
