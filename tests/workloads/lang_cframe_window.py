# 3.11/3.12 only. Holds, for most of a run, the state a sample sees in the few instructions
# after _PyEval_EvalFrameDefault has published its new _PyCFrame (tstate->cframe = &cframe)
# and before it has written the cframe's current_frame and previous: whatever an earlier
# call left at that C stack address, here zeros. It points tstate->cframe at a zeroed cframe
# and runs C code only (a regex that backtracks: the eval loop is not entered), then puts the
# real cframe back. That is a thread in an eval loop call, never one without Python frames.
# argv[1]: CPU seconds; argv[2]: offsetof(PyThreadState, cframe).
import ctypes
import re
import sys
import time

cpu_time = time.thread_time
get_tstate = ctypes.pythonapi.PyThreadState_Get
get_tstate.restype = ctypes.c_void_p
slot = ctypes.c_uint64.from_address(get_tstate() + int(sys.argv[2]))
zeroed = (ctypes.c_uint64 * 4)()  # use_tracing/current_frame/previous (3.11), current_frame/previous (3.12)
backtracks = re.compile(r"(a|aa)*b")  # Fibonacci many paths to fail, all in sre's C loop
subject = "a" * 24


def window():
    real = slot.value
    slot.value = ctypes.addressof(zeroed)
    try:
        backtracks.match(subject)  # WINDOW
    finally:
        slot.value = real


def spin(end):
    n = 0
    while cpu_time() < end:  # HOT-SPIN
        n += 1


def main(end):
    while cpu_time() < end:
        window()
        spin(cpu_time() + 0.01)


if __name__ == "__main__":
    main(cpu_time() + float(sys.argv[1]))
