# min-version: 3.12
# Line-table corpus: PEP 695 type parameters, nested f-strings.
type Alias[T] = list[T] | set[T]


class Box[T: (int, str)]:
    def get[U](self, other: U) -> tuple[T, U]:
        return self.value, other


def generic[*Ts, **P](f: "Callable[P, tuple[*Ts]]") -> None:
    return f"{'nested' + f'{f"{f!r}"}'}"


def comprehension_inlined(data):
    return [x for x in data if x], {k: v for k, v in data}
