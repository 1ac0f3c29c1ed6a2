# An import-heavy start: generates a package tree of argv[1] modules (default 300) in a fresh
# temporary directory, in packages of 30, then imports them all. Each module body computes
# (argv[2] iterations of its loop, default 20000) at import and is freed right after, as module
# bodies are: the frames a profiler must name although their code objects are gone before it
# reads them. No bytecode is cached: every run compiles. The generated files (their path is
# printed first, with the two lines) are removed at exit. Ground truth: each module body's loop runs at its lines
# marked MODULE-LOOP and MODULE-BODY (the same line numbers in every module).
import importlib
import os
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True

MODULE = '''"""Generated module {i}."""
import math


def helper_{i}(x):
    return math.sqrt(x + {i})


total = 0
for k in range({work}):  # MODULE-LOOP
    total += (k * {i}) % 7 + (k & 3)  # MODULE-BODY
VALUE = helper_{i}(total)
'''


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    work = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    root = tempfile.mkdtemp(prefix="pbp-import-tree-")
    try:
        names = []
        for i in range(count):
            pkg = "pbp_tree_pkg%d" % (i // 30)
            d = os.path.join(root, pkg)
            if not os.path.isdir(d):
                os.mkdir(d)
                with open(os.path.join(d, "__init__.py"), "w") as f:
                    f.write("")
            with open(os.path.join(d, "mod%d.py" % i), "w") as f:
                f.write(MODULE.format(i=i, work=work))
            names.append("%s.mod%d" % (pkg, i))
        lines = MODULE.splitlines()
        loop = 1 + next(n for n, l in enumerate(lines) if l.endswith("# MODULE-LOOP"))
        body = 1 + next(n for n, l in enumerate(lines) if l.endswith("# MODULE-BODY"))
        print("tree %s lines %d %d" % (root, loop, body), flush=True)
        sys.path.insert(0, root)
        s = 0.0
        for n in names:
            s += importlib.import_module(n).VALUE
        print("imported %d modules (%.1f)" % (len(names), s), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


main()
