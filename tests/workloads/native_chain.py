# --native tests: outer() calls the C extension's a(), which calls b(), which spins.
# argv: the directory holding native_chain_ext, seconds to run.
import sys
import time

sys.path.insert(0, sys.argv[1])
import native_chain_ext


def outer():
    return native_chain_ext.a(2_000_000)


end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    outer()
