# tools/bench/ehframe verify: a mix of native code for the correctness check, in the main
# thread and in 2 other threads: zlib (libz), json and re (the interpreter), sorted, the
# vDSO's clock (time.monotonic), os.read of /dev/zero (kernel frames), and the C extension's
# deep chain. argv: the directory holding native_chain_ext, seconds.
import json
import os
import re
import sys
import threading
import time
import zlib

sys.path.insert(0, sys.argv[1])
import native_chain_ext

end = time.monotonic() + float(sys.argv[2])
blob = os.urandom(1 << 16) + b"a" * (1 << 16)
doc = json.dumps([{"k%d" % i: list(range(20))} for i in range(300)])
fd = os.open("/dev/zero", os.O_RDONLY)
pat = re.compile(r"(\w+)\s*=\s*(\d+)")
text = " ".join("x%d = %d" % (i, i) for i in range(2000))


def work(k):
    while time.monotonic() < end:
        if k == 0:
            zlib.compress(blob, 6)
            json.loads(doc)
        elif k == 1:
            sorted(range(50000), key=lambda x: -x)
            pat.findall(text)
            os.read(fd, 1 << 20)
        else:
            native_chain_ext.deep(7, 200_000)
            for _ in range(200):
                time.monotonic()


ts = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
for t in ts:
    t.start()
work(2)
for t in ts:
    t.join()
