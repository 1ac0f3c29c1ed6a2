# A Dask workload for the HTML report's screenshot (docs/report-dask.png): a LocalCluster
# with 2 worker processes runs CPU-bound tasks for about argv[1] seconds (default 10), in
# three phases: pure-Python number crunching, a pandas group-by, then JSON round trips.
#
#   sudo pybpfprof --all-python -d 12 -f html -o /tmp/dask.html &
#   /usr/bin/python3 tools/demo_workload/dask_demo.py 10
#
# Needs Debian's python3-distributed python3-dask python3-pandas (run with /usr/bin/python3).
import json
import sys
import time

import dask
from dask.distributed import Client, LocalCluster


def count_primes(lo, hi):
    n = 0
    for k in range(max(lo, 2), hi):
        d = 2
        while d * d <= k:
            if k % d == 0:
                break
            d += 1
        else:
            n += 1
    return n


def monte_carlo_pi(seed, n):
    x = seed
    inside = 0
    for _ in range(n):
        x = (1103515245 * x + 12345) & 0x7FFFFFFF
        a = x / 0x7FFFFFFF
        x = (1103515245 * x + 12345) & 0x7FFFFFFF
        b = x / 0x7FFFFFFF
        inside += a * a + b * b <= 1.0
    return 4.0 * inside / n


def groupby_summary(seed, rows):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"key": rng.integers(0, 500, rows), "value": rng.random(rows)})
    df["label"] = df["key"].map(lambda k: "k%03d" % k)  # per-row Python: shows in the profile
    return df.groupby("label")["value"].agg(["mean", "sum", "count"]).shape[0]


def json_round_trip(seed, n):
    doc = [{"id": i, "name": "item-%d" % (i * seed), "tags": ["a", "b", str(i)]} for i in range(n)]
    total = 0
    for _ in range(20):
        total += len(json.loads(json.dumps(doc)))
    return total


def phase(client, fn, args, until):
    done = 0
    while time.monotonic() < until:
        futures = [client.submit(fn, *a, pure=False) for a in args]
        client.gather(futures)
        done += len(futures)
    return done


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    dask.config.set({"distributed.worker.daemon": False})
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        start = time.monotonic()
        step = seconds / 4
        n = phase(client, count_primes, [(i * 20000, (i + 1) * 20000) for i in range(4)], start + step)
        n += phase(client, monte_carlo_pi, [(i + 1, 200000) for i in range(4)], start + 2 * step)
        n += phase(client, groupby_summary, [(i, 200000) for i in range(4)], start + 3 * step)
        n += phase(client, json_round_trip, [(i + 1, 2000) for i in range(4)], start + seconds)
        print("tasks", n, "in %.1f s" % (time.monotonic() - start))


if __name__ == "__main__":
    main()
