"""Profiling sessions: through the local agent, or by running the pybpfprof binary.

A ``Session`` is started in one call and stopped in another (from another function, or
another thread), and gives the profile back as bytes, without writing a file::

    s = Session(pids=[os.getpid()], children=True, rate=99, format="speedscope")
    s.start()
    ...
    part = s.snapshot()            # the profile so far (agent only); sampling goes on
    result = s.stop()              # ProfileResult: .data (bytes), .summary (dict), .top, ...

With an agent (docs/agent.md) the session is one connection to its socket
($PYBPFPROF_AGENT_SOCKET, default /run/pybpfprof/agent.sock); a daemon thread reads the
agent's messages while the session runs. Without an agent, a process that may load BPF
itself (root, or CAP_BPF and CAP_PERFMON) runs ``pybpfprof --pid PID ...`` as a child,
stopped with SIGINT. Otherwise ``start()`` raises AgentUnavailableError.
"""

import atexit
import collections
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import warnings
import weakref

from . import _protocol
from ._errors import AgentUnavailableError, ProfilingError, ProfilingWarning
from .formats import default_extension, format_names

__all__ = ["Session", "ProfileResult", "TopFunction", "parse_top", "parse_counts", "parse_mode_lines",
           "find_binary", "may_load_bpf"]

BIN_ENV = "PYBPFPROF_BIN"

# Sessions still running when the interpreter exits are closed (their profile discarded):
# a pybpfprof child process must not outlive its caller.
_live = weakref.WeakSet()


@atexit.register
def _close_live_sessions():
    for s in list(_live):
        try:
            s.close()
        except Exception:
            pass

class TopFunction(collections.namedtuple("TopFunction", "self_percent total_percent function location")):
    """One line of the top functions: (self %, total %, function, "file:line").

    ``location`` is "" for a frame without a file; ``file`` and ``line`` split it."""

    __slots__ = ()

    @property
    def file(self):
        return self.location.rpartition(":")[0] if self.location else ""

    @property
    def line(self):
        tail = self.location.rpartition(":")[2] if self.location else ""
        return int(tail) if tail.isdigit() else 0


_TOP_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)%\s+(\d+(?:\.\d+)?)%\s\s(.*?)(?: \((.*:\d+)\))?$")


def parse_top(text):
    """The entries of the summary's "top" text (top_functions() in text_summary.cpp):
    a list of TopFunction, best first. Lines that are not entries are skipped."""
    out = []
    for line in (text or "").splitlines():
        m = _TOP_LINE.match(line)
        if m:
            out.append(TopFunction(float(m.group(1)), float(m.group(2)), m.group(3), m.group(4) or ""))
    return out


def parse_counts(counts):
    """The numbers of the summary's "counts" text (": 990 samples, 1 process, 1 thread, 0
    lost, 0 unresolved"): a dict with samples, processes, threads, lost, unresolved
    (those found)."""
    out = {}
    for key, pattern in (("samples", r"(\d+) samples?\b"), ("processes", r"(\d+) process(?:es)?\b"),
                         ("threads", r"(\d+) threads?\b"), ("lost", r"(\d+) lost\b"),
                         ("unresolved", r"(\d+) unresolved\b")):
        m = re.search(pattern, counts or "")
        if m:
            out[key] = int(m.group(1))
    return out


def _seconds(ns):
    return ns / 1e9 if isinstance(ns, (int, float)) and not isinstance(ns, bool) else None


# The summary's mode lines (mode_lines() in text_summary.cpp), as the binary prints them.
_MODE_LINE = re.compile(r"^  mode (cpu|wall|gil): (\d+\.\d+) s on CPU(?:, (\d+\.\d+) s off CPU)?"
                        r"(?: \((\d+\.\d+) s of it in intervals shorter than)?")
