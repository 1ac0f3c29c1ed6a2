# A process with a thread a C library made (tests/workloads/c_thread_spinner.c, built as the
# shared object argv[1]): it computes in C, with no Python thread state, for argv[2] seconds
# of its CPU time (default 1), naming itself "pbp-cspin" 90% of the way, while the main thread waits for it in pthread_join
# (off CPU). Prints "spinner started" once it runs.
import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1])
lib.pbp_start_spinner.argtypes = [ctypes.c_double]
if lib.pbp_start_spinner(float(sys.argv[2]) if len(sys.argv) > 2 else 1.0) != 0:
    sys.exit("c_thread.py: pthread_create failed")
print("spinner started", flush=True)
lib.pbp_join_spinner()
