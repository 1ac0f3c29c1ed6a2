# Wall mode's place check (bpf/offcpu.bpf.h): two functions block at the same place in the C
# code (os.read on the same pipe, called from the same depth of Python: on 3.11+ the same eval
# loop call, so the same user ip and sp at the system call), one with short waits, the other
# with long ones. quick() asks a peer thread for a byte it sends at once; slow() asks for one
# it sends 40 ms later. Each round is 100 quick reads, then one slow read: the place's stack
# (quick's) must not be reused for slow's read, although everything but the Python frames is
# the same.
#
#   python wall_same_place.py SECONDS
#
# Prints "measured slow_ms=S quick_ms=Q rounds=N": the time spent in each function's reads.
import os
import sys
import threading
import time

requests_r, requests_w = os.pipe()
answers_r, answers_w = os.pipe()


def peer():
    while True:
        b = os.read(requests_r, 1)
        if b == b"q":
            return
        if b == b"s":
            time.sleep(0.04)
        os.write(answers_w, b"x")


def quick():
    os.write(requests_w, b"f")
    t = time.monotonic()
    os.read(answers_r, 1)  # QUICK READ
    return time.monotonic() - t


def slow():
    os.write(requests_w, b"s")
    t = time.monotonic()
    os.read(answers_r, 1)  # SLOW READ
    return time.monotonic() - t


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3
    th = threading.Thread(target=peer, name="peer")
    th.start()
    quick_s = slow_s = 0.0
    rounds = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(100):
            quick_s += quick()
        slow_s += slow()
        rounds += 1
    os.write(requests_w, b"q")
    th.join()
    print("measured slow_ms=%.1f quick_ms=%.1f rounds=%d" % (slow_s * 1e3, quick_s * 1e3, rounds))
    sys.stdout.flush()


main()