_GIL_PART = re.compile(r"(\d+\.\d+) s (held|waiting|neither|n/a)")
_LEFT_OUT = re.compile(r"; (\d+\.\d+) s on CPU not holding it left out \((\d+) samples?\)")
_GIL_UNKNOWN = re.compile(r"PID (\d+): ([^;]*?)(?=; PID \d+: |\); use --mode)")


def parse_mode_lines(lines, min_block_ns=0):
    """The summary fields of the mode lines among lines (the binary's stderr): mode,
    on_cpu_ns, off_cpu_ns, aggregate_ns, min_block_ns, gil_ns; {} when there is none."""
    out = {}
    for line in lines:
        m = _MODE_LINE.match(line)
        if m:
            ns = lambda text: int(round(float(text) * 1e9)) if text else 0
            out.update({"mode": m.group(1), "on_cpu_ns": ns(m.group(2)), "off_cpu_ns": ns(m.group(3)),
                        "aggregate_ns": ns(m.group(4)), "min_block_ns": min_block_ns if m.group(1) == "wall" else 0,
                        "gil_ns": {}})
            left = _LEFT_OUT.search(line)
            if m.group(1) == "gil" and left:
                # (The text has the total only; the agent's summary has it by state.)
                out["gil_left_out_ns"] = {"total": ns(left.group(1))}
                out["gil_left_out_samples"] = int(left.group(2))
        elif line.startswith("  GIL: ") and out:
            out["gil_ns"] = {state: int(round(float(sec) * 1e9)) for sec, state in _GIL_PART.findall(line)}
        elif line.startswith("  warning: ") and "no known GIL state" in line and out:
            out["gil_unknown"] = [{"pid": int(pid), "reason": why} for pid, why in _GIL_UNKNOWN.findall(line)]
    return out


class ProfileResult(object):
    """A profile and what the run says about it.

    ``data``: the profile's bytes in ``format``; ``report``: the HTML report's bytes or
    None; ``summary``: the agent's summary (docs/agent-protocol.md, "profile"; empty for a
    snapshot); ``final``: the answer to stop() (not a snapshot); ``warnings``: the
    agent's warning and error events of the session; ``progress``: the last progress
    message (samples, processes, lost, elapsed_s) when there was one. ``mode`` ("cpu",
    "wall", "gil"), ``on_cpu`` and ``off_cpu`` (seconds seen on and off CPU: summed sample
    weights), ``min_block`` (seconds, wall mode), ``gil`` (seconds by GIL state: "held",
    "waiting", "neither", "n/a"; empty when no sample's state is known): from the summary,
    None (or empty) for a snapshot. In gil mode, ``gil_left_out`` (seconds on CPU left out
    for not holding the GIL, by state; "total" alone through the direct backend),
    ``gil_left_out_samples``, and ``gil_unknown`` ([(pid, reason)]: processes whose GIL state
    is not known, none of whose samples gil mode keeps; also said in ``warnings``)."""

    def __init__(self, data, summary, format, final=True, report=None, backend="agent", warnings=(),
                 progress=None, log=""):
        self.data = data
        self.summary = summary or {}
        self.format = format
        self.final = final
        self.report = report
        self.backend = backend
        self.warnings = list(warnings)
        self.progress = dict(progress or {})
        self.log = log  # the pybpfprof binary's stderr (backend "direct")
        c = parse_counts(self.summary.get("counts", ""))
        self.samples = c.get("samples", self.progress.get("samples"))
        self.processes = c.get("processes", self.progress.get("processes"))
        self.threads = c.get("threads")
        self.lost = c.get("lost", self.progress.get("lost"))
        self.unresolved = c.get("unresolved")
        self.top_text = self.summary.get("top", "")
        self.top = parse_top(self.top_text)
        self.duration = self.summary.get("duration_s", self.progress.get("elapsed_s"))
        self.exited_early = [(e.get("pid"), e.get("samples")) for e in self.summary.get("exited_early", [])
                             if isinstance(e, dict)]
        # The mode and the time it saw (seconds); None in a snapshot.
        self.mode = self.summary.get("mode")
        self.on_cpu = _seconds(self.summary.get("on_cpu_ns"))
        self.off_cpu = _seconds(self.summary.get("off_cpu_ns"))
        self.min_block = _seconds(self.summary.get("min_block_ns")) or None
        gil = self.summary.get("gil_ns")
        self.gil = {k: _seconds(v) for k, v in gil.items()} if isinstance(gil, dict) else {}
        left = self.summary.get("gil_left_out_ns")
        self.gil_left_out = {k: _seconds(v) for k, v in left.items()} if isinstance(left, dict) else {}
        self.gil_left_out_samples = self.summary.get("gil_left_out_samples", 0)
        self.gil_unknown = [(u.get("pid"), u.get("reason")) for u in self.summary.get("gil_unknown", [])
                            if isinstance(u, dict)]
        if self.gil_unknown and self.mode == "gil":
            self.warnings.append("%d process(es) have no known GIL state and --mode gil keeps none of their "
                                 "samples (%s)" % (len(self.gil_unknown),
                                                   "; ".join("PID %s: %s" % u for u in self.gil_unknown)))

    def __iter__(self):
        # data, summary = result
        return iter((self.data, self.summary))

    def __repr__(self):
        return "<ProfileResult %s %s: %d bytes, %s samples, %s processes>" % (
            self.format, "final" if self.final else "snapshot", len(self.data), self.samples, self.processes)


