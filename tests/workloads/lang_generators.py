# Generator and coroutine frames sit where they run: under the frame that resumed them.
# Three phases of argv[1] seconds each (default 0.6):
#   consume_gen  -> gen_hot                      (a for loop pulling from a generator)
#   consume_yf   -> yf_outer -> yf_inner         (a `yield from` chain)
#   drive_coro   -> coro_outer -> coro_inner     (a coroutine driven by send())
import sys
import time

cpu_time = getattr(time, "thread_time", time.process_time)  # CPU seconds: phases hold under load


def gen_hot():
    while True:
        x = 0
        for i in range(3000):  # HOT-GEN
            x += i
        yield x


# Each consumer closes its generator on a marked line: a generator dropped elsewhere (at the
# loop's break, at return) is closed there, running its frame once more under that line.
def consume_gen(end):
    n = 0
    g = gen_hot()
    for v in g:  # RESUME-GEN
        n += 1
        if cpu_time() > end:
            break
    g.close()  # CLOSE-GEN
    return n


def yf_inner():
    while True:
        x = 0
        for i in range(3000):  # HOT-YF
            x += i
        yield x


def yf_outer():
    yield from yf_inner()  # RESUME-YF-OUTER


def consume_yf(end):
    n = 0
    g = yf_outer()
    while cpu_time() < end:
        next(g)  # RESUME-YF
        n += 1
    g.close()  # CLOSE-YF
    return n


class Suspend:
    def __await__(self):
        yield


async def coro_inner():
    x = 0
    for i in range(3000):  # HOT-CORO
        x += i
    await Suspend()
    return x


async def coro_outer():
    while True:
        await coro_inner()  # RESUME-CORO-OUTER


def drive_coro(end):
    c = coro_outer()
    n = 0
    while cpu_time() < end:
        c.send(None)  # RESUME-CORO
        n += 1
    c.close()  # CLOSE-CORO
    return n


def main():
    phase = float(sys.argv[1]) if len(sys.argv) > 1 else 0.6
    consume_gen(cpu_time() + phase)
    consume_yf(cpu_time() + phase)
    drive_coro(cpu_time() + phase)


if __name__ == "__main__":
    main()
