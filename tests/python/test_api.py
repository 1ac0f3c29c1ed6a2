"""The Python package pybpfprof (python/pybpfprof) against the real binary and agent.

Run by tests/python/run_api_tests.py (ctest: Python.Api.*), which starts a real agent as
root, then runs this file twice with the interpreter under test:

  PBP_TEST_MODE=agent   as the unprivileged user pbp-test-a, PYBPFPROF_AGENT_SOCKET the
                        agent's socket: the API through the agent, the no-agent error, the
                        format table against the binary, the protocol client's limits
  PBP_TEST_MODE=root    as root, PYBPFPROF_AGENT_SOCKET a path with no agent: the API
                        through the pybpfprof binary run directly

Also read: PYBPFPROF_BIN (the binary under test), PBP_TEST_OUT (a directory the user may
write), PBP_SOURCE_DIR (the checkout). With no PBP_TEST_MODE only the tests that need
neither agent nor privileges run. Under CI=true a skipped test fails the run.
"""

import fcntl
import json
import multiprocessing
import os
import re
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import warnings

import pybpfprof
from pybpfprof import _protocol
from pybpfprof.formats import FORMATS

MODE = os.environ.get("PBP_TEST_MODE", "")
OUT = os.environ.get("PBP_TEST_OUT", "")
BIN = os.environ.get("PYBPFPROF_BIN", "")
SOURCE = os.environ.get("PBP_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
THIS_FILE = os.path.abspath(__file__)


def hot_loop(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        for i in range(20000):
            n += (i * i) % 7 + (i ^ 5) * 3  # HOT-LINE
    return n


def _line_of(marker):
    with open(THIS_FILE) as f:
        for number, line in enumerate(f, 1):
            if line.rstrip().endswith("# " + marker) and "def " not in line:
                return number
    raise AssertionError("no line marked " + marker)


HOT_LINE = _line_of("HOT-LINE")


def asleep_for_dump(stop):
    stop.wait()  # DUMP-WAIT


DUMP_LINE = _line_of("DUMP-WAIT")

# A child that sleeps in its module, for a dump by PID.
SLEEPER_CODE = "import time\nprint('ready', flush=True)\ntime.sleep(120)\n"

# A child started with subprocess: its own hot function, in "<string>".
CHILD_CODE = """
import time
def child_spin(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        for i in range(20000):
            n += (i * i) % 7
    return n
child_spin(float(__import__("sys").argv[1]))
"""


def mp_child_work(seconds):
    # A multiprocessing child (spawn): the same hot function as the parent's.
    hot_loop(seconds)


def out(name):
    return os.path.join(OUT, name)


def read_speedscope(path):
    with open(path) as f:
        doc = json.load(f)
    frames = doc["shared"]["frames"]
    return doc, frames


def speedscope_pids(doc):
    pids = set()
    for p in doc["profiles"]:
        m = re.search(r"\(pid (\d+)", p.get("name", ""))
        if m:
            pids.add(int(m.group(1)))
    return pids


def leaf_lines(doc, frames, function):
    """{line: samples} of the samples whose innermost frame is function."""
    lines = {}
    for p in doc["profiles"]:
        for s in p.get("samples", []):
            if s and frames[s[-1]]["name"] == function:
                line = frames[s[-1]].get("line", 0)
                lines[line] = lines.get(line, 0) + 1
    return lines


def native_shares(doc, frames, function):
    """Of the samples with function in their stack: how many, how many with a native frame
    (its library in speedscope's "file": an ELF path), how many with a kernel frame (file
    "[kernel]")."""
    n = native = kernel = 0
    for p in doc["profiles"]:
        for s in p.get("samples", []):
            names = [frames[i]["name"] for i in s]
            if not any(name == function or name.endswith("." + function) for name in names):
                continue
            n += 1
            files = [frames[i].get("file", "") for i in s]
            native += any(f.startswith("/") and not f.endswith(".py") for f in files)
            kernel += "[kernel]" in files
    return n, native, kernel


def perf_event_paranoid():
    with open("/proc/sys/kernel/perf_event_paranoid") as f:
        return int(f.read())


def kernel_read_loop(seconds):
    """Reads /dev/zero in a loop: time in the kernel's read path, under this function."""
    fd = os.open("/dev/zero", os.O_RDONLY)
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            os.read(fd, 1 << 20)
    finally:
        os.close(fd)


def wait_seconds_under(doc, frames, function, leaf="[sleeping]"):
    """Seconds of the samples whose innermost frame is leaf (a wait) right under function (its
    name, or its qualified name from 3.11)."""
    scale = {"nanoseconds": 1e-9, "microseconds": 1e-6, "milliseconds": 1e-3, "seconds": 1.0}
    total = 0.0
    for p in doc["profiles"]:
        unit = scale.get(p.get("unit"))
        if unit is None:
            continue
        for s, w in zip(p.get("samples", []), p.get("weights", [])):
            if (len(s) >= 2 and frames[s[-1]]["name"] == leaf and
                    frames[s[-2]]["name"].split(".")[-1] == function):
                total += w * unit
    return total


def wait_leaves(doc, frames):
    """{(the frame above, the wait leaf): samples}, for a failure's message."""
    seen = {}
    for p in doc["profiles"]:
        for s in p.get("samples", []):
            if s and frames[s[-1]]["name"].startswith("["):
                k = (frames[s[-2]]["name"] if len(s) >= 2 else "", frames[s[-1]]["name"])
                seen[k] = seen.get(k, 0) + 1
    return seen


def current_umask():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


class Helpers(unittest.TestCase):
    maxDiff = None

    def assert_hot_in_result(self, p):
        self.assertIsNotNone(p.samples)
        self.assertGreater(p.samples, 50, p.summary)
        self.assertGreaterEqual(p.processes, 1)
        hot = [t for t in p.top if t.function == "hot_loop"]
        self.assertTrue(hot, "hot_loop is not in the top functions:\n" + p.top_text)
        self.assertEqual(hot[0].file, THIS_FILE, p.top_text)
        self.assertEqual(hot[0].line, HOT_LINE, p.top_text)
        self.assertEqual(hot[0].location, "%s:%d" % (THIS_FILE, HOT_LINE))
        self.assertGreater(hot[0].self_percent, 30.0, p.top_text)
        self.assertIn("hot_loop (%s:%d)" % (THIS_FILE, HOT_LINE), p.top_text)

    def assert_hot_in_speedscope(self, path, pid):
        doc, frames = read_speedscope(path)
        self.assertEqual(doc["$schema"], "https://www.speedscope.app/file-format-schema.json")
        self.assertIn(pid, speedscope_pids(doc))
        lines = leaf_lines(doc, frames, "hot_loop")
        self.assertTrue(lines, "no sample ends in hot_loop")
        self.assertEqual(max(lines, key=lines.get), HOT_LINE, lines)
        self.assertTrue(any(f["name"] == "hot_loop" and f.get("file") == THIS_FILE for f in frames))

    def check_dump_of_self(self, **kwargs):
        """pybpfprof.dump() of this process while a named thread waits on an Event: that thread
        asleep in asleep_for_dump, at its line; the calling thread in this function."""
        stop = threading.Event()
        th = threading.Thread(target=asleep_for_dump, args=(stop,), name="dumped-waiter")
        th.start()
        try:
            deadline = time.monotonic() + 10
            while True:
                doc = pybpfprof.dump(**kwargs)
                self.assertEqual([p["pid"] for p in doc["processes"]], [os.getpid()], doc)
                proc = doc["processes"][0]
                by_tid = {t["tid"]: t for t in proc["threads"]}
                waiter = by_tid.get(th.native_id)
                ours = [f for f in (waiter or {}).get("frames", []) if f["function"].endswith("asleep_for_dump")]
                if waiter and waiter["state"] == "sleeping" and ours or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
        finally:
            stop.set()
            th.join()
        self.assertIsNotNone(waiter, "the waiting thread %d is not in the dump: %r" % (th.native_id, doc))
        self.assertEqual(waiter["state"], "sleeping", waiter)
        self.assertTrue(waiter["python"])
        self.assertEqual(ours[0]["file"], THIS_FILE)
        self.assertEqual(ours[0]["line"], DUMP_LINE, waiter)
        self.assertTrue(waiter["frames"][0]["function"].endswith("wait"), waiter["frames"][0])
        self.assertTrue(waiter["frames"][0]["file"].endswith("threading.py"), waiter["frames"][0])
        me = by_tid[threading.main_thread().native_id]
        self.assertTrue(any(f["function"].endswith("check_dump_of_self") and f.get("file") == THIS_FILE
                            for f in me["frames"]), me)
        self.assertEqual(proc["exe"], os.readlink("/proc/self/exe"))
        self.assertTrue(proc["python_version"].startswith("%d.%d." % sys.version_info[:2]), proc)
        self.assertIn(os.path.basename(THIS_FILE), proc["command"])
        self.assertEqual(doc["warnings"], [])
        return doc

    def check_dump_of_a_child(self, **kwargs):
        child = subprocess.Popen([sys.executable, "-c", SLEEPER_CODE], stdout=subprocess.PIPE)
        try:
            self.assertEqual(child.stdout.readline(), b"ready\n")
            deadline = time.monotonic() + 10
            while True:
                doc = pybpfprof.dump(pid=child.pid, **kwargs)
                frames = doc["processes"][0]["threads"][0]["frames"]
                if frames and frames[0]["line"] == 3 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
        finally:
            child.kill()
            child.wait()
            child.stdout.close()
        self.assertEqual(doc["processes"][0]["pid"], child.pid)
        self.assertEqual(frames, [{"function": "<module>", "file": "<string>", "line": 3}])

    def assert_written_as_caller(self, path):
        st = os.stat(path)
        self.assertEqual(st.st_uid, os.getuid())
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o666 & ~current_umask())
        leftovers = [n for n in os.listdir(os.path.dirname(path)) if ".tmp-" in n]
        self.assertEqual(leftovers, [])


# ---- needs nothing -------------------------------------------------------------------------
class WriteAtomically(unittest.TestCase):
    """The API's atomic write locks its new file until the rename, as the CLI's does: the CLI
    removes a ".NAME.tmp-*" file only when its lock is free (a writer killed before it)."""

    def test_the_new_file_is_locked_until_it_is_renamed(self):
        from pybpfprof import api
        d = tempfile.mkdtemp()
        path = os.path.join(d, "p.json")
        seen = []
        real_replace = os.replace

        def replace(src, dst):
            fd = os.open(src, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                seen.append("free")
            except BlockingIOError:
                seen.append("locked")
            finally:
                os.close(fd)
            real_replace(src, dst)

        os.replace = replace
        try:
            api.write_atomically(path, b"{}")
        finally:
            os.replace = real_replace
        self.assertEqual(seen, ["locked"])
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"{}")
        self.assertEqual(os.listdir(d), ["p.json"])


    def test_a_replaced_file_keeps_its_mode(self):
        """A profile its owner made private stays private when written again."""
        from pybpfprof import api
        d = tempfile.mkdtemp()
        path = os.path.join(d, "private.json")
        with open(path, "wb") as f:
            f.write(b"old")
        os.chmod(path, 0o600)
        api.write_atomically(path, b"{}")
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"{}")