def find_binary():
    """The pybpfprof binary: $PYBPFPROF_BIN, else pybpfprof on PATH, else
    /usr/local/bin/pybpfprof (where tools/install puts it). None when none exists."""
    env = os.environ.get(BIN_ENV, "")
    if env:
        return env if os.access(env, os.X_OK) else None
    found = shutil.which("pybpfprof")
    if found:
        return found
    return "/usr/local/bin/pybpfprof" if os.access("/usr/local/bin/pybpfprof", os.X_OK) else None


def may_load_bpf():
    """Root, or CAP_BPF and CAP_PERFMON in the effective set: a pybpfprof run by this
    process loads BPF itself (as the CLI decides)."""
    if os.geteuid() == 0:
        return True
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    caps = int(line.split()[1], 16)
                    return bool(caps & (1 << 38)) and bool(caps & (1 << 39))
    except (OSError, ValueError):
        pass
    return False


def _how_to_start(path, reason):
    return ("no pybpfprof agent answers at %s (%s), and this process (uid %d) may not load BPF itself. "
            "Start the agent once, as root: sudo systemctl enable --now pybpfprof-agent (installed by "
            "tools/install; without systemd: sudo pybpfprof agent &), or run this program as root. "
            "An agent on another socket: set %s." % (path, reason, os.geteuid(), _protocol.SOCKET_ENV))


