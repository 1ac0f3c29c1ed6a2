#!/usr/bin/env python3
"""Dump line tables and the interpreter's own answer for every instruction.

Usage: python3.X dump_linetables.py [CORPUS_DIR] [--no-stdlib]

Compiles (never executes) every *.py file in CORPUS_DIR that this interpreter can
parse (a '# min-version: 3.N' line in the first lines marks newer syntax), a set of
generated sources (line gaps > 127 / > 255, long single lines, huge functions,
EXTENDED_ARG, big backwards line deltas, large first line numbers), and a few stdlib
modules. Walks every code object recursively through co_consts and prints one JSON
document on stdout:

  {"version": "3.11.7", "format": "lnotab" | "linetable310" | "locations311",
   "unit": "bytes" | "code_units",
   "code_objects": [{"where": "file:qualified.name", "firstlineno": N,
                     "table": "<hex>", "code_len": <bytes of co_code>,
                     "offsets": [...], "lines": [...]}]}

offsets are what the interpreter's frames record for that version (f_lasti in bytes
up to 3.9, f_lasti in code units in 3.10, the code-unit index from 3.11 on), and
lines[i] is the line CPython gives offsets[i] (0 when it has none):
  <= 3.9: instruction boundaries from dis, each with the last dis.findlinestarts()
          line start at or before it; offsets past the end of the code get the last
          line, as PyCode_Addr2Line does.
  3.10:   co_lines() byte ranges mapped to code units; None -> 0; past the end -> 0.
  3.11+:  co_positions(), one entry per code unit (CACHE entries included);
          None -> 0; past the end -> 0.
Runs on every CPython from 3.6 on (no newer syntax in this file).
"""
import binascii
import dis
import json
import os
import re
import sys
import types

VI = sys.version_info
if VI < (3, 10):
    FORMAT, UNIT = "lnotab", "bytes"
elif VI < (3, 11):
    FORMAT, UNIT = "linetable310", "code_units"
else:
    FORMAT, UNIT = "locations311", "code_units"

PAST_END_PROBES = (0, 1, 7, 1000)  # offsets past the end of the code, in the unit


# ---- generated sources -------------------------------------------------------------

def gen_sources():
    """(name, source) pairs exercising encoder corner cases."""
    out = []

    # Line gaps just over the int8 and uint8 limits, and far beyond, forwards.
    for gap in (126, 127, 128, 129, 254, 255, 256, 257, 300, 1000, 70000):
        src = "def gap_%d(a):\n    x = a + 1\n%s    y = x * 2\n%s    return y\n" % (
            gap, "\n" * gap, "#\n" * gap)
        out.append(("gen_gap_%d" % gap, src))

    # Big backwards deltas: a call whose arguments span many lines, so the
    # instructions after the last argument return to earlier lines.
    for span in (100, 130, 260, 600):
        items = "".join("        a[%d],\n" % i for i in range(span))
        src = ("def back_%d(f, g, a):\n    return f(g([\n%s        0]),\n"
               "    1)\n" % (span, items))
        out.append(("gen_back_%d" % span, src))
    # Backwards across a huge gap: the ternary's condition sits far below its value.
    src = "def ternary(c, a, b):\n    return (a\n%s            if c\n%s            else b)\n" % (
        "\n" * 300, "\n" * 300)
    out.append(("gen_ternary_gap", src))

    # Lots of bytecode on a single line (> 255 bytes, > 254 units, > 8 units/entry).
    for n in (50, 200, 700):
        src = "def oneline_%d(a):\n    x = [%s]\n    return x\n" % (n, ", ".join(["a"] * n))
        out.append(("gen_oneline_%d" % n, src))
    # Very wide lines: columns beyond the short/one-line forms (>= 80, >= 128, >= 256).
    for col in (70, 79, 80, 127, 128, 255, 256, 1000):
        src = "def wide_%d(a, b):\n    x = %s a + b\n    return (%s b\n        + a)\n" % (
            col, " " * col, " " * col)
        out.append(("gen_wide_%d" % col, src))

    # Huge functions: > 300 instructions, > 256 locals and constants (EXTENDED_ARG),
    # and loops whose jumps span more than 255 (and 65535 bytes).
    body = "".join("    v%d = a + %d\n" % (i, i) for i in range(400))
    out.append(("gen_huge_locals", "def huge_locals(a):\n%s    return v0\n" % body))
    loop = "".join("        t = t + %d * i\n" % i for i in range(300))
    out.append(("gen_long_loop",
                "def long_loop(n):\n    t = 0\n    for i in range(n):\n%s"
                "        if t > 5:\n            continue\n    while t:\n%s"
                "        t -= 1\n    return t\n" % (loop, loop)))
    giant = "".join("        if a == %d:\n            r = %d.5\n" % (i, i) for i in range(6000))
    out.append(("gen_giant_jumps",
                "def giant(a):\n    r = 0\n    while a:\n%s        a -= 1\n    return r\n" % giant))
    # Many small statements, each its own line; then one statement spanning many lines.
    stm = "".join("    s%d = %d\n" % (i, i) for i in range(600))
    out.append(("gen_many_lines", "def many_lines():\n%s    return s0\n" % stm))

    # A function defined at a large first line number, with a decorator far above it.
    src = "\n" * 5000 + "@dec\n" + "\n" * 200 + "def far_away(x):\n    return x\n"
    out.append(("gen_far_away", src))

    # Deep nesting of functions and classes.
    src, ind = "", ""
    for depth in range(20):
        kind = "class" if depth % 3 == 2 else "def"
        src += "%s%s nest_%d%s:\n%s    x%d = %d\n" % (
            ind, kind, depth, "" if kind == "class" else "()", ind, depth, depth)
        ind += "    "
    src += "%sreturn 0\n" % ind
    out.append(("gen_nested", src))

    # Exception handling around a long body (exception table / SETUP_FINALLY ranges).
    inner = "".join("            x%d = f(%d)\n" % (i, i) for i in range(200))
    out.append(("gen_try_long",
                "def try_long(f):\n    for k in range(3):\n        try:\n%s"
                "        except ValueError:\n            return 1\n        finally:\n"
                "            f(None)\n    return 0\n" % inner))
    return out