class ReportPath(unittest.TestCase):
    """report= naming the profile's own file is refused before anything starts, as the CLI's
    --report naming its -o file: the report would replace the profile."""

    def test_report_and_profile_in_one_place(self):
        d = tempfile.mkdtemp()
        path = os.path.join(d, "p.json")
        for report in (path, os.path.join(d, ".", "p.json")):
            with self.assertRaises(ValueError) as cm:
                pybpfprof.profile(path, pids=[os.getpid()], report=report)
            self.assertIn("the report would replace the profile", str(cm.exception))
        self.assertEqual(os.listdir(d), [])
        # A report of its own is accepted (nothing starts until the block).
        pybpfprof.profile(path, pids=[os.getpid()], report=os.path.join(d, "r.html"))


class FormatTable(unittest.TestCase):
    """The one table in pybpfprof.formats is the CLI's (userspace/export)."""

    def test_format_for_path(self):
        f = pybpfprof.format_for_path
        self.assertEqual(f("out.html"), "html")
        self.assertEqual(f("OUT.HTM"), "html")
        self.assertEqual(f("a/b.speedscope.json"), "speedscope")
        self.assertEqual(f("x.json"), "speedscope")
        self.assertEqual(f("x.folded"), "collapsed")
        self.assertEqual(f("x.collapsed"), "collapsed")
        self.assertEqual(f("x.pb.gz"), "pprof")
        self.assertEqual(f("x.pprof"), "pprof")
        self.assertIsNone(f("x.gz"))
        self.assertIsNone(f("x.txt"))
        self.assertIsNone(f("html"))

    def test_matches_the_sources(self):
        # kFormats' order in exporter.cpp, and each exporter's name() and extensions().
        export = os.path.join(SOURCE, "userspace", "export")
        with open(os.path.join(export, "exporter.cpp")) as f:
            registry = f.read()
        block = re.search(r"kFormats\[\]\s*=\s*\{(.*?)\};", registry, re.S)
        self.assertIsNotNone(block, "no kFormats table in exporter.cpp")
        order = re.findall(r'\{\s*"([a-z0-9_]+)"\s*,', block.group(1))
        by_name = {}
        for name in sorted(os.listdir(export)):
            if not name.endswith(".cpp"):
                continue
            with open(os.path.join(export, name)) as f:
                text = f.read()
            for m in re.finditer(r'name\(\) const override \{ return "([^"]+)"; \}\s*'
                                 r'std::vector<std::string> extensions\(\) const override \{ return \{([^}]*)\}; \}', text):
                by_name[m.group(1)] = tuple(re.findall(r'"([^"]+)"', m.group(2)))
        self.assertEqual(sorted(by_name), sorted(order), "an exporter's name()/extensions() were not found")
        self.assertEqual(tuple((n, by_name[n]) for n in order), FORMATS)

    @unittest.skipUnless(BIN, "PYBPFPROF_BIN is not set")
    def test_matches_the_binary(self):
        # What `pybpfprof -o x.unknown` says lists the formats and every extension, in order.
        r = subprocess.run([BIN, "-o", "x.unknown", "--pid", str(os.getpid())], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        m = re.search(r"give -f (\S+), or end the name in (.*)$", r.stderr.strip())
        self.assertIsNotNone(m, r.stderr)
        self.assertEqual(m.group(1), "|".join(pybpfprof.format_names()))
        self.assertEqual(m.group(2), pybpfprof.known_extensions_text())
        # And the package says the same to its users.
        with self.assertRaises(ValueError) as cm:
            pybpfprof.profile(os.path.join(OUT or "/tmp", "x.unknown"))
        self.assertIn(pybpfprof.known_extensions_text(), str(cm.exception))


class FakeAgent(object):
    """The other end of a socket pair: writes raw bytes as an agent would."""

    def __init__(self):
        self.client, self.agent = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

    def send(self, data):
        self.agent.sendall(data)

    def header(self, obj_or_bytes):
        data = obj_or_bytes if isinstance(obj_or_bytes, bytes) else json.dumps(obj_or_bytes).encode()
        self.send(struct.pack(">I", len(data)) + data)

    def close(self):
        self.client.close()
        self.agent.close()


class ProtocolClient(unittest.TestCase):
    """read_message's limits and strictness (read_message in userspace/agent/protocol.cpp)."""

    @property
    def fake(self):
        return self._fake

    @fake.setter
    def fake(self, value):
        self._fake = value
        self.addCleanup(value.close)

    def setUp(self):
        self.fake = FakeAgent()

    def read(self, timeout=5):
        return _protocol.read_message(self.fake.client, timeout)

    def refused(self, data, fragment):
        self.fake.send(data)
        with self.assertRaises(pybpfprof.AgentProtocolError) as cm:
            self.read()
        self.assertIn(fragment, str(cm.exception))

    def test_a_message_with_attachments(self):
        self.fake.header({"v": 1, "type": "profile", "final": True, "attachments": [3, 0, 5]})
        self.fake.send(b"abcHELLO")
        h, a = self.read()
        self.assertEqual(h["type"], "profile")
        self.assertEqual(a, [b"abc", b"", b"HELLO"])

    def test_header_length_limits(self):
        self.refused(struct.pack(">I", 0), "message header of 0 bytes")
        self.fake = FakeAgent()
        self.refused(struct.pack(">I", (1 << 20) + 1), "message header of 1048577 bytes")

    def test_a_header_of_exactly_one_mib(self):
        body = b'{"v":1,"type":"event","pad":"' + b"x" * ((1 << 20) - 31) + b'"}'
        self.assertEqual(len(body), 1 << 20)
        t = threading.Thread(target=self.fake.header, args=(body,))
        t.start()
        h, _ = self.read()
        t.join()
        self.assertEqual(h["type"], "event")

    def test_strict_json(self):
        for data, fragment in ((b'{"v":1,"v":1}', "duplicate field 'v'"), (b'{"a":NaN}', "NaN"),
                               (b'{"a":1e400}', "overflow"), (b"[1]", "not a JSON object"),
                               (b'{"a":1} x', "invalid JSON"), (b'\xef\xbb\xbf{}', "byte order mark"),
                               (b'{"a":"\x00"}', "NUL byte"), (b'{"a":"\xff"}', "UTF-8"),
                               (b'{"a":"\\ud800"}', "surrogate"), (b"[" * 33 + b"]" * 33, "deeper than 32")):
            self.fake = FakeAgent()
            self.refused(struct.pack(">I", len(data)) + data, fragment)
        self.fake = FakeAgent()
        nested = b'{"a":' + b"[" * 31 + b"]" * 31 + b"}"
        self.fake.header(nested)
        self.assertIn("a", self.read()[0])

    def test_attachment_limits(self):
        for sizes in ([0] * 17, [(1 << 30) + 1], [-1], [1.0], [True], "3"):
            self.fake = FakeAgent()
            data = json.dumps({"v": 1, "type": "profile", "attachments": sizes}).encode()
            self.refused(struct.pack(">I", len(data)) + data, "'attachments' must be an array of at most 16 sizes")

    def test_eof_and_timeout(self):
        self.fake.agent.close()
        with self.assertRaises(pybpfprof.ProfilingError) as cm:
            self.read()
        self.assertEqual(cm.exception.code, "connection")
        self.assertIn("the agent closed the connection", str(cm.exception))
        self.fake = FakeAgent()
        self.fake.header({"v": 1, "type": "profile", "attachments": [10]})
        self.fake.send(b"abc")
        self.fake.agent.close()
        with self.assertRaises(pybpfprof.ProfilingError) as cm:
            self.read()
        self.assertIn("in the middle of an attachment (3 of 10 bytes)", str(cm.exception))
        self.fake = FakeAgent()
        self.fake.send(b"\x00\x00")
        t0 = time.monotonic()
        with self.assertRaises(pybpfprof.ProfilingError) as cm:
            self.read(timeout=0.3)
        self.assertIn("timed out", str(cm.exception))
        self.assertLess(time.monotonic() - t0, 5)

    def test_requests(self):
        frame = _protocol.encode_request({"op": "start", "pids": [12], "children": True, "rate_hz": 99})
        (n,) = struct.unpack(">I", frame[:4])
        self.assertEqual(json.loads(frame[4:].decode()), {"v": 1, "op": "start", "pids": [12], "children": True,
                                                          "rate_hz": 99})
        self.assertEqual(n, len(frame) - 4)
        with self.assertRaises(ValueError):
            _protocol.encode_request({"op": "stop", "output_name": "x" * 70000})
        with self.assertRaises(ValueError):
            pybpfprof.Session(pids=[0])
        with self.assertRaises(ValueError):
            pybpfprof.Session(pids=[5, 5])
        with self.assertRaises(TypeError):
            pybpfprof.Session(pids=[1.0])
        with self.assertRaises(ValueError):
            pybpfprof.Session(rate=0)
        with self.assertRaises(ValueError):
            pybpfprof.Session(rate=float("nan"))
        with self.assertRaises(ValueError):
            pybpfprof.Session(format="svgz")
        # As the CLI's -d: a shorter run ends before a program can be found and sampled.
        for short in (1e-7, 0.05):
            with self.assertRaisesRegex(ValueError, r"duration must be at least 0.1 s, or 0 for no limit: .* \(got "):
                pybpfprof.Session(duration=short)
        self.assertEqual(pybpfprof.Session(duration=0.1).duration, 0.1)
        self.assertIsNone(pybpfprof.Session(duration=0).duration)

    def test_mode_and_min_block_are_checked(self):
        self.assertEqual(pybpfprof.Session().mode, "cpu")
        self.assertIsNone(pybpfprof.Session().min_block)
        self.assertEqual(pybpfprof.Session(mode="GIL").mode, "gil")
        s = pybpfprof.Session(mode="wall", min_block=0.0025)
        self.assertEqual((s.mode, s.min_block, s._min_block_us), ("wall", 0.0025, 2500))
        self.assertEqual(pybpfprof.Session(mode="wall", min_block=1).min_block, 1.0)
        self.assertEqual(pybpfprof.Session(mode="wall", min_block=10e-6)._min_block_us, 10)
        for mode in ("idle", "", None, 1, "off-cpu"):
            with self.assertRaisesRegex(ValueError, r"mode must be 'cpu' \(on-CPU time\), 'wall' .* \(got "):
                pybpfprof.Session(mode=mode)
        for bad in (0, 5e-6, 1.5, -0.001, float("nan"), float("inf")):
            with self.assertRaisesRegex(ValueError, r"min_block must be a number of seconds from 1e-05 to 1 \(got "):
                pybpfprof.Session(mode="wall", min_block=bad)
        for bad in ("1ms", True, [0.001]):
            with self.assertRaisesRegex(TypeError, "min_block must be a number"):
                pybpfprof.Session(mode="wall", min_block=bad)
        for mode in ("cpu", "gil"):
            with self.assertRaisesRegex(ValueError, "min_block only applies to mode='wall'.*pass mode='wall', or leave "
                                                    "min_block out"):
                pybpfprof.Session(mode=mode, min_block=0.002)
        with self.assertRaises(ValueError):
            pybpfprof.profile("/tmp/x.json", mode="wal")
        self.assertEqual(pybpfprof.profile("/tmp/x.json", mode="wall", min_block=0.5).min_block, 0.5)

    def test_parse_mode_lines(self):
        lines = ["Wrote /tmp/p.json: 154 samples, 1 process, 1 thread, 0 lost, 0 unresolved",
                 "  mode wall: 1.500 s on CPU, 7.239 s off CPU (0.004 s of it in intervals shorter than the 2 ms "
                 "--min-block, summed per thread and reason)",
                 "  GIL: 0.300 s held, 0.250 s waiting, 0.150 s neither, 0.050 s n/a (not known)"]
        self.assertEqual(pybpfprof.parse_mode_lines(lines, 2000000), {
            "mode": "wall", "on_cpu_ns": 1500000000, "off_cpu_ns": 7239000000, "aggregate_ns": 4000000,
            "min_block_ns": 2000000, "gil_ns": {"held": 300000000, "waiting": 250000000, "neither": 150000000,
                                                "n/a": 50000000}})
        cpu = ["  mode cpu: 0.990 s on CPU (time off CPU is not sampled in this mode; --mode wall adds it)"]
        self.assertEqual(pybpfprof.parse_mode_lines(cpu, 1000000), {
            "mode": "cpu", "on_cpu_ns": 990000000, "off_cpu_ns": 0, "aggregate_ns": 0, "min_block_ns": 0,
            "gil_ns": {}})
        self.assertEqual(pybpfprof.parse_mode_lines(["Wrote x: 1 sample"]), {})
        gil = ["  mode gil: 0.420 s on CPU holding the GIL kept; 0.350 s on CPU not holding it left out (35 samples)",
               "  GIL: 0.420 s held, 0.300 s neither, 0.050 s n/a (not known)",
               "  warning: 2 processes have no known GIL state and --mode gil keeps none of their samples (PID 42: "
               "a free-threaded build: it has no GIL; PID 7: CPython 3.6: no symbols); use --mode cpu or --mode wall "
               "for them"]
        self.assertEqual(pybpfprof.parse_mode_lines(gil), {
            "mode": "gil", "on_cpu_ns": 420000000, "off_cpu_ns": 0, "aggregate_ns": 0, "min_block_ns": 0,
            "gil_ns": {"held": 420000000, "neither": 300000000, "n/a": 50000000},
            "gil_left_out_ns": {"total": 350000000}, "gil_left_out_samples": 35,
            "gil_unknown": [{"pid": 42, "reason": "a free-threaded build: it has no GIL"},
                            {"pid": 7, "reason": "CPython 3.6: no symbols"}]})
        g = pybpfprof.ProfileResult(b"", dict(SUMMARY, mode="gil", on_cpu_ns=1000000000, off_cpu_ns=0,
                                              min_block_ns=0, aggregate_ns=0, gil_ns={"held": 1000000000},
                                              gil_left_out_ns={"neither": 500000000}, gil_left_out_samples=50,
                                              gil_unknown=[{"pid": 42, "reason": "a free-threaded build"}]),
                                    "speedscope")
        self.assertEqual((g.gil_left_out, g.gil_left_out_samples, g.gil_unknown),
                         ({"neither": 0.5}, 50, [(42, "a free-threaded build")]))
        self.assertIn("PID 42: a free-threaded build", g.warnings[-1])
        r = pybpfprof.ProfileResult(b"", dict(SUMMARY, mode="wall", on_cpu_ns=2000000000, off_cpu_ns=500000000,
                                              min_block_ns=1000000, aggregate_ns=0, gil_ns={"held": 1000000000}),
                                    "speedscope")
        self.assertEqual((r.mode, r.on_cpu, r.off_cpu, r.min_block, r.gil), ("wall", 2.0, 0.5, 0.001, {"held": 1.0}))
        old = pybpfprof.ProfileResult(b"", SUMMARY, "speedscope")  # an agent older than the modes
        self.assertEqual((old.mode, old.on_cpu, old.off_cpu, old.min_block, old.gil), (None, None, None, None, {}))

    def test_parse_top(self):
        text = ("Top functions by self time (990 samples):\n    self  total  function (file:line)\n"
                "   61.2%  61.2%  Model.step (/srv/a (copy).py:42)\n    0.5% 100.0%  <module> (/srv/main.py:3)\n"
                "    0.1%   0.1%  frame without file\n")
        top = pybpfprof.parse_top(text)
        self.assertEqual(top[0], (61.2, 61.2, "Model.step", "/srv/a (copy).py:42"))
        self.assertEqual((top[0].file, top[0].line), ("/srv/a (copy).py", 42))
        self.assertEqual(top[1].function, "<module>")
        self.assertEqual(top[2], (0.1, 0.1, "frame without file", ""))
        self.assertEqual(len(top), 3)
        # --native: "symbol [library]" with its source when known, "[k] name" for the kernel.
        native = pybpfprof.parse_top("   42.9%  42.9%  b [_ext.so] (/src/ext/ext.c:7)\n"
                                     "   28.6%  28.6%  [k] asm_exc_page_fault\n    0.0%  17.9%  read [libc.so.6]\n")
        self.assertEqual(native, [(42.9, 42.9, "b [_ext.so]", "/src/ext/ext.c:7"),
                                  (28.6, 28.6, "[k] asm_exc_page_fault", ""), (0.0, 17.9, "read [libc.so.6]", "")])


class ScriptedAgent(object):
    """An agent on a temporary socket that answers one connection with a script:
    script(conn, request) -> None, called for each request it reads."""

    def __init__(self, script):
        import tempfile
        self.dir = tempfile.mkdtemp(prefix="pbp-fake-agent-")
        self.path = os.path.join(self.dir, "agent.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(1)
        self.script = script
        self.requests = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @staticmethod
    def send(conn, header, attachments=()):
        header = dict(header, v=1)
        if attachments:
            header["attachments"] = [len(a) for a in attachments]
        data = json.dumps(header).encode()
        conn.sendall(struct.pack(">I", len(data)) + data + b"".join(attachments))

    def _serve(self):
        try:
            self._serve_one()
        except OSError:
            pass  # the client went away: what some scripts test

    def _serve_one(self):
        conn, _ = self.listener.accept()
        with conn:
            while True:
                head = conn.recv(4, socket.MSG_WAITALL)
                if len(head) < 4:
                    return
                body = conn.recv(struct.unpack(">I", head)[0], socket.MSG_WAITALL)
                request = json.loads(body.decode())
                self.requests.append(request)
                if self.script(conn, request) == "close":
                    return

    def close(self):
        self.listener.close()
        self.thread.join(5)
        import shutil
        shutil.rmtree(self.dir, ignore_errors=True)


SUMMARY = {"nothing_found": "", "counts": ": 7 samples, 1 process, 1 thread, 0 lost, 0 unresolved", "truncated": 0,
           "max_depth": 1024, "bpf_cost": "", "duration_s": 0.5, "not_sampled": [], "exited_early": [],
           "top": "Top functions by self time (7 samples):\n    self  total  function (file:line)\n"
                  "   100.0% 100.0%  f (/x.py:3)\n"}


class SessionAgainstAScriptedAgent(unittest.TestCase):
    """What the client does with the agent's events, errors and disappearance."""

    def agent(self, script):
        a = ScriptedAgent(script)
        self.addCleanup(a.close)
        return a

    def test_warnings_are_issued_and_kept(self):
        def script(conn, req):
            if req["op"] == "start":
                ScriptedAgent.send(conn, {"type": "event", "kind": "warning", "message": "before started"})
                ScriptedAgent.send(conn, {"type": "started", "session": 4, "rate_hz": 99.0, "targets": 1})
                ScriptedAgent.send(conn, {"type": "event", "kind": "error", "message": "process 77: something"})
                ScriptedAgent.send(conn, {"type": "progress", "elapsed_s": 0.25, "samples": 3, "processes": 1,
                                          "lost": 0})
            elif req["op"] == "stop":
                ScriptedAgent.send(conn, {"type": "profile", "format": "collapsed", "final": True, "report": False,
                                          "summary": SUMMARY}, [b"a;f 7\n"])
                return "close"

        a = self.agent(script)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            s = pybpfprof.Session(pids=[123], format="collapsed", socket_path=a.path).start()
            self.assertEqual(s.session_id, 4)
            deadline = time.monotonic() + 5
            while s.progress.get("samples") != 3 and time.monotonic() < deadline:
                time.sleep(0.02)
            self.assertEqual(s.progress["samples"], 3)
            r = s.stop("x.folded")
        messages = [str(w.message) for w in caught if w.category is pybpfprof.ProfilingWarning]
        self.assertEqual(messages, ["pybpfprof: warning: before started", "pybpfprof: process 77: something"])
        self.assertEqual(r.warnings, ["warning: before started", "process 77: something"])
        self.assertEqual(a.requests[0], {"v": 1, "op": "start", "pids": [123], "rate_hz": 99, "format": "collapsed",
                                         "children": True})
        self.assertEqual(a.requests[1], {"v": 1, "op": "stop", "output_name": "x.folded"})
        self.assertEqual((r.data, r.samples, r.processes, r.threads, r.lost), (b"a;f 7\n", 7, 1, 1, 0))
        self.assertEqual(r.top, [(100.0, 100.0, "f", "/x.py:3")])
        self.assertIsNone(r.mode)

    def test_dump_request_and_answer(self):
        doc = {"processes": [{"pid": 5, "threads": []}], "warnings": []}

        def script(conn, req):
            ScriptedAgent.send(conn, {"type": "dump", "format": "json"}, [json.dumps(doc).encode()])
            return "close"

        a = self.agent(script)
        self.assertEqual(pybpfprof.dump(pids=[5, 6], max_depth=7, socket_path=a.path), doc)
        self.assertEqual(a.requests, [{"v": 1, "op": "dump", "pids": [5, 6], "max_depth": 7}])
        a = self.agent(script)
        pybpfprof.dump(all_python=True, socket_path=a.path, backend="agent")
        self.assertEqual(a.requests, [{"v": 1, "op": "dump", "all_python": True}])
        a = self.agent(script)
        pybpfprof.dump(pid=5, async_tasks=True, socket_path=a.path, backend="agent")
        self.assertEqual(a.requests, [{"v": 1, "op": "dump", "pids": [5], "async": True}])
        with self.assertRaises(ValueError):
            pybpfprof.dump(pid=5, async_tasks="yes", socket_path=a.path)

    def test_dump_answers_that_are_not_dumps(self):
        def older(conn, req):  # an agent older than dumps
            ScriptedAgent.send(conn, {"type": "error", "code": "protocol", "message":
                                      'field \'op\' must be one of "start", "snapshot", "stop", "status" (got "dump")'})
            return "close"

        with self.assertRaises(pybpfprof.ProfilingError) as cm:
            pybpfprof.dump(pid=5, socket_path=self.agent(older).path)
        self.assertEqual(cm.exception.code, "unsupported")
        self.assertIn("older than pybpfprof.dump", cm.exception.message)
        for answer, attachments in (({"type": "dump"}, [b"[1, 2]"]), ({"type": "dump"}, [b"{\"processes\": 1}"]),
                                    ({"type": "dump"}, []), ({"type": "status", "sessions": []}, []),
                                    ({"type": "dump"}, [b"[" * 9 + b"]" * 9])):  # nested deeper than a dump
            def script(conn, req, answer=answer, attachments=attachments):
                ScriptedAgent.send(conn, answer, attachments)
                return "close"

            with self.assertRaises(pybpfprof.ProfilingError) as cm:
                pybpfprof.dump(pid=5, socket_path=self.agent(script).path)
            self.assertEqual(cm.exception.code, "client_protocol", (answer, attachments))

    def test_the_mode_is_sent_only_when_not_cpu(self):
        started = {}

        def script(conn, req):
            if req["op"] == "start":
                started.update(req)
                ScriptedAgent.send(conn, {"type": "started", "session": 1, "rate_hz": 99.0, "targets": 1})
            elif req["op"] == "stop":
                ScriptedAgent.send(conn, {"type": "profile", "format": "speedscope", "final": True, "report": False,
                                          "summary": dict(SUMMARY, mode=started.get("mode", "cpu"), on_cpu_ns=7,
                                                          off_cpu_ns=0, min_block_ns=0, aggregate_ns=0, gil_ns={})},
                                   [b"{}"])
                return "close"

        for kwargs, sent in (({}, {}), ({"mode": "gil"}, {"mode": "gil"}), ({"mode": "wall"}, {"mode": "wall"}),
                             ({"mode": "Wall", "min_block": 0.0005}, {"mode": "wall", "min_block_us": 500}),
                             ({"native": True}, {"native": True}), ({"native": False}, {})):
            started.clear()
            a = self.agent(script)
            s = pybpfprof.Session(pids=[123], socket_path=a.path, **kwargs).start()
            r = s.stop()
            want = {"v": 1, "op": "start", "pids": [123], "rate_hz": 99, "format": "speedscope", "children": True}
            want.update(sent)
            self.assertEqual(a.requests[0], want)
            self.assertEqual(r.mode, sent.get("mode", "cpu"))
        for bad in ("yes", 1, None):
            with self.assertRaisesRegex(TypeError, "native must be True or False"):
                pybpfprof.Session(pids=[123], native=bad)

    def test_a_refused_start_and_a_refused_snapshot(self):
        def script(conn, req):
            if req["op"] == "start" and req["pids"] == [1]:
                ScriptedAgent.send(conn, {"type": "error", "code": "forbidden", "message": "process 1 is not yours"})
            elif req["op"] == "start":
                ScriptedAgent.send(conn, {"type": "started", "session": 5, "rate_hz": 99.0, "targets": 1})
            elif req["op"] == "snapshot":
                ScriptedAgent.send(conn, {"type": "error", "code": "bad_input", "message": "unknown format 'x'"})
            else:
                ScriptedAgent.send(conn, {"type": "done", "reason": "all targets exited"})
                ScriptedAgent.send(conn, {"type": "profile", "format": "speedscope", "final": True, "report": False,
                                          "summary": dict(SUMMARY, nothing_found="no CPython process was found")},
                                   [b"{}"])
                return "close"

        a = self.agent(script)
        with self.assertRaises(pybpfprof.ProfilingError) as cm:
            pybpfprof.Session(pids=[1], socket_path=a.path).start()
        self.assertEqual((cm.exception.code, cm.exception.message), ("forbidden", "process 1 is not yours"))
        self.assertEqual(str(cm.exception), "process 1 is not yours [forbidden]")
        a2 = self.agent(script)
        s = pybpfprof.Session(pids=[2], socket_path=a2.path).start()
        with self.assertRaises(pybpfprof.ProfilingError) as cm:
            s.snapshot()
        self.assertEqual(cm.exception.code, "bad_input")
        with self.assertRaises(pybpfprof.ProfilingError) as cm:
            s.stop()
        self.assertEqual(cm.exception.code, "nothing_found")

    def test_the_agent_going_away(self):
        def script(conn, req):
            if req["op"] == "start":
                ScriptedAgent.send(conn, {"type": "started", "session": 6, "rate_hz": 99.0, "targets": 1})
                return "close"

        a = self.agent(script)
        path = os.path.join(OUT or "/tmp", "never-written-%d.json" % os.getpid())
        with self.assertRaises(pybpfprof.ProfilingError) as cm:
            with pybpfprof.profile(path, pids=[7], socket_path=a.path):
                time.sleep(0.5)
        self.assertEqual(cm.exception.code, "connection")
        self.assertIn("lost the connection to the agent (the agent closed the connection); its samples are gone",
                      str(cm.exception))
        self.assertFalse(os.path.exists(path))

    def test_a_broken_agent_message(self):
        def script(conn, req):
            if req["op"] == "start":
                ScriptedAgent.send(conn, {"type": "started", "session": 6, "rate_hz": 99.0, "targets": 1})
                conn.sendall(struct.pack(">I", 2 << 20))

        a = self.agent(script)
        s = pybpfprof.Session(pids=[7], socket_path=a.path).start()
        with self.assertRaises(pybpfprof.ProfilingError) as cm:
            s.stop()
        self.assertIn("message header of 2097152 bytes", str(cm.exception))


class NoAgent(unittest.TestCase):
    """No agent and no privileges: AgentUnavailableError, saying how to start the agent."""

    def setUp(self):
        if os.geteuid() == 0:
            self.skipTest("runs as a user who may not load BPF (PBP_TEST_MODE=agent runs it as one)")

    def check(self, e, path):
        self.assertIsInstance(e, RuntimeError)
        msg = str(e)
        self.assertIn("no pybpfprof agent answers at %s (No such file or directory)" % path, msg)
        self.assertIn("sudo systemctl enable --now pybpfprof-agent", msg)
        self.assertIn("run this program as root", msg)
        self.assertIn("PYBPFPROF_AGENT_SOCKET", msg)
        self.assertEqual(e.socket_path, path)
        self.assertNotIn("\n", msg)

    def test_no_agent_error(self):
        path = "/nonexistent-pybpfprof-dir/agent.sock"
        p = pybpfprof.profile(os.path.join(OUT or "/tmp", "never.html"), socket_path=path)
        ran = []
        with self.assertRaises(pybpfprof.AgentUnavailableError) as cm:
            with p:
                ran.append(1)
        self.assertEqual(ran, [])
        self.check(cm.exception, path)
        self.assertFalse(os.path.exists(os.path.join(OUT or "/tmp", "never.html")))

    def test_no_agent_error_from_the_environment(self):
        path = os.path.join(OUT or "/tmp", "no-agent-here.sock")
        old = os.environ.get("PYBPFPROF_AGENT_SOCKET")
        os.environ["PYBPFPROF_AGENT_SOCKET"] = path
        try:
            with self.assertRaises(pybpfprof.AgentUnavailableError) as cm:
                pybpfprof.Session().start()
        finally:
            if old is None:
                del os.environ["PYBPFPROF_AGENT_SOCKET"]
            else:
                os.environ["PYBPFPROF_AGENT_SOCKET"] = old
        self.check(cm.exception, path)


# ---- through the agent, as an unprivileged user -------------------------------------------
class AgentApi(Helpers):
    def setUp(self):
        self.assertNotEqual(os.geteuid(), 0, "PBP_TEST_MODE=agent runs as an unprivileged user")
        self.assertTrue(os.path.exists(_protocol.socket_path()), "no agent at " + _protocol.socket_path())

    def test_profile_of_the_calling_process(self):
        path = out("self.speedscope.json")
        with pybpfprof.profile(path, rate=199) as p:
            self.assertEqual(p.backend, "agent")
            hot_loop(2.5)
        self.assertEqual(p.path, path)
        self.assertEqual(p.format, "speedscope")
        self.assert_hot_in_result(p)
        self.assertEqual(p.processes, 1)
        self.assertGreater(p.duration, 2.0)
        self.assertIn("counts", p.summary)
        self.assert_hot_in_speedscope(path, os.getpid())
        self.assert_written_as_caller(path)

    def test_profile_of_its_children(self):
        path = out("children.json")
        ctx = multiprocessing.get_context("spawn")
        with pybpfprof.profile(path) as p:
            sub = subprocess.Popen([sys.executable, "-c", CHILD_CODE, "2.5"])
            mp = ctx.Process(target=mp_child_work, args=(2.5,))
            mp.start()
            sub.wait(60)
            mp.join(60)  # the parent sleeps meanwhile
        self.assertEqual(sub.returncode, 0)
        self.assertEqual(mp.exitcode, 0)
        doc, frames = read_speedscope(path)
        pids = speedscope_pids(doc)
        self.assertIn(sub.pid, pids)
        self.assertIn(mp.pid, pids)
        self.assertTrue(leaf_lines(doc, frames, "child_spin"), "no sample of the subprocess' child_spin")
        self.assertTrue(leaf_lines(doc, frames, "hot_loop"), "no sample of the multiprocessing child's hot_loop")
        self.assertGreaterEqual(p.processes, 2)
        self.assertIn("child_spin", p.top_text)

    def test_wall_mode_through_the_agent(self):
        path = out("wall.speedscope.json")
        with pybpfprof.profile(path, rate=199, mode="wall", min_block=0.0025) as p:
            hot_loop(1.5)
            time.sleep(0.5)
        self.assertEqual((p.mode, p.min_block), ("wall", 0.0025))
        self.assertEqual(p.summary["mode"], "wall", p.summary)
        self.assertEqual(p.summary["min_block_ns"], 2500000, p.summary)
        # Times, not counts: on CPU at most the one busy thread's wall time (the machine may
        # be loaded: how much the loop got is not the point here).
        self.assertGreater(p.on_cpu, 0, p.summary)
        self.assertLess(p.on_cpu, p.duration + 0.1, p.summary)
        # The half-second sleep is off-CPU time, [sleeping] under this function, weighing it.
        self.assertGreater(p.off_cpu, 0.45, p.summary)
        doc, frames = read_speedscope(path)
        slept = wait_seconds_under(doc, frames, "test_wall_mode_through_the_agent")
        self.assertGreater(slept, 0.45, wait_leaves(doc, frames))
        self.assertLess(slept, 0.5 + 0.25, wait_leaves(doc, frames))
        self.assertIn("hot_loop (%s:%d)" % (THIS_FILE, HOT_LINE), p.top_text)

    def test_native_frames_through_the_agent(self):
        # The interpreter's own C frames (main, Py_RunMain, ...: its executable or libpython)
        # are in every sample with the Python ones; kernel frames only for users who may see
        # kernel stacks (kernel.perf_event_paranoid <= 1), else left out with a warning.
        path = out("native.speedscope.json")
        with pybpfprof.profile(path, rate=199, native=True) as p:
            self.assertEqual(p.backend, "agent")
            hot_loop(1.0)
            kernel_read_loop(1.0)
        doc, frames = read_speedscope(path)
        n, native, _ = native_shares(doc, frames, "hot_loop")
        self.assertGreater(n, 20, p.top_text)
        self.assertGreaterEqual(native, n * 0.95, (n, native))
        n, native, kernel = native_shares(doc, frames, "kernel_read_loop")
        self.assertGreater(n, 20, p.top_text)
        hidden = [w for w in p.warnings if "kernel frames are shown to root and the agent's admin group only" in w]
        if perf_event_paranoid() >= 2:
            self.assertEqual(kernel, 0, "kernel frames for a user the kernel keeps them from")
            self.assertEqual(len(hidden), 1, p.warnings)
        else:
            self.assertGreater(kernel, n * 0.5, (n, kernel))
            self.assertEqual(hidden, [], p.warnings)

    def test_gil_mode_through_the_agent(self):
        with pybpfprof.profile(out("gil.json"), mode="gil") as p:
            hot_loop(0.5)
        self.assertEqual(p.summary["mode"], "gil", p.summary)
        self.assertEqual(p.summary["off_cpu_ns"], 0, p.summary)
        self.assertEqual(p.summary["min_block_ns"], 0, p.summary)

    def test_format_from_the_extension(self):
        for name, fmt in (("f.html", "html"), ("f.json", "speedscope"), ("f.folded", "collapsed")):
            path = out(name)
            with pybpfprof.profile(path) as p:
                hot_loop(1.0)
            self.assertEqual(p.format, fmt)
            with open(path, "rb") as f:
                data = f.read()
            if fmt == "html":
                self.assertTrue(data.lstrip().lower().startswith(b"<!doctype html"), data[:80])
                self.assertIn(b"hot_loop", data)
            elif fmt == "speedscope":
                self.assert_hot_in_speedscope(path, os.getpid())
            else:
                lines = data.decode().splitlines()
                self.assertTrue(lines)
                for line in lines:
                    self.assertRegex(line, r"^.+ \d+$")
                self.assertTrue(any("hot_loop (%s:%d)" % (THIS_FILE, HOT_LINE) in l for l in lines), lines[:3])
        # format= wins over the extension; an unknown extension is refused before anything runs.
        with pybpfprof.profile(out("forced.txt"), format="collapsed") as p:
            hot_loop(0.5)
        self.assertEqual(p.format, "collapsed")
        with self.assertRaises(ValueError):
            pybpfprof.profile(out("f.txt"))

    def test_a_relative_path_is_where_the_block_began(self):
        cwd = os.getcwd()
        os.chdir(OUT)
        try:
            with pybpfprof.profile("relative.folded") as p:
                os.chdir("/")
                hot_loop(0.5)
        finally:
            os.chdir(cwd)
        self.assertEqual(p.path, out("relative.folded"))
        self.assertTrue(os.path.exists(out("relative.folded")))

    def test_an_exception_in_the_block_propagates_and_the_profile_is_written(self):
        class Boom(Exception):
            pass

        raised = Boom("from the block")
        path = out("boom.json")
        with self.assertRaises(Boom) as cm:
            with pybpfprof.profile(path) as p:
                hot_loop(1.5)
                raise raised
        self.assertIs(cm.exception, raised)
        self.assertTrue(os.path.exists(path))
        self.assert_hot_in_result(p)
        self.assert_hot_in_speedscope(path, os.getpid())

    def test_repr_html_and_repr(self):
        path = out("repr & <x>.json")
        p = pybpfprof.profile(path, report=out("repr-report.html"))
        self.assertIn("not started", repr(p))
        with p:
            self.assertIn("running", p._repr_html_())
            hot_loop(1.5)
        html = p._repr_html_()
        self.assertIn("<table", html)
        self.assertIn("repr &amp; &lt;x&gt;.json", html)
        self.assertNotIn("<x>", html)
        for field in ("file", "samples", "processes", "duration", "report"):
            self.assertIn("<th style=\"text-align:left\">%s</th>" % field, html)
        self.assertIn("<td style=\"text-align:left\">%d</td>" % p.samples, html)
        self.assertIn("hot_loop", html)
        self.assertIn("%s:%d" % (THIS_FILE, HOT_LINE), html)
        top_rows = html.split("<tbody>")[1].count("<tr>")
        self.assertEqual(top_rows, min(5, len(p.top)))
        r = repr(p)
        self.assertIn("%d samples" % p.samples, r)
        self.assertIn("1 process", r)
        self.assertIn("hot_loop", r)
        with open(out("repr-report.html"), "rb") as f:
            self.assertIn(b"hot_loop", f.read())

    def test_session_in_several_calls_with_bytes(self):
        events = []
        s = pybpfprof.Session(format="collapsed", on_event=events.append)
        self.assertIs(s.start(), s)
        self.assertEqual(s.backend, "agent")
        self.assertIsNotNone(s.session_id)
        self.assertTrue(s.running)
        hot_loop(1.0)
        snap = s.snapshot()
        self.assertFalse(snap.final)
        self.assertIn(b"hot_loop", snap.data)
        snap2 = s.snapshot(format="speedscope")
        self.assertEqual(snap2.format, "speedscope")
        json.loads(snap2.data)
        hot_loop(0.5)
        # stopped from another thread, as a Dask plugin may
        box = []
        # (an output_name the agent would refuse as it is: a control character, over 4096 bytes)
        t = threading.Thread(target=lambda: box.append(s.stop(output_name="in\nmemory" + "\u00e9" * 3000)))
        t.start()
        t.join(120)
        result = box[0]
        self.assertTrue(result.final)
        self.assertIsInstance(result.data, bytes)
        self.assertIn(b"hot_loop", result.data)
        data, summary = result
        self.assertEqual(summary["counts"], result.summary["counts"])
        self.assertGreater(result.samples, snap.progress.get("samples", 0) or 0)
        self.assertTrue(any(t.function == "hot_loop" for t in result.top))
        self.assertFalse(s.running)
        self.assertTrue(any(e.get("kind") == "target_added" and e.get("pid") == os.getpid() for e in events), events)
        with self.assertRaises(pybpfprof.ProfilingError):
            s.stop()
        with self.assertRaises(pybpfprof.ProfilingError):
            s.snapshot()

    def test_a_forked_child_cannot_stop_the_parents_session(self):
        path = out("forked.json")
        with pybpfprof.profile(path) as p:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork() with threads
                pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    p.__exit__(None, None, None)  # the child leaving the block: nothing happens
                    p._session.close()
                    p._session.stop()
                except pybpfprof.ProfilingError as e:
                    code = 0 if "belongs to process %d" % os.getppid() in str(e) else 3
                except BaseException:
                    code = 2
                os._exit(code)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0)
            self.assertTrue(p._session.running)
            hot_loop(1.5)
        # The point is that the session outlived the child's attempt: samples of the loop after
        # it (how many depends on the machine's load, so no count threshold here).
        self.assertGreater(p.samples, 0, p.summary)
        self.assertIn("hot_loop (%s:%d)" % (THIS_FILE, HOT_LINE), p.top_text)

    def test_duration_ends_sampling_and_the_profile_still_comes_back(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pybpfprof.profile(out("short.json"), duration=1) as p:
                hot_loop(1.0)
                deadline = time.monotonic() + 10
                while p._session.done_reason is None and time.monotonic() < deadline:
                    time.sleep(0.1)
                self.assertEqual(p._session.done_reason, "duration reached")
                time.sleep(0.5)
        self.assertGreater(p.samples, 20)
        self.assertLess(p.duration, 1.6)
        self.assertEqual([str(w.message) for w in caught if issubclass(w.category, pybpfprof.ProfilingWarning)], [])

    def test_merge_of_two_profiles(self):
        # Two runs in pybpfprof's own format, as bytes and as a file, merged as this user.
        first = pybpfprof.Session(format="pbp").start()
        hot_loop(1.0)
        a = first.stop()
        second_path = out("merge-second.pbp")
        with pybpfprof.profile(second_path):
            hot_loop(1.0)
        merged = pybpfprof.merge([a.data, second_path], out("merged.speedscope.json"),
                                 labels=[{"role": "first"}, {"role": "second"}])
        self.assertEqual(merged, os.path.abspath(out("merged.speedscope.json")))
        with open(merged) as f:
            doc = json.load(f)
        names = [p["name"] for p in doc["profiles"]]
        self.assertTrue(any("role=first" in n for n in names), names)
        self.assertTrue(any("role=second" in n for n in names), names)
        self.assert_written_as_caller(merged)
        with self.assertRaises(pybpfprof.ProfilingError) as e:
            pybpfprof.merge([out("merged.speedscope.json")], out("again.json"))
        self.assertIn("not pybpfprof's own format", str(e.exception))

    def test_dump_of_this_process_through_the_agent(self):
        self.check_dump_of_self()
        self.check_dump_of_self(backend="agent", max_depth=64)

    def test_dump_of_a_child_through_the_agent(self):
        self.check_dump_of_a_child(backend="agent")

    def test_dump_refusals(self):
        with self.assertRaises(pybpfprof.ProfilingError) as cm:
            pybpfprof.dump(pid=1)
        self.assertEqual(cm.exception.code, "forbidden")
        self.assertIn("PID 1 (", cm.exception.message)
        self.assertNotIn("\n", cm.exception.message)
        with self.assertRaises(pybpfprof.ProfilingError) as cm:
            pybpfprof.dump(pid=4194304)
        self.assertEqual(cm.exception.code, "bad_input")
        self.assertIn("no process has PID 4194304", cm.exception.message)
        with self.assertRaises(ValueError):
            pybpfprof.dump(pid=os.getpid(), all_python=True)
        with self.assertRaises(ValueError):
            pybpfprof.dump(max_depth=0)
        with self.assertRaises(pybpfprof.AgentUnavailableError):
            pybpfprof.dump(backend="agent", socket_path=out("no-agent.sock"))
        # --all-python of this user: this process among them, nobody else's.
        doc = pybpfprof.dump(all_python=True)
        self.assertIn(os.getpid(), [p["pid"] for p in doc["processes"]])
        for p in doc["processes"]:
            try:
                with open("/proc/%d/status" % p["pid"]) as f:
                    uid_line = [l for l in f if l.startswith("Uid:")][0]
            except FileNotFoundError:
                continue  # exited since
            self.assertEqual(uid_line.split()[1:], [str(os.getuid())] * 4, p["pid"])

    def test_agent_refusal(self):
        with self.assertRaises(pybpfprof.ProfilingError) as cm:
            pybpfprof.Session(pids=[1], children=False).start()
        e = cm.exception
        self.assertEqual(e.code, "forbidden")
        self.assertNotIn("\n", e.message)
        self.assertIn("[forbidden]", str(e))
        self.assertNotIsInstance(e, pybpfprof.AgentUnavailableError)


# ---- as root, with no agent: the pybpfprof binary directly ----------------------------------
class RootDirect(Helpers):
    def setUp(self):
        self.assertEqual(os.geteuid(), 0, "PBP_TEST_MODE=root runs as root")
        self.assertFalse(os.path.exists(_protocol.socket_path()), "an agent answers at " + _protocol.socket_path())

    def test_profile_of_the_calling_process(self):
        path = out("root-self.speedscope.json")
        with pybpfprof.profile(path, rate=199) as p:
            self.assertEqual(p.backend, "direct")
            hot_loop(2.5)
        self.assert_hot_in_result(p)
        self.assert_hot_in_speedscope(path, os.getpid())
        self.assertEqual(p.processes, 1)
        self.assertGreater(p.duration, 2.0)
        self.assertIn("Wrote ", p.result.log)
        self.assert_written_as_caller(path)

    def test_wall_mode_through_the_binary(self):
        path = out("root-wall.json")
        with pybpfprof.profile(path, rate=199, mode="wall", min_block=0.0025) as p:
            self.assertEqual(p.backend, "direct")
            hot_loop(1.5)
            time.sleep(0.5)
        self.assertEqual(p.summary["mode"], "wall", p.result.log)
        self.assertEqual(p.summary["min_block_ns"], 2500000)
        self.assertGreater(p.on_cpu, 0, p.result.log)
        self.assertLess(p.on_cpu, p.duration + 0.1, p.result.log)
        self.assertGreater(p.off_cpu, 0.45, p.result.log)
        doc, frames = read_speedscope(path)
        slept = wait_seconds_under(doc, frames, "test_wall_mode_through_the_binary")
        self.assertGreater(slept, 0.45, wait_leaves(doc, frames))
        self.assertLess(slept, 0.5 + 0.25, wait_leaves(doc, frames))
        # What the binary printed is what the result holds.
        self.assertIn("  mode wall: %.3f s on CPU, %.3f s off CPU" % (p.on_cpu, p.off_cpu), p.result.log)
        self.assertIn("than the 2.5 ms --min-block", p.result.log)
        self.assertIn("hot_loop (%s:%d)" % (THIS_FILE, HOT_LINE), p.top_text)

    def test_native_frames_through_the_binary(self):
        # As root: native and kernel frames, no warning.
        path = out("root-native.speedscope.json")
        with pybpfprof.profile(path, rate=199, native=True) as p:
            self.assertEqual(p.backend, "direct")
            hot_loop(1.0)
            kernel_read_loop(1.0)
        doc, frames = read_speedscope(path)
        n, native, _ = native_shares(doc, frames, "hot_loop")
        self.assertGreater(n, 20, p.result.log)
        self.assertGreaterEqual(native, n * 0.95, (n, native))
        n, native, kernel = native_shares(doc, frames, "kernel_read_loop")
        self.assertGreater(n, 20, p.result.log)
        self.assertGreater(kernel, n * 0.5, (n, kernel))
        self.assertNotIn("kernel frames are shown", p.result.log)

    def test_profile_of_its_children(self):
        path = out("root-children.json")
        with pybpfprof.profile(path) as p:
            sub = subprocess.Popen([sys.executable, "-c", CHILD_CODE, "2"])
            sub.wait(60)
        doc, frames = read_speedscope(path)
        self.assertIn(sub.pid, speedscope_pids(doc))
        self.assertTrue(leaf_lines(doc, frames, "child_spin"))
        self.assertGreaterEqual(p.processes, 1)
        self.assertIn("child_spin", p.top_text)

    def test_exception_and_report(self):
        path = out("root-boom.folded")
        with self.assertRaises(KeyError):
            with pybpfprof.profile(path, report=out("root-report.html")) as p:
                hot_loop(1.0)
                raise KeyError("k")
        with open(path) as f:
            self.assertIn("hot_loop (%s:%d)" % (THIS_FILE, HOT_LINE), f.read())
        with open(out("root-report.html"), "rb") as f:
            self.assertIn(b"hot_loop", f.read())
        self.assertIn("hot_loop", p._repr_html_())

    def test_dump_without_agent(self):
        self.check_dump_of_self()
        self.check_dump_of_a_child(backend="direct")
        with self.assertRaises(pybpfprof.ProfilingError) as cm:
            pybpfprof.dump(pid=4194304)
        self.assertEqual(cm.exception.code, "exit_2")
        self.assertNotIn("\n", cm.exception.message)

    def test_a_session_left_running_ends_with_the_interpreter(self):
        code = ("import pybpfprof; s = pybpfprof.Session().start(); "
                "print(s.backend, s._impl.proc.pid, s._impl.tmpdir, flush=True)")
        r = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, universal_newlines=True, timeout=120)
        self.assertEqual(r.returncode, 0)
        backend, pid, tmpdir = r.stdout.split()
        self.assertEqual(backend, "direct")
        self.assertFalse(os.path.exists("/proc/%s" % pid), "the pybpfprof child outlived its caller")
        self.assertFalse(os.path.exists(tmpdir))

    def test_session_without_agent(self):
        s = pybpfprof.Session(format="speedscope").start()
        try:
            self.assertEqual(s.backend, "direct")
            with self.assertRaises(pybpfprof.ProfilingError) as cm:
                s.snapshot()
            self.assertEqual(cm.exception.code, "unsupported")
            hot_loop(1.0)
        finally:
            result = s.stop()
        self.assertIn(b"hot_loop", result.data)
        self.assertTrue(any(t.function == "hot_loop" for t in result.top))


def load_tests(loader, standard_tests, pattern):
    classes = [FormatTable, WriteAtomically, ReportPath, ProtocolClient, SessionAgainstAScriptedAgent]
    if MODE == "agent":
        classes += [NoAgent, AgentApi]
    elif MODE == "root":
        classes = [RootDirect]
    elif os.geteuid() != 0:
        classes.append(NoAgent)
    suite = unittest.TestSuite()
    for c in classes:
        suite.addTests(loader.loadTestsFromTestCase(c))
    return suite


def main():
    if MODE and not OUT:
        sys.exit("PBP_TEST_OUT must name a writable directory")
    print("pybpfprof from %s, Python %s (%s), mode %s, uid %d" % (
        os.path.dirname(pybpfprof.__file__), sys.version.split()[0], sys.executable, MODE or "none", os.getuid()))
    suite = load_tests(unittest.defaultTestLoader, None, None)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if os.environ.get("CI", "").lower() == "true" and result.skipped:
        print("CI=true: %d tests were skipped; under CI every test must run" % len(result.skipped))
        sys.exit(1)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
