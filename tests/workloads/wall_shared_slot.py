# Threads whose tids share one home slot of wall mode's slot table when it has SLOTS slots
# (PYBPFPROF_OFFCPU_SLOTS; userspace/engine/offcpu_table.h): threads are started one at a time
# and kept only when their tid is the main thread's modulo SLOTS (the others end at once, and
# are joined before the next starts), until KEEP are kept. Kept thread K sleeps in napping_K,
# 50 ms at a time; the main thread waits in select. Prints "napping_K TID" for each, then
# "ready", and ends SECONDS later (Python 3.8+: threading.get_native_id).
#
#   python wall_shared_slot.py SLOTS KEEP SECONDS
import select
import sys
import threading
import time


def nap(stop):
    while not stop.is_set():
        time.sleep(0.05)  # NAP


def napping_0(stop):
    nap(stop)


def napping_1(stop):
    nap(stop)


def napping_2(stop):
    nap(stop)


NAPPERS = [napping_0, napping_1, napping_2]


def main():
    slots, keep, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    home = threading.get_native_id() % slots
    stop = threading.Event()
    kept = []
    for _ in range(100000):
        if len(kept) == keep:
            break
        tid = []
        go = threading.Event()

        def body(tid=tid, go=go, napper=NAPPERS[len(kept)]):
            tid.append(threading.get_native_id())
            go.wait()
            if tid[0] % slots == home:
                napper(stop)

        t = threading.Thread(target=body)
        t.start()
        while not tid:
            time.sleep(0.001)
        if tid[0] % slots == home:
            print("napping_%d %d" % (len(kept), tid[0]))
            go.set()
            kept.append(t)
        else:
            go.set()
            t.join()
    time.sleep(0.3)  # the threads that ended are gone from the kernel too
    print("ready")
    sys.stdout.flush()
    select.select([], [], [], seconds)
    stop.set()
    for t in kept:
        t.join()


main()
