"""pybpfprof.dask against a real Dask cluster and a real agent (ctest: Python.Dask.*).

Run by tests/python/run_api_tests.py --test test_dask.py --modes agent: as root it starts a
real agent on a temporary socket, then runs this file as the unprivileged user pbp-test-a
with Debian's /usr/bin/python3 (python3-distributed 2022.12, pandas 1.5). The cluster is a
distributed.LocalCluster(n_workers=2, processes=True) of that user; each of its processes
profiles itself through the agent.

  ClusterProfile: a function with a hot loop through client.map and a dask.dataframe groupby
    on dask.datasets.timeseries, inside pybpfprof.dask.profile(client, "report.html"). The
    merged report has the scheduler's process with frames in distributed/scheduler.py, both
    workers with the hot function and pandas frames, as many tasks as Dask's own
    get_task_stream reports, and the hot prefix's sampled CPU within 10% of the compute time
    Dask recorded for it; in Chromium (tests/js/check_report.mjs) the task lanes are drawn
    and selecting the prefix changes the totals. Merged on the client's machine and, the
    client having no binary, on the scheduler's; neither: the parts are kept, and said so.
  SchedulerDropIn: distributed-pyspy's README example with profile_scheduler("profile.json"):
    a speedscope file of the scheduler, written on the client, loaded in the real speedscope
    app (tests/js/check_speedscope.mjs), which shows a frame of distributed/scheduler.py.

Reads PYBPFPROF_BIN, PBP_TEST_OUT, PBP_SOURCE_DIR, PYBPFPROF_AGENT_SOCKET; PBP_TEST_KEEP: a
directory to copy the report and a screenshot of it to (docs/dask.md's picture). Under
CI=true a skipped test fails the run.
"""

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest
import warnings

