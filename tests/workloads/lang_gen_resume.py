# Generators resumed from C in a tight loop, through C call paths of different depths: each
# resume enters the eval loop anew, at a C stack address another path used a moment before.
# On 3.11/3.12, for a few instructions of each entry tstate->cframe already points at the
# new _PyCFrame while its current_frame and previous still hold whatever was at that address.
# Whatever is sampled then, while resume_all runs every stack is
# <module> <- main <- resume_all [<- gen], or a sample marked as taken in that window.
# argv[1]: CPU seconds to run (default 2).
import functools
import itertools
import sys
import time

cpu_time = getattr(time, "thread_time", time.process_time)  # CPU seconds: holds under load
islice = itertools.islice


def gen():  # a generator being created runs here: GEN-DEF
    while True:  # GEN-LOOP
        yield 1  # HOT-GEN


def resume_all(end):
    g = [gen(), gen(), gen(), gen(), gen(), gen(), gen(), gen()]  # no comprehension: its frame on 3.11
    nx = next
    send = g[1].send
    call_next = functools.partial(next, g[5])
    n = 0
    while True:
        nx(g[0])  # RESUME
        send(None)  # RESUME
        for _ in zip(g[2], (1,)):  # RESUME
            pass
        for _ in map(nx, (g[3],)):  # RESUME
            pass
        list(islice(g[4], 1))  # RESUME
        call_next()  # RESUME
        sum(islice(g[6], 1))  # RESUME
        sorted(islice(g[7], 1))  # RESUME
        n += 1
        if not n & 255 and cpu_time() > end:
            return n


def main():
    resume_all(cpu_time() + (float(sys.argv[1]) if len(sys.argv) > 1 else 2.0))


if __name__ == "__main__":
    main()