class Session(object):
    """One profiling session of ``pids`` (default: this process) and, with ``children``,
    their descendants, those running now and those started later.

    ``rate``: samples per second per CPU (1 to 10000). ``duration``: seconds after which
    sampling ends by itself (None: until stop()). ``format``: one of
    pybpfprof.formats.format_names(). ``report``: also return the HTML report.
    ``socket_path``: the agent's socket (default $PYBPFPROF_AGENT_SOCKET or
    /run/pybpfprof/agent.sock). ``backend``: "auto" (the agent, else the binary when this
    process may load BPF), "agent" or "direct". ``on_event``: called with each event dict
    of the agent (``{"kind": "target_added", "pid": ...}``), from the reader thread.
    ``timeout``: seconds to wait for the session to start. ``mode``: "cpu" (on-CPU stacks, the
    default), "wall" (on-CPU stacks and every off-CPU interval of the targets' threads, under
    a leaf saying why they waited) or "gil" (the on-CPU samples that hold the GIL); see
    docs/modes.md. ``min_block``: with mode "wall", the off-CPU interval in seconds under
    which intervals are summed per thread and reason rather than kept one by one (10e-6 to 1;
    default 0.001). ``native``: each on-CPU sample (and with mode "wall" each off-CPU
    interval) also has its native (C, C++) and kernel frames, with the Python frames at their
    place, as ``pybpfprof --native`` (docs/native.md;
    through the agent, kernel frames only for those who may see kernel stacks).

    Thread-safe: start, snapshot and stop may be called from different threads (one
    request at a time). Warnings of the agent are issued (warnings.warn, category
    ProfilingWarning) by start(), snapshot() and stop(), on the calling thread."""

    def __init__(self, pids=None, children=True, rate=99, duration=None, format="speedscope", report=False,
                 socket_path=None, backend="auto", on_event=None, timeout=30.0, binary=None, mode="cpu",
                 min_block=None, native=False):
        self.pids = _protocol.check_pids(os.getpid() if pids is None else pids)
        if not isinstance(native, bool):
            raise TypeError("native must be True or False (got %r)" % (native,))
        self.native = native
        self.mode, self._min_block_us = _protocol.check_mode(mode, min_block)
        self.min_block = None if self._min_block_us is None else self._min_block_us / 1e6
        self.children = bool(children)
        self.rate = _protocol.check_number("rate", rate, _protocol.MIN_RATE_HZ, _protocol.MAX_RATE_HZ,
                                           "a number of samples per second")
        if duration is not None:
            _protocol.check_number("duration", duration, 0, _protocol.MAX_DURATION_S, "a number of seconds")
            if 0 < duration < _protocol.MIN_DURATION_S:
                raise ValueError("duration must be at least %g s, or 0 for no limit: a shorter run ends before a "
                                 "program can be found and sampled (got %r)" % (_protocol.MIN_DURATION_S, duration))
            if duration == 0:
                duration = None
        self.duration = duration
        format = format.lower() if isinstance(format, str) else format
        if format not in format_names():
            raise ValueError("format %r is not an output format; choose one of %s" % (format, ", ".join(format_names())))
        self.format = format
        self.report = bool(report)
        self.socket_path = socket_path or _protocol.socket_path()
        if backend not in ("auto", "agent", "direct"):
            raise ValueError("backend must be 'auto', 'agent' or 'direct' (got %r)" % (backend,))
        self._backend_choice = backend
        self.on_event = on_event
        self.timeout = timeout
        self.binary = binary
        self.backend = None  # "agent" or "direct" once started
        self._impl = None
        self._lock = threading.Lock()
        self._stopped = False
        self._owner = None  # the process that started it

    # ---- the public API -----------------------------------------------------------------
    def start(self):
        """Starts sampling; returns self once the targets are being sampled. Raises
        AgentUnavailableError (no agent, no privileges), ProfilingError (refused)."""
        with self._lock:
            if self._impl is not None:
                raise ProfilingError("this session was already started; create another Session", "bad_input")
            impl, reason = None, None
            if self._backend_choice in ("auto", "agent"):
                try:
                    sock = _protocol.connect(self.socket_path)
                except OSError as e:
                    reason = e.strerror or str(e)
                    if self._backend_choice == "agent":
                        raise AgentUnavailableError(
                            "cannot reach the agent at %s (%s); start it with: sudo systemctl enable --now "
                            "pybpfprof-agent" % (self.socket_path, reason), self.socket_path, reason) from None
                else:
                    impl = _AgentSession(self, sock)
            if impl is None:
                if self._backend_choice == "auto" and not may_load_bpf():
                    raise AgentUnavailableError(_how_to_start(self.socket_path, reason), self.socket_path, reason)
                impl = _DirectSession(self, reason)
            impl.start()
            self._impl = impl
            self._owner = os.getpid()
            self.backend = impl.name
            _live.add(self)
        self._flush_warnings()
        return self

    def snapshot(self, format=None, report=False):
        """The profile so far (a ProfileResult with final False); sampling goes on. Needs
        the agent (the binary cannot give one)."""
        impl = self._running("snapshot")
        with self._lock:
            if self._stopped:
                raise ProfilingError("snapshot after stop: this session was stopped", "bad_input")
            try:
                return impl.snapshot(format, report)
            finally:
                self._flush_warnings()

    def stop(self, output_name=None):
        """Stops sampling and returns the final ProfileResult. ``output_name`` is only used
        in the summary's text (the file the caller will write)."""
        impl = self._running("stop")
        with self._lock:
            if self._stopped:
                raise ProfilingError("this session was already stopped", "bad_input")
            self._stopped = True
            try:
                return impl.stop(output_name)
            finally:
                self._flush_warnings()

    def close(self):
        """Ends the session without a profile (what it sampled is discarded). Idempotent.
        In a child forked from the process that started it, does nothing: the session
        (its connection, its pybpfprof process) is the parent's."""
        impl = self._impl
        if impl is not None and self.in_owner:
            self._stopped = True
            impl.close()

    @property
    def in_owner(self):
        """This is the process that started the session (not a child forked from it)."""
        return self._owner is None or self._owner == os.getpid()

    @property
    def running(self):
        """Started, not stopped, and not ended by itself."""
        return self._impl is not None and not self._stopped and self._impl.done_reason is None \
            and self._impl.failure is None

    @property
    def done_reason(self):
        """Why the session ended by itself ("duration reached", ...), or None."""
        return self._impl.done_reason if self._impl else None

    @property
    def progress(self):
        """The agent's last progress message: elapsed_s, samples, processes, lost."""
        return dict(self._impl.progress) if self._impl else {}

    @property
    def events(self):
        """Every event of the session so far (dicts, as the agent sent them)."""
        return list(self._impl.events) if self._impl else []

    @property
    def session_id(self):
        """The agent's ID of the session (as in ``pybpfprof agent status``), or None."""
        return self._impl.session_id if self._impl else None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        state = "not started" if self._impl is None else "stopped" if self._stopped else \
            ("ended: %s" % self.done_reason) if self.done_reason else "running"
        return "<pybpfprof.Session pids=%r children=%r rate=%r mode=%r %s%s>" % (
            self.pids, self.children, self.rate, self.mode, state, (" via %s" % self.backend) if self.backend else "")

    # ---- internals -----------------------------------------------------------------------
    def _running(self, what):
        if self._impl is None:
            raise ProfilingError("%s before start: call start() first" % what, "bad_input")
        if not self.in_owner:
            raise ProfilingError("%s in process %d: this session belongs to process %d, which started it (a forked "
                                 "child cannot use it)" % (what, os.getpid(), self._owner), "bad_input")
        return self._impl

    def _flush_warnings(self):
        impl = self._impl
        if impl is None:
            return
        for message in impl.take_warnings():
            warnings.warn("pybpfprof: " + message, ProfilingWarning, stacklevel=3)


