# Sub-interpreters (3.12+): a thread runs sub_hot() in a new sub-interpreter (the module is
# loaded there again from this file) while the main thread spins in main_hot(). Both run
# argv[1] seconds of CPU time (default 1.5). Prints what the sub-interpreter reported.
import sys
import threading
import time


def sub_hot(seconds):
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end: n += 1  # HOT-SUB
    return n


def main_hot(seconds):
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end: n += 1  # HOT-MAIN
    return n


def run_sub(seconds, result):
    try:
        import _interpreters as interpreters  # 3.13+
    except ImportError:
        import _xxsubinterpreters as interpreters  # 3.12
    iid = interpreters.create()
    code = (
        "import importlib.util as u\n"
        "s = u.spec_from_file_location('lang_subinterp', %r)\n"
        "m = u.module_from_spec(s)\n"
        "s.loader.exec_module(m)\n"
        "m.sub_hot(%r)\n" % (__file__, seconds)
    )
    result.append(interpreters.run_string(iid, code))  # 3.13+: an error snapshot or None
    interpreters.destroy(iid)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5
    result = []
    t = threading.Thread(target=run_sub, args=(seconds, result))
    t.start()
    main_hot(seconds)
    t.join()
    print("sub-interpreter result:", result)
    sys.stdout.flush()
    if result != [None]:
        sys.exit(1)


if __name__ == "__main__":
    main()