MODE = os.environ.get("PBP_TEST_MODE", "")
OUT = os.environ.get("PBP_TEST_OUT", "")
BIN = os.environ.get("PYBPFPROF_BIN", "")
SOURCE = os.environ.get("PBP_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
KEEP = os.environ.get("PBP_TEST_KEEP", "")
CI = os.environ.get("CI", "").lower() == "true"

try:
    import dask
    import dask.datasets
    import distributed
    import pandas  # noqa: F401 - the workload needs it
    HAVE_DASK = True
except ImportError as e:  # reported by the tests
    HAVE_DASK = str(e)

import pybpfprof
import pybpfprof.dask

HOT_SECONDS = 0.5   # CPU seconds of one hot task
HOT_TASKS = 8


def pbp_hot_loop(i):
    """CPU-bound for HOT_SECONDS of this thread's CPU time (so a loaded machine makes it
    longer, not lighter); returns (its thread's CPU seconds, wall seconds)."""
    t0, w0 = time.thread_time(), time.monotonic()
    n = 0
    while time.thread_time() - t0 < HOT_SECONDS:
        for j in range(20000):
            n += (j * j) % 7 + (j ^ i) * 3
    return time.thread_time() - t0, time.monotonic() - w0


# ---- reading the report's embedded data (userspace/export/html_report.cpp) ------------------

def varints(b64):
    out, v, shift = [], 0, 0
    for x in base64.b64decode(b64):
        v |= (x & 0x7F) << shift
        if x & 0x80:
            shift += 7
        else:
            out.append(v)
            v, shift = 0, 0
    return out


def cells(b64):
    """[(bin, stack, count)] of an encoded cell list."""
    c, out, i, b = varints(b64), [], 0, -1
    while i < len(c):
        b += c[i]
        n = c[i + 1]
        i += 2
        s = 0
        for _ in range(n):
            s += c[i]
            out.append((b, s, c[i + 1]))
            i += 2
    return out


class Report(object):
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            html = f.read()
        a = '<script type="application/json" id="pbp-data">'
        i = html.index(a) + len(a)
        self.d = json.loads(html[i:html.index("</script>", i)])
        d = self.d
        nodes = varints(d["nodes"]["b64"])
        n = d["nodes"]["n"]
        self.parent, self.func = [-1] * n, [-1] * n
        for k in range(1, n):
            self.parent[k] = k - nodes[3 * (k - 1)]
            self.func[k] = nodes[3 * (k - 1) + 1]
        self.stack_node = varints(d["stacks"]["b64"])
        self.fn_name = d["fn"]["name"]
        self.fn_file = [d["files"][i] for i in d["fn"]["file"]]
        self.unit_s = d["run"]["weight_unit_ns"] / 1e9

    def frames_of_stack(self, s):
        out, k = [], self.stack_node[s]
        while k > 0:
            out.append((self.fn_name[self.func[k]], self.fn_file[self.func[k]]))
            k = self.parent[k]
        return out

    def process_frames(self, proc):
        """{(function, file)} of every stack sampled in the process."""
        seen = set()
        for t in proc["threads"]:
            for _, s, _ in cells(t["cells"]):
                seen.update(self.frames_of_stack(s))
        return seen

    def prefix_cpu_s(self, name):
        idx = [p["name"] for p in self.d["tasks"]["prefixes"]].index(name)
        units = 0
        for p in self.d["procs"]:
            for t in p["threads"]:
                for pfx, b64 in t.get("pcells", []):
                    if pfx == idx:
                        units += sum(c for _, _, c in cells(b64))
        return units * self.unit_s


def node_check(script, *args, timeout=600):
    return subprocess.run(["node", os.path.join(SOURCE, "tests", "js", script)] + list(args),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=timeout, universal_newlines=True)


def out(name):
    return os.path.join(OUT, name)


def needs_cluster(test):
    if MODE != "agent" or not OUT:
        return unittest.skip("needs PBP_TEST_MODE=agent (run_api_tests.py)")(test)
    if HAVE_DASK is not True:
        return unittest.skip("Dask is not installed (%s): apt-get install python3-distributed" % HAVE_DASK)(test)
    return test


class Pure(unittest.TestCase):
    """What needs no cluster: the task file, the merge command, the time limit of calls."""

    def test_task_file_resolves_workers_and_threads(self):
        p = pybpfprof.dask.DaskProfile(None, os.path.join(OUT or "/tmp", "x.html"))
        p.t_start, p.t_end = 100.0, 200.0
        p.parts = {"tcp://10.0.0.2:4000": {"pid": 4242, "host": "node-b", "threads": {"139": 4250}}}
        f = p.task_file([
            {"key": "pbp_hot_loop-1f2e", "worker": "tcp://10.0.0.2:4000", "thread": 139, "status": "OK",
             "startstops": [{"action": "compute", "start": 120.0, "stop": 121.5}]},
            {"key": ("groupby-agg-77aa", 3), "worker": "tcp://10.0.0.3:4000", "thread": 7,
             "startstops": [{"action": "transfer", "start": 119.0, "stop": 119.2, "source": "tcp://10.0.0.2:4000"},
                            {"action": "compute", "start": 122.0, "stop": 123.0}]},
        ])
        self.assertEqual(f["format"], "pybpfprof-tasks")
        self.assertEqual(f["version"], 1)
        a, b = f["tasks"]
        self.assertEqual((a["prefix"], a["pid"], a["tid"], a["host"]), ("pbp_hot_loop", 4242, 4250, "node-b"))
        self.assertEqual(b["key"], "('groupby-agg-77aa', 3)")
        self.assertEqual(b["prefix"], "groupby-agg")
        self.assertNotIn("pid", b)  # a worker that was not profiled
        self.assertEqual(b["startstops"][0]["source"], "tcp://10.0.0.2:4000")
        json.dumps(f)

    def test_merge_command(self):
        cmd = pybpfprof.dask.merge_command("pybpfprof", ["a.pbp", "b.pbp"],
                                           [[("role", "scheduler")], [("role", "worker"), ("worker", "tcp://h:1")]],
                                           "out.html", "html", "tasks.json")
        self.assertEqual(cmd, ["pybpfprof", "merge", "a.pbp", "b.pbp", "-o", "out.html", "-f", "html", "--no-summary",
                               "--target", "Dask: scheduler + 1 worker", "--label", "1:role=scheduler", "--label", "2:role=worker", "--label",
                               "2:worker=tcp://h:1", "--tasks", "tasks.json"])

    def test_a_call_that_hangs_is_left_behind_at_the_time_limit(self):
        t0 = time.monotonic()
        r = pybpfprof.dask._calls({"fast": lambda: 7, "hangs": lambda: time.sleep(30), "fails": lambda: 1 / 0}, 0.5)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(r["fast"], (True, 7))
        self.assertFalse(r["hangs"][0])
        self.assertIn("time limit", pybpfprof.dask._describe(r["hangs"][1]))
        self.assertIsInstance(r["fails"][1], ZeroDivisionError)

    def test_profile_scheduler_takes_pyspy_options_and_says_it_ignores_them(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            p = pybpfprof.dask.profile_scheduler("profile.json", native=True, nonblocking=True, idle=True)
        self.assertEqual(p.format, "speedscope")
        self.assertTrue(p.path.endswith("/profile.json"))
        said = [str(w.message) for w in caught]
        self.assertEqual(len(said), 2, said)
        self.assertIn("py-spy's option 'native' has no pybpfprof equivalent", said[0])
        self.assertIn("py-spy's option 'nonblocking' has no pybpfprof equivalent", said[1])
        self.assertEqual(pybpfprof.dask.profile_scheduler("s.html").format, "html")

    def test_profile_scheduler_maps_pyspys_idle_and_gil_to_modes(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cases = [({}, "cpu"), ({"idle": True}, "wall"), ({"gil": True}, "gil"), ({"idle": True, "gil": True}, "gil"),
                     ({"idle": False}, "cpu"), ({"mode": "WALL"}, "wall"), ({"mode": "wall", "idle": True}, "wall")]
            for kwargs, mode in cases:
                p = pybpfprof.dask.profile_scheduler("p.json", **kwargs)
                self.assertEqual((p.mode, p.options["mode"]), (mode, mode), kwargs)
        self.assertEqual(caught, [], "idle and gil are honoured, not ignored")
        p = pybpfprof.dask.profile_scheduler("p.json", idle=True, min_block=0.0025)
        self.assertEqual(p.options["min_block"], 0.0025)
        with self.assertRaisesRegex(ValueError, "ask for different modes"):
            pybpfprof.dask.profile_scheduler("p.json", mode="cpu", gil=True)
        with self.assertRaisesRegex(ValueError, "min_block only applies to mode='wall'"):
            pybpfprof.dask.profile_scheduler("p.json", gil=True, min_block=0.01)

    def test_arguments_are_checked_at_the_call(self):
        with self.assertRaises(ValueError):
            pybpfprof.dask.profile(None, "/tmp/x.unknown")
        with self.assertRaises(ValueError):
            pybpfprof.dask.profile(None, "/tmp/x.html", rate=0)
        with self.assertRaises(ValueError):
            pybpfprof.dask.profile(None, "/tmp/x.html", scheduler=False, workers=False)
        with self.assertRaises(ValueError):
            pybpfprof.dask.profile(None, "/tmp/x.html", merge_on="laptop")
        with self.assertRaisesRegex(ValueError, "mode must be 'cpu'"):
            pybpfprof.dask.profile(None, "/tmp/x.html", mode="idle")
        with self.assertRaisesRegex(ValueError, "min_block must be a number of seconds"):
            pybpfprof.dask.profile(None, "/tmp/x.html", mode="wall", min_block=2)
        p = pybpfprof.dask.profile(None, "/tmp/x.html", mode="wall", min_block=0.0005)
        self.assertEqual((p.options["mode"], p.options["min_block"]), ("wall", 0.0005))


class Cluster(unittest.TestCase):
    cluster = client = None

    @classmethod
    def setUpClass(cls):
        if MODE != "agent" or HAVE_DASK is not True or not OUT:
            return
        dask.config.set({"distributed.worker.daemon": False, "temporary-directory": OUT})
        cls.cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                               dashboard_address=None, local_directory=OUT)
        cls.client = distributed.Client(cls.cluster)
        cls.client.wait_for_workers(2)
        # Warm up: imports and the first dataframe graph, outside the profiled blocks.
        dask.datasets.timeseries(start="2000-01-01", end="2000-01-02", freq="60s").x.sum().compute()

    @classmethod
    def tearDownClass(cls):
        if cls.client is not None:
            cls.client.close()
            cls.cluster.close()


class ClusterProfile(Cluster):
    def workload(self):
        futures = self.client.map(pbp_hot_loop, range(HOT_TASKS))
        self.hot_times = self.client.gather(futures)
        # 240 partitions: a few hundred tasks, enough work for the scheduler to be sampled.
        df = dask.datasets.timeseries(start="2000-01-01", end="2000-01-11", freq="5s", partition_freq="1h",
                                      seed=42)
        return df.groupby("name").agg({"x": "mean", "y": "max"}).compute()

    def profiled(self, name, **kw):
        path = out(name)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pybpfprof.dask.profile(self.client, path, rate=99, **kw) as prof:
                with distributed.get_task_stream(self.client) as ts:
                    self.workload()
        return path, prof, ts.data, [str(w.message) for w in caught]

    @needs_cluster
    def test_merged_report_with_task_lanes(self):
        path, prof, dask_records, caught = self.profiled("cluster.html")
        self.assertEqual(prof.merged_on, "client")
        self.assertEqual(prof.missing, {})
        self.assertEqual(sorted(prof.parts), sorted(["scheduler"] + list(self.client.scheduler_info()["workers"])))
        r = Report(path)
        procs = r.d["procs"]
        roles = {}
        for p in procs:
            roles.setdefault(p["labels"].get("role"), []).append(p)
        self.assertEqual(len(roles.get("scheduler", [])), 1, [p["labels"] for p in procs])
        self.assertEqual(len(roles.get("worker", [])), 2, [p["labels"] for p in procs])
        # The scheduler: frames in distributed/scheduler.py.
        sched = r.process_frames(roles["scheduler"][0])
        self.assertTrue(any(f.endswith("distributed/scheduler.py") for _, f in sched),
                        sorted(sched)[:40])
        # Both workers: the hot function and pandas.
        for w in roles["worker"]:
            frames = r.process_frames(w)
            self.assertIn("pbp_hot_loop", {n for n, _ in frames}, w["labels"])
            self.assertTrue(any("/pandas/" in f for _, f in frames), (w["labels"], sorted(frames)[:40]))
        # The task stream: as many tasks as Dask reports, in lanes of the workers' threads.
        tasks = r.d["tasks"]
        n_dask = sum(1 for rec in dask_records if any(s["action"] == "compute" for s in rec["startstops"]))
        self.assertGreater(n_dask, HOT_TASKS)
        self.assertEqual(sum(p["tasks"] for p in tasks["prefixes"]), n_dask)
        self.assertEqual(sum(l["n"] for l in tasks["lanes"]), n_dask)
        worker_index = [i for i, p in enumerate(procs) if p["labels"].get("role") == "worker"]
        self.assertEqual(sorted({l["proc"] for l in tasks["lanes"]}), sorted(worker_index))
        self.assertEqual(len(tasks["lanes"]), 2, "one executor thread per worker")
        for l in tasks["lanes"]:
            self.assertGreaterEqual(l["thread"], 0, "the lane's thread is a sampled thread: %s" % l)
        # The hot prefix's sampled CPU within 10% of the compute time Dask recorded for it.
        dask_hot = sum(s["stop"] - s["start"] for rec in dask_records for s in rec["startstops"]
                       if s["action"] == "compute" and distributed.utils.key_split(rec["key"]) == "pbp_hot_loop")
        cpu = r.prefix_cpu_s("pbp_hot_loop")
        # The tasks' own measure of the CPU they got while they ran: on a machine loaded by
        # other work a CPU-bound task runs less than all of its wall time, and on-CPU samples
        # can only see the time it ran.
        task_cpu = sum(c for c, _ in self.hot_times)
        share = task_cpu / sum(w for _, w in self.hot_times)
        print("pbp_hot_loop: %d tasks, Dask's compute %.3f s, sampled CPU inside its spans %.3f s (%.1f%% of it); "
              "the tasks' own CPU time %.3f s (%.0f%% of their wall time)"
              % (HOT_TASKS, dask_hot, cpu, 100 * cpu / dask_hot, task_cpu, 100 * share))
        self.assertGreater(dask_hot, HOT_TASKS * HOT_SECONDS * 0.95)
        # On-CPU samples measure CPU time: within 10% of the tasks' own CPU time, and of Dask's
        # compute time times the share of it they ran.
        self.assertLess(abs(cpu - task_cpu), 0.10 * task_cpu, (cpu, task_cpu))
        self.assertLess(abs(cpu - dask_hot * share), 0.10 * dask_hot * share, (cpu, dask_hot, share))
        # A CPU of its own: the compute time Dask recorded is CPU time. (Until 2026-11-27 this
        # was asked from a share of 90%, where a true 90% of Dask's time is on the bound. CI
        # failed this test at stop 27, most likely here: the message was cut from its log.)
        if share >= 0.97:
            self.assertLess(abs(cpu - dask_hot), 0.10 * dask_hot, (cpu, dask_hot))
        else:
            print("the machine is loaded: the tasks ran %.0f%% of their compute time; compared with Dask's compute "
                  "time times that share" % (100 * share))
        # The page in Chromium.
        expect = out("cluster.expect.json")
        with open(expect, "w") as f:
            json.dump({"functions": ["pbp_hot_loop"], "min_processes": 3, "task_lanes": 2,
                       "prefixes": ["pbp_hot_loop"], "scope_prefix": "pbp_hot_loop"}, f)
        args = [path, expect]
        if KEEP:
            args = ["--screenshot", os.path.join(KEEP, "dask-report.png")] + args
        res = node_check("check_report.mjs", *args)
        print(res.stdout)
        self.assertEqual(res.returncode, 0, res.stdout)
        self.assertIn("2 task lanes drawn", res.stdout)
        self.assertIn("prefix pbp_hot_loop: totals", res.stdout)
        if KEEP:
            shutil.copy(path, os.path.join(KEEP, "dask-report.html"))

    @needs_cluster
    def test_merged_on_the_scheduler_when_the_client_has_no_binary(self):
        old = os.environ.get("PYBPFPROF_BIN")
        # The client's process sees no binary; the scheduler's (the same process in a
        # LocalCluster, so merge_on forces the path) does.
        path = out("on-scheduler.html")
        with pybpfprof.dask.profile(self.client, path, merge_on="scheduler") as prof:
            self.client.gather(self.client.map(pbp_hot_loop, range(2)))
        self.assertEqual(prof.merged_on, "scheduler")
        r = Report(path)
        self.assertEqual(len(r.d["procs"]), 3)
        self.assertEqual(sum(p["tasks"] for p in r.d["tasks"]["prefixes"]), 2)
        # Neither machine has one: the parts are kept with the command that merges them.
        os.environ["PYBPFPROF_BIN"] = "/nonexistent/pybpfprof"
        try:
            path = out("nowhere.html")
            with self.assertRaises(pybpfprof.ProfilingError) as cm:
                with pybpfprof.dask.profile(self.client, path) as prof:
                    self.client.gather(self.client.map(pbp_hot_loop, range(2)))
        finally:
            if old is None:
                os.environ.pop("PYBPFPROF_BIN", None)
            else:
                os.environ["PYBPFPROF_BIN"] = old
        self.assertIn("has no pybpfprof binary", str(cm.exception))
        self.assertIn(path + ".parts", str(cm.exception))
        self.assertFalse(os.path.exists(path))
        parts = sorted(os.listdir(path + ".parts"))
        self.assertEqual(parts, ["MERGE.sh", "part-1.pbp", "part-2.pbp", "part-3.pbp", "tasks.json"])
        # ...and that command works.
        with open(os.path.join(path + ".parts", "MERGE.sh")) as f:
            cmd = f.read().splitlines()[-1].replace("pybpfprof ", BIN + " ", 1)
        r = subprocess.run(cmd, shell=True, cwd=path + ".parts", stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        self.assertEqual(r.returncode, 0, r.stdout)
        merged = Report(os.path.join(path + ".parts", "nowhere.html"))
        self.assertEqual(sum(p["tasks"] for p in merged.d["tasks"]["prefixes"]), 2)

    @needs_cluster
    def test_sessions_stop_when_the_block_raises(self):
        path = out("raises.html")
        with self.assertRaises(ZeroDivisionError):
            with pybpfprof.dask.profile(self.client, path) as prof:
                self.client.gather(self.client.map(pbp_hot_loop, range(2)))
                1 / 0
        self.assertTrue(os.path.exists(path))
        self.assertEqual(len(prof.parts), 3)
        # No session is left in any process.
        left = self.client.run(lambda: len(pybpfprof.dask._sessions))
        left["scheduler"] = self.client.run_on_scheduler(lambda: len(pybpfprof.dask._sessions))
        self.assertEqual(set(left.values()), {0}, left)

    @needs_cluster
    def test_a_worker_that_dies_costs_its_part_not_the_wait(self):
        path = out("died.html")
        workers = list(self.client.scheduler_info()["workers"])
        victim = workers[0]
        t0 = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pybpfprof.dask.profile(self.client, path, timeout=45) as prof:
                self.client.gather(self.client.map(pbp_hot_loop, range(2)))
                # The worker process is killed (its nanny starts another).
                pid = self.client.run(os.getpid, workers=[victim])[victim]
                os.kill(pid, signal.SIGKILL)
                time.sleep(1)
        took = time.monotonic() - t0
        self.assertIn(victim, prof.missing)
        self.assertLess(took, 45 + 30)
        self.assertTrue(any(victim in str(w.message) for w in caught), [str(w.message) for w in caught])
        r = Report(path)
        self.assertEqual(len(r.d["procs"]), 2)
        self.client.wait_for_workers(2)


class SchedulerDropIn(Cluster):
    @needs_cluster
    def test_profile_scheduler_like_distributed_pyspy(self):
        # distributed-pyspy's README, with pybpfprof.dask.profile_scheduler for
        # distributed_pyspy.pyspy_on_scheduler (the client: the default one).
        os.chdir(OUT)
        from pybpfprof.dask import profile_scheduler as pyspy_on_scheduler

        df = dask.datasets.timeseries(start="2000-01-01", end="2000-01-15", partition_freq="1d")
        with pyspy_on_scheduler("profile.json"):
            df.set_index("id").mean().compute()
        path = out("profile.json")
        with open(path) as f:
            doc = json.load(f)
        self.assertEqual(doc["$schema"], "https://www.speedscope.app/file-format-schema.json")
        frames = doc["shared"]["frames"]
        sched = {i for i, f in enumerate(frames) if f.get("file", "").endswith("distributed/scheduler.py")}
        self.assertTrue(sched, "no frame of distributed/scheduler.py")
        pids = {p["name"] for p in doc["profiles"]}
        self.assertTrue(all(str(os.getpid()) in n for n in pids), pids)  # the scheduler is in this process
        # The thread with the most time in scheduler.py, and its hottest function there.
        best = None
        for index, p in enumerate(doc["profiles"]):
            weights = {}
            for stack, w in zip(p["samples"], p["weights"]):
                for i in set(stack) & sched:
                    weights[i] = weights.get(i, 0) + w
            if weights:
                top = max(weights, key=weights.get)
                if best is None or weights[top] > best[2]:
                    best = (index, top, weights[top])
        index, frame = best[0], best[1]
        name = frames[frame]["name"]
        if KEEP:
            shutil.copy(path, os.path.join(KEEP, "scheduler.speedscope.json"))
        res = node_check("check_speedscope.mjs", "--expect-frame", "%d:%s" % (index, name), path)
        print(res.stdout)
        self.assertEqual(res.returncode, 0, res.stdout)
        self.assertIn("shows %s in profile %d" % (name, index), res.stdout)

    @needs_cluster
    def test_idle_scheduler_with_pyspys_idle_shows_its_event_loop_waiting(self):
        # py-spy --idle (distributed-pyspy passes it through): wall mode. A scheduler with
        # nothing to do is almost empty in cpu mode; in wall mode the thread of its event loop
        # shows where it waits, in select() under asyncio's loop, for the whole block.
        os.chdir(OUT)
        from pybpfprof.dask import profile_scheduler as pyspy_on_scheduler

        t0 = time.monotonic()
        with pyspy_on_scheduler("idle.json", idle=True) as prof:
            time.sleep(2)
        block = time.monotonic() - t0
        self.assertEqual(prof.mode, "wall")
        with open(out("idle.json")) as f:
            doc = json.load(f)
        frames = doc["shared"]["frames"]
        scale = {"nanoseconds": 1e-9, "microseconds": 1e-6, "milliseconds": 1e-3, "seconds": 1.0}
        best = None  # (seconds waiting in select, the thread's seconds, its name)
        for p in doc["profiles"]:
            unit = scale[p["unit"]]
            total = in_select = 0.0
            for stack, w in zip(p["samples"], p["weights"]):
                total += w * unit
                names = [frames[i]["name"].split(".")[-1] for i in stack]
                if names and names[-1] == "[sleeping]" and "select" in names and "_run_once" in names:
                    in_select += w * unit
            if in_select and (best is None or in_select > best[0]):
                best = (in_select, total, p["name"])
        self.assertIsNotNone(best, "no thread waits in select() under the event loop")
        in_select, total, name = best
        print("%s: %.2f s of %.2f s waiting in select() (block %.2f s)" % (name, in_select, total, block))
        # The loop thread is accounted for the whole session (the block plus start and stop), and
        # nearly all of it waits in select().
        self.assertGreater(total, 0.95 * 2.0, name)
        self.assertLess(total, block + 1.0, name)
        self.assertGreater(in_select, 0.9 * total, name)


def main():
    if MODE and not OUT:
        sys.exit("PBP_TEST_OUT must name a writable directory")
    print("pybpfprof.dask from %s, Python %s (%s), Dask %s, mode %s, uid %d" % (
        os.path.dirname(pybpfprof.__file__), sys.version.split()[0], sys.executable,
        getattr(distributed, "__version__", "?") if HAVE_DASK is True else "missing", MODE or "none", os.getuid()))
    loader = unittest.defaultTestLoader
    suite = unittest.TestSuite()
    only = [c for c in os.environ.get("PBP_TEST_ONLY", "").split(",") if c]
    classes = [Pure, ClusterProfile, SchedulerDropIn]
    unknown = set(only) - {c.__name__ for c in classes}
    if unknown:
        sys.exit("PBP_TEST_ONLY names no test class: %s" % ", ".join(sorted(unknown)))
    for c in classes:
        if c is Pure or not only or c.__name__ in only:
            suite.addTests(loader.loadTestsFromTestCase(c))
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if CI and result.skipped:
        print("CI=true: %d tests were skipped; under CI every test must run" % len(result.skipped))
        sys.exit(1)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