class _Common(object):
    def __init__(self, session):
        self.s = session
        self.done_reason = None
        self.failure = None
        self.progress = {}
        self.events = []
        self.warnings = []  # every warning of the session, for the result
        self._pending = []  # not yet issued with warnings.warn
        self._wlock = threading.Lock()
        self.session_id = None

    def warn(self, message):
        with self._wlock:
            self.warnings.append(message)
            self._pending.append(message)

    def take_warnings(self):
        with self._wlock:
            out, self._pending = self._pending, []
        return out


class _AgentSession(_Common):
    name = "agent"
    # A profile is exported by the agent before it answers: a large one takes time.
    PROFILE_TIMEOUT = 600.0

    def __init__(self, session, sock):
        _Common.__init__(self, session)
        self.sock = sock
        self.replies = queue.Queue()
        self.reader = None
        self.closing = False
        self.outstanding = False

    def _event(self, h):
        self.events.append(h)
        kind = h.get("kind")
        if kind == "warning":
            msg = str(h.get("message", ""))
            self.warn("warning: " + msg)
        elif kind == "error":
            self.warn(str(h.get("message", "")))
        cb = self.s.on_event
        if cb is not None:
            try:
                cb(dict(h))
            except Exception as e:  # a callback's failure never ends the session
                self.warn("on_event callback failed: %r" % (e,))

    def start(self):
        s = self.s
        req = {"op": "start", "pids": s.pids, "rate_hz": s.rate, "format": s.format}
        if s.children:
            req["children"] = True
        if s.duration:
            req["duration_s"] = s.duration
        if s.report:
            req["report"] = True
        # Sent only when not the default, so that an agent older than the modes still serves
        # cpu sessions (it refuses fields it does not know).
        if s.mode != "cpu":
            req["mode"] = s.mode
        if s._min_block_us is not None:
            req["min_block_us"] = s._min_block_us
        if s.native:
            req["native"] = True
        try:
            _protocol.send_request(self.sock, req)
            deadline = time.monotonic() + s.timeout
            while True:
                h, _ = _protocol.read_message(self.sock, max(0.0, deadline - time.monotonic()))
                t = h.get("type")
                if t == "error":
                    raise ProfilingError(str(h.get("message", "the agent refused the request")),
                                         str(h.get("code", "")) or None)
                if t == "event":
                    self._event(h)
                elif t == "started":
                    self.session_id = h.get("session")
                    break
        except ProfilingError as e:
            self.sock.close()
            if e.code == "connection":
                raise ProfilingError("the agent did not start the session: %s" % e.message, "connection") from None
            raise
        except BaseException:
            self.sock.close()
            raise
        self.reader = threading.Thread(target=self._read_loop, name="pybpfprof-agent-reader", daemon=True)
        self.reader.start()

    def _read_loop(self):
        sock = self.sock
        try:
            while not self.closing:
                if not _protocol.wait_readable(sock, 0.25):
                    continue
                h, attachments = _protocol.read_message(sock, self.PROFILE_TIMEOUT)
                t = h.get("type")
                if t == "event":
                    self._event(h)
                elif t == "progress":
                    self.progress = {k: h.get(k) for k in ("elapsed_s", "samples", "processes", "lost")}
                elif t == "done":
                    self.done_reason = str(h.get("reason", "done"))
                elif t == "profile":
                    self.replies.put(("profile", h, attachments))
                    if h.get("final"):
                        return
                elif t == "error":
                    self.replies.put(("error", h, None))
        except ProfilingError as e:
            if not self.closing:
                self.failure = e
                self.replies.put(("gone", e, None))
        except Exception as e:  # never die silently: the waiting caller must learn of it
            if not self.closing:
                self.failure = ProfilingError("reading from the agent failed: %r" % (e,), "connection")
                self.replies.put(("gone", self.failure, None))
        except BaseException:
            pass

    def _lost(self, e):
        return ProfilingError("lost the connection to the agent (%s); its samples are gone; is the agent running? "
                              "(systemctl status pybpfprof-agent)" % e.message, "connection")

    def _request(self, req):
        if self.failure is not None:
            raise self._lost(self.failure)
        _protocol.send_request(self.sock, req)
        try:
            kind, h, attachments = self.replies.get(timeout=self.PROFILE_TIMEOUT + 30)
        except queue.Empty:
            raise ProfilingError("the agent did not return the profile in %d s" % self.PROFILE_TIMEOUT,
                                 "connection") from None
        if kind == "gone":
            raise self._lost(h)
        if kind == "error":
            raise ProfilingError(str(h.get("message", "the agent refused the request")),
                                 str(h.get("code", "")) or None)
        if not attachments:
            raise ProfilingError("the agent's answer is incomplete (no profile attached)", "client_protocol")
        return h, attachments

    def _result(self, h, attachments, final):
        report = attachments[1] if h.get("report") and len(attachments) > 1 else None
        return ProfileResult(attachments[0], h.get("summary", {}) if final else {}, h.get("format", self.s.format),
                             final=final, report=report, backend="agent", warnings=self.warnings,
                             progress=self.progress)

    def snapshot(self, format, report):
        req = {"op": "snapshot", "report": bool(report)}
        if format is not None:
            if format not in format_names():
                raise ValueError("format %r is not an output format; choose one of %s"
                                 % (format, ", ".join(format_names())))
            req["format"] = format
        h, attachments = self._request(req)
        return self._result(h, attachments, False)

    def stop(self, output_name):
        req = {"op": "stop"}
        name = _protocol.clean_output_name(output_name)
        if name:
            req["output_name"] = name
        try:
            h, attachments = self._request(req)
            if not h.get("final"):
                raise ProfilingError("the agent answered stop with a snapshot", "client_protocol")
        finally:
            self.close()
        summary = h.get("summary")
        if not isinstance(summary, dict):
            raise ProfilingError("the agent's answer is incomplete (no summary)", "client_protocol")
        if summary.get("nothing_found"):
            raise ProfilingError(str(summary["nothing_found"]), "nothing_found")
        if self.s.report and len(attachments) < 2:
            raise ProfilingError("the agent's answer is incomplete (no report)", "client_protocol")
        return self._result(h, attachments, True)

    def close(self):
        if self.closing:
            return
        self.closing = True
        try:
            self.sock.shutdown(2)
        except OSError:
            pass
        if self.reader is not None and self.reader is not threading.current_thread():
            self.reader.join(5)
        self.sock.close()


