# Ground truth for tests/unit/test_discovery.cpp: what the interpreter itself knows about
# where its runtime lives. Runs under every CPython 3.6+ (passed with -c, so it also works
# inside a chroot). Prints "key value..." lines, then "ready", then sleeps until killed.
import ctypes
import os
import sys
import time

api = ctypes.pythonapi


def addr(name):
    try:
        return ctypes.addressof(ctypes.c_char.in_dll(api, name))
    except ValueError:
        return 0


api.PyInterpreterState_Head.restype = ctypes.c_void_p
head = api.PyInterpreterState_Head() or 0

# Which mapped file holds the runtime, as this process sees it (test ground truth only).
# "?" when /proc is not mounted (a bare chroot): the test then looks from outside.
libpython = "-"
exe = "?"
try:
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and "/libpython" in parts[5]:
                libpython = parts[5].strip()
                break
    exe = os.readlink("/proc/self/exe")
except OSError:
    libpython = "?"

v = sys.version_info
print("runtime", addr("_PyRuntime"))
print("head", head)
print("codetype", addr("PyCode_Type"))
print("pyversion", addr("Py_Version"))
print("version", v.major, v.minor, v.micro, sys.hexversion)
print("exe", exe)
print("libpython", libpython)
print("ready")
sys.stdout.flush()
time.sleep(600)