# ---- corpus --------------------------------------------------------------------------

MIN_RE = re.compile(r"#\s*min-version:\s*(\d+)\.(\d+)")


def corpus_sources(corpus_dir):
    out = []
    if not corpus_dir:
        return out
    for name in sorted(os.listdir(corpus_dir)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(corpus_dir, name), "rb") as f:
            data = f.read()
        head = data[:400].decode("utf-8", "replace")
        m = MIN_RE.search(head)
        if m and VI[:2] < (int(m.group(1)), int(m.group(2))):
            continue
        out.append((name, data))
    return out


STDLIB = ("argparse.py", "dis.py", "inspect.py", "typing.py", "tarfile.py",
          "asyncio/base_events.py", "json/decoder.py", "_pydecimal.py")


def stdlib_sources():
    out = []
    base = os.path.dirname(os.__file__)
    for rel in STDLIB:
        path = os.path.join(base, rel)
        if os.path.exists(path):
            with open(path, "rb") as f:
                out.append(("stdlib/" + rel, f.read()))
    return out


# ---- ground truth --------------------------------------------------------------------

def raw_table(co):
    if FORMAT == "lnotab":
        return co.co_lnotab
    return co.co_linetable


def truth_lnotab(co):
    starts = list(dis.findlinestarts(co))
    # Wordcode (3.6+): every 2-byte unit is an instruction, EXTENDED_ARG included.
    # dis agrees; it is only asked for small functions, being quadratic in the
    # number of jump targets.
    offsets = list(range(0, len(co.co_code), 2))
    if len(co.co_code) < 4096:
        assert offsets == [ins.offset for ins in dis.get_instructions(co)]
    lines = []
    j, line = 0, 0
    for off in offsets:  # offsets ascend
        while j < len(starts) and starts[j][0] <= off:
            line = starts[j][1]
            j += 1
        lines.append(line)
    end = len(co.co_code)
    last = starts[-1][1] if starts else co.co_firstlineno
    for extra in PAST_END_PROBES:
        offsets.append(end + 2 * extra)
        lines.append(last)
    return offsets, lines


def truth_lines310(co):
    units = len(co.co_code) // 2
    lines = [0] * units
    covered = [False] * units
    for start, end, line in co.co_lines():
        for b in range(start, end):
            if b % 2 == 0 and b // 2 < units:
                if covered[b // 2]:
                    raise AssertionError("overlapping co_lines ranges")
                covered[b // 2] = True
                lines[b // 2] = line if line is not None else 0
    offsets = list(range(units))
    for extra in PAST_END_PROBES:
        offsets.append(units + extra)
        lines.append(0)
    return offsets, lines


def truth_positions311(co):
    units = len(co.co_code) // 2
    lines = [0] * units
    for i, pos in enumerate(co.co_positions()):
        if i >= units:
            raise AssertionError("co_positions longer than the code")
        lines[i] = pos[0] if pos[0] is not None else 0
    offsets = list(range(units))
    for extra in PAST_END_PROBES:
        offsets.append(units + extra)
        lines.append(0)
    return offsets, lines


TRUTH = {"lnotab": truth_lnotab, "linetable310": truth_lines310,
         "locations311": truth_positions311}[FORMAT]


def walk(co, where, out):
    name = getattr(co, "co_qualname", co.co_name)
    offsets, lines = TRUTH(co)
    out.append({
        "where": "%s:%s" % (where, name),
        "firstlineno": co.co_firstlineno,
        "table": binascii.hexlify(raw_table(co)).decode("ascii"),
        "code_len": len(co.co_code),
        "offsets": offsets,
        "lines": lines,
    })
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            walk(c, where, out)


def main(argv):
    corpus_dir = None
    use_stdlib = True
    for a in argv[1:]:
        if a == "--no-stdlib":
            use_stdlib = False
        else:
            corpus_dir = a
    sources = corpus_sources(corpus_dir) + gen_sources()
    if use_stdlib:
        sources += stdlib_sources()
    code_objects = []
    files = []
    for name, src in sources:
        co = compile(src, name, "exec", dont_inherit=True)
        files.append(name)
        walk(co, name, code_objects)
    json.dump({
        "version": "%d.%d.%d" % VI[:3],
        "format": FORMAT,
        "unit": UNIT,
        "files": files,
        "code_objects": code_objects,
    }, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