class _DirectSession(_Common):
    """``pybpfprof --pid PID [--subprocesses] -r RATE -f FORMAT -o TMP`` as a child process,
    stopped with SIGINT; the file it writes is read back and removed."""

    name = "direct"

    def __init__(self, session, agent_reason):
        _Common.__init__(self, session)
        self.agent_reason = agent_reason
        self.proc = None
        self.lines = []
        self.started = threading.Event()
        self.announced = set()
        self.reader = None
        self.tmpdir = None
        self.t0 = None
        self.stopping = False

    def start(self):
        s = self.s
        binary = s.binary or find_binary()
        if not binary:
            raise AgentUnavailableError(
                "no pybpfprof agent answers at %s (%s), and the pybpfprof binary to profile directly was not found "
                "(not on PATH nor at /usr/local/bin/pybpfprof; set %s)" % (s.socket_path, self.agent_reason, BIN_ENV),
                s.socket_path, self.agent_reason)
        self.tmpdir = tempfile.mkdtemp(prefix="pybpfprof-")
        self.out = os.path.join(self.tmpdir, "profile." + default_extension(s.format))
        self.report_path = os.path.join(self.tmpdir, "report.html") if s.report else None
        cmd = [binary]
        for pid in s.pids:
            cmd += ["--pid", str(pid)]
        if s.children:
            cmd.append("--subprocesses")
        cmd += ["-r", repr(s.rate), "-f", s.format, "-o", self.out]
        if s.duration:
            cmd += ["-d", repr(s.duration)]
        if self.report_path:
            cmd += ["--report", self.report_path]
        if s.mode != "cpu":
            cmd += ["--mode", s.mode]
        if s._min_block_us is not None:
            cmd += ["--min-block", "%dus" % s._min_block_us]
        if s.native:
            cmd.append("--native")
        self.t0 = time.monotonic()
        # Its own session: a Ctrl-C at the terminal reaches this program, which stops it.
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, start_new_session=True)
        self.reader = threading.Thread(target=self._read_stderr, name="pybpfprof-stderr", daemon=True)
        self.reader.start()
        deadline = time.monotonic() + s.timeout
        while not self.started.wait(0.05):
            if self.proc.poll() is not None:
                self.reader.join(5)
                err = self._error_text()
                self._cleanup()
                raise ProfilingError(err, "exit_%d" % self.proc.returncode)
            if time.monotonic() > deadline:
                self.close()
                raise ProfilingError("pybpfprof did not start sampling within %g s: %s"
                                     % (s.timeout, self._error_text()), "timeout")

    def _read_stderr(self):
        want = set(self.s.pids)
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            m = re.match(r"pybpfprof: profiling PID (\d+)", line)
            if m:
                pid = int(m.group(1))
                self.announced.add(pid)
                self.events.append({"kind": "target_added", "pid": pid, "announce": True})
                if want <= self.announced:
                    self.started.set()
            elif line.startswith("pybpfprof: warning: "):
                self.warn(line[len("pybpfprof: "):])
        if not self.stopping and self.started.is_set():
            self.done_reason = "duration reached" if self.s.duration else "pybpfprof exited"

    def _error_text(self):
        msgs = [l[len("pybpfprof: "):] for l in self.lines if l.startswith("pybpfprof: ")]
        return "; ".join(msgs[-3:]) if msgs else "pybpfprof exited with status %s" % self.proc.returncode

    def snapshot(self, format, report):
        raise ProfilingError("a snapshot needs the pybpfprof agent; this session runs the pybpfprof binary "
                             "(no agent answers at %s)" % self.s.socket_path, "unsupported")

    def stop(self, output_name):
        self.stopping = True
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)
            try:
                rc = self.proc.wait(_AgentSession.PROFILE_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise ProfilingError("pybpfprof did not write the profile within %d s"
                                     % _AgentSession.PROFILE_TIMEOUT, "timeout") from None
            self.reader.join(10)
            duration = time.monotonic() - self.t0
            if rc not in (0, 3):
                raise ProfilingError(self._error_text(), "exit_%d" % rc)
            with open(self.out, "rb") as f:
                data = f.read()
            report = None
            if self.report_path:
                with open(self.report_path, "rb") as f:
                    report = f.read()
            return ProfileResult(data, self._summary(duration), self.s.format, final=True, report=report,
                                 backend="direct", warnings=self.warnings, log="\n".join(self.lines))
        finally:
            self._cleanup()

    def _summary(self, duration):
        counts, top, exited, not_sampled = "", [], [], []
        in_top = False
        wrote = "Wrote " + self.out
        for line in self.lines:
            if line.startswith(wrote):
                counts = line[len(wrote):]
            elif line.startswith("Top functions by self time"):
                in_top = True
                top.append(line)
            elif in_top and line.startswith("  "):
                top.append(line)
            else:
                in_top = False
                m = re.match(r"pybpfprof: PID (\d+) exited during the run; its (\d+) samples", line)
                if m:
                    exited.append({"pid": int(m.group(1)), "samples": int(m.group(2))})
                m = re.match(r"pybpfprof: PID (\d+) \((.*)\) was not sampled during", line)
                if m:
                    not_sampled.append({"pid": int(m.group(1)), "comm": m.group(2)})
        summary = {"nothing_found": "", "counts": counts, "truncated": 0, "max_depth": 0, "bpf_cost": "",
                   "duration_s": round(duration, 3), "not_sampled": not_sampled, "exited_early": exited,
                   "top": "".join(l + "\n" for l in top)}
        min_block_ns = (self.s._min_block_us if self.s._min_block_us is not None else 1000) * 1000
        summary.update(parse_mode_lines(self.lines, min_block_ns))
        return summary

    def close(self):
        self.stopping = True
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._cleanup()

    def _cleanup(self):
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None
        if self.proc is not None and self.proc.stderr is not None and (self.reader is None or not self.reader.is_alive()):
            self.proc.stderr.close()
