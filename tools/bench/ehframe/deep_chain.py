# tools/bench/ehframe: Python -> native_chain_ext.deep(DEPTH, ...) -> down() x DEPTH -> b(), which
# spins; in a loop for SECONDS. argv: the directory holding native_chain_ext, seconds, depth.
import sys
import time

sys.path.insert(0, sys.argv[1])
import native_chain_ext

depth = int(sys.argv[3]) if len(sys.argv) > 3 else 20


def outer():
    return native_chain_ext.deep(depth, 2_000_000)


end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    outer()
