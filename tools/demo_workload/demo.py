# The bundled demo workload: a small "service" with a few recognisable hot spots,
# a worker thread, and a child process, for about argv[1] seconds (default 5).
import json
import multiprocessing
import sys
import threading
import time


class Tokenizer:
    def tokenize(self, text):
        return [w.strip(".,;:!?").lower() for w in text.split()]


class Index:
    def __init__(self):
        self.postings = {}

    def add(self, doc_id, tokens):
        for t in tokens:
            self.postings.setdefault(t, set()).add(doc_id)

    def query(self, words):
        sets = [self.postings.get(w, set()) for w in words]
        return set.intersection(*sets) if sets else set()


def fibonacci(n):
    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)


def render_report(rows):
    return json.dumps([{"id": i, "value": v, "square": v * v} for i, v in enumerate(rows)])


def indexing_service(end):
    tok, idx = Tokenizer(), Index()
    text = "The quick brown fox jumps over the lazy dog. " * 40
    doc = 0
    while time.monotonic() < end:
        idx.add(doc, tok.tokenize(text))
        idx.query(["quick", "dog"])
        doc += 1


def background_worker(end):
    while time.monotonic() < end:
        fibonacci(18)


def child_process(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        render_report(range(2000))


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    end = time.monotonic() + seconds
    child = multiprocessing.Process(target=child_process, args=(seconds,))
    child.start()
    t = threading.Thread(target=background_worker, args=(end,), name="background")
    t.start()
    indexing_service(end)
    t.join()
    child.join()


if __name__ == "__main__":
    main()
