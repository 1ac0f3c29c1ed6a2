"""pybpfprof.dask: profile a Dask cluster — its scheduler and every worker — into one report.

    import pybpfprof.dask

    with pybpfprof.dask.profile(client, "report.html"):        # scheduler + workers
        df.groupby("name").x.mean().compute()

    with pybpfprof.dask.profile_scheduler("profile.json"):     # distributed-pyspy's drop-in
        df.set_index("id").mean().compute()

How it works (docs/dask.md):

- Each profiled Dask process profiles itself: ``client.run_on_scheduler`` and ``client.run``
  call a function of this module in the scheduler and in every worker, which starts a
  ``pybpfprof.Session`` on its own PID through its own machine's pybpfprof agent (or the
  binary, as root) and keeps it in a module-level registry under a token. At the end of the
  block a second call stops it and returns the profile, in pybpfprof's lossless format, as
  bytes through Dask's RPC (as distributed-pyspy returns py-spy's file), together with the
  process's PID, host name and a map of its threads' idents to their kernel thread ids
  (``threading.Thread.native_id``).
- The client collects the scheduler's task stream for the same window
  (``client.get_task_stream``) and writes it as a task file ("pybpfprof-tasks": each task's
  key, key prefix, worker, PID, kernel tid and startstops).
- The parts are merged by ``pybpfprof merge PARTS... -o PATH --label ... --tasks TASKS``, where
  a pybpfprof binary exists: on the client's machine, else on the scheduler's (the parts are
  sent to it with ``run_on_scheduler`` and the merged file comes back). Every process is
  labelled with its role: ``role=scheduler``, or ``role=worker`` and ``worker=ADDRESS``.
  If neither machine has the binary, the parts and the task file are written next to PATH
  (``PATH.parts/``) with the command that merges them, and ProfilingError says so.
- Sessions are stopped whatever happens in the block; every call to a Dask process has a
  time limit, so a worker that died or hangs costs its part of the profile (a warning), not
  the client's wait.
"""

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings

from . import _protocol
from ._errors import ProfilingError, ProfilingWarning
from .api import write_atomically
from .formats import format_for_path, format_names, known_extensions_text
from .session import Session, find_binary

__all__ = ["profile", "profile_scheduler", "DaskProfile", "RAW_FORMAT", "TASKS_FORMAT"]

# The format of each process's part: pybpfprof's lossless format, which `pybpfprof merge`
# reads.
RAW_FORMAT = "pbp"
RAW_EXTENSION = "pbp"
TASKS_FORMAT = "pybpfprof-tasks"

# ---- in each Dask process ------------------------------------------------------------------

_sessions = {}  # token -> _Part
_registry_lock = threading.Lock()


class _Part(object):
    def __init__(self, session, threads):
        self.session = session
        self.threads = threads


def _thread_map():
    """{str(ident): native_id} of this process's live threads (Dask's task stream names a
    thread by threading.get_ident(); the kernel, and so the profile, by its native id)."""
    out = {}
    for t in threading.enumerate():
        native = getattr(t, "native_id", None)
        if t.ident is not None and native:
            out[str(t.ident)] = int(native)
    return out


def _identity():
    return {"pid": os.getpid(), "host": socket.gethostname(), "python": sys.version.split()[0]}


def _start_here(token, options):
    """Starts profiling this process (in a Dask scheduler or worker); returns who it is."""
    with _registry_lock:
        if token in _sessions:
            raise ProfilingError("pybpfprof.dask: a session %s already runs in this process" % token, "bad_input")
    s = Session(pids=[os.getpid()], children=options.get("children", False), rate=options["rate"],
                duration=options.get("max_duration"), format=options["format"],
                socket_path=options.get("socket_path"), backend=options.get("backend", "auto"),
                timeout=options.get("start_timeout", 30.0), mode=options.get("mode", "cpu"),
                min_block=options.get("min_block"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ProfilingWarning)
        s.start()
    with _registry_lock:
        _sessions[token] = _Part(s, _thread_map())
    out = _identity()
    out.update({"backend": s.backend, "session": s.session_id, "started": time.time(),
                "warnings": [str(w.message) for w in caught]})
    return out


def _stop_here(token):
    """Stops this process's session; returns its profile (bytes) and its thread map."""
    with _registry_lock:
        part = _sessions.pop(token, None)
    if part is None:
        raise ProfilingError("pybpfprof.dask: no session %s in this process (was it restarted?)" % token,
                             "no_session")
    threads = dict(part.threads)
    threads.update(_thread_map())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ProfilingWarning)
        try:
            result = part.session.stop()
        finally:
            part.session.close()
    out = _identity()
    out.update({"data": result.data, "summary": result.summary, "threads": threads, "backend": result.backend,
                "warnings": list(result.warnings) + [str(w.message) for w in caught], "stopped": time.time()})
    return out


def _close_here(token):
    """Discards this process's session (the block failed before every part had started)."""
    with _registry_lock:
        part = _sessions.pop(token, None)
    if part is not None:
        part.session.close()
    return part is not None


def _merge_here(parts, labels, tasks, fmt, binary=None):
    """Runs `pybpfprof merge` in this process (on the scheduler's machine when the client has
    no binary); returns the merged file's bytes."""
    return _run_merge(parts, labels, tasks, fmt, binary or find_binary())


# Dask awaits a coroutine function on the process's event loop: these hand the work to a
# thread, so a session's start or stop (which waits for the agent) never blocks the loop.
async def _in_thread(fn, *args):
    import asyncio
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


async def _start_async(token, options):
    return await _in_thread(_start_here, token, options)


async def _stop_async(token):
    return await _in_thread(_stop_here, token)


async def _close_async(token):
    return await _in_thread(_close_here, token)


async def _merge_async(parts, labels, tasks, fmt):
    return await _in_thread(_merge_here, parts, labels, tasks, fmt)


# ---- merging -------------------------------------------------------------------------------

def merge_command(binary, part_paths, labels, out, fmt, tasks_path=None):
    """The `pybpfprof merge` command line: part i (1-based) gets the labels labels[i-1]; the
    run is called "Dask: scheduler + N workers"."""
    roles = [dict(lab).get("role") for lab in labels]
    what = (["scheduler"] if "scheduler" in roles else []) + (
        ["%d worker%s" % (roles.count("worker"), "" if roles.count("worker") == 1 else "s")]
        if "worker" in roles else [])
    cmd = [binary, "merge"] + list(part_paths) + ["-o", out, "-f", fmt, "--no-summary",
                                                  "--target", "Dask: " + " + ".join(what)]
    for i, lab in enumerate(labels):
        for k, v in lab:
            cmd += ["--label", "%d:%s=%s" % (i + 1, k, v)]
    if tasks_path:
        cmd += ["--tasks", tasks_path]
    return cmd


def _run_merge(parts, labels, tasks, fmt, binary):
    if not binary:
        raise ProfilingError("no pybpfprof binary on %s (not on PATH nor at /usr/local/bin/pybpfprof; set "
                             "PYBPFPROF_BIN)" % socket.gethostname(), "no_binary")
    tmp = tempfile.mkdtemp(prefix="pybpfprof-dask-merge-")
    try:
        paths = []
        for i, data in enumerate(parts):
            p = os.path.join(tmp, "part-%d.%s" % (i + 1, RAW_EXTENSION))
            with open(p, "wb") as f:
                f.write(data)
            paths.append(p)
        tasks_path = None
        if tasks is not None:
            tasks_path = os.path.join(tmp, "tasks.json")
            with open(tasks_path, "wb") as f:
                f.write(tasks)
        out = os.path.join(tmp, "merged")
        cmd = merge_command(binary, paths, labels, out, fmt, tasks_path)
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=600)
        if r.returncode != 0:
            raise ProfilingError("pybpfprof merge failed on %s (exit %d): %s" % (
                socket.gethostname(), r.returncode, r.stderr.decode("utf-8", "replace").strip()[-2000:]),
                "merge_failed")
        with open(out, "rb") as f:
            return {"data": f.read(), "log": r.stderr.decode("utf-8", "replace"), "host": socket.gethostname(),
                    "binary": binary}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- on the client -------------------------------------------------------------------------

class _Timeout(Exception):
    pass


def _calls(calls, timeout):
    """Runs {name: fn} in daemon threads, at once; returns {name: (ok, value or exception)}.
    A call still running after ``timeout`` seconds gives (False, _Timeout): its thread is
    left behind (a daemon: it never holds up the interpreter's exit)."""
    results = {}
    threads = {}
    for name, fn in calls.items():
        def run(name=name, fn=fn):
            try:
                results[name] = (True, fn())
            except BaseException as e:  # noqa: B902 - reported to the caller
                results[name] = (False, e)
        t = threading.Thread(target=run, name="pybpfprof-dask-%s" % name, daemon=True)
        t.start()
        threads[name] = t
    deadline = time.monotonic() + timeout
    for name, t in threads.items():
        t.join(max(0.0, deadline - time.monotonic()))
    out = {}
    for name in calls:
        out[name] = results.get(name, (False, _Timeout("no answer within %g s" % timeout)))
    return out


def _key_split(key):
    try:
        from dask.utils import key_split
    except ImportError:  # older Dask
        from distributed.utils import key_split
    return key_split(key)


def _key_text(key):
    if isinstance(key, bytes):
        return key.decode("utf-8", "replace")
    return key if isinstance(key, str) else str(key)


class DaskProfile(object):
    """The context manager of ``profile()``; after the block it holds what happened:

    ``path``, ``format``; ``parts``: {role: {"pid", "host", "backend", "samples", "threads",
    "warnings", "bytes"}} (role "scheduler" or the worker's address); ``task_stream``: the
    task records of the window (Dask's dicts); ``tasks``: the task file written into the
    merge (a dict); ``merged_on``: "client" or "scheduler"; ``missing``: {role: reason} of
    the processes whose part was lost; ``warnings``; ``parts_dir`` when the parts were kept."""

    def __init__(self, client, path, scheduler=True, workers=True, rate=99, format=None, timeout=120.0,
                 socket_path=None, backend="auto", merge_on="auto", tasks=True, max_duration=None,
                 keep_parts=False, mode="cpu", min_block=None):
        if not scheduler and not workers:
            raise ValueError("nothing to profile: scheduler and workers are both False")
        self.client = client
        self.path = os.path.abspath(os.fspath(path))
        fmt = format.lower() if isinstance(format, str) else format
        if fmt is None:
            fmt = format_for_path(self.path)
            if fmt is None:
                raise ValueError("cannot tell the format from %r: give format= or end the name in %s"
                                 % (os.fspath(path), known_extensions_text()))
        if fmt not in format_names():
            raise ValueError("format %r is not an output format; choose one of %s" % (fmt, ", ".join(format_names())))
        if merge_on not in ("auto", "client", "scheduler"):
            raise ValueError("merge_on must be 'auto', 'client' or 'scheduler' (got %r)" % (merge_on,))
        self.format = fmt
        self.want_scheduler = bool(scheduler)
        self.workers_wanted = workers
        self.timeout = float(timeout)
        self.merge_on_choice = merge_on
        self.collect_tasks = bool(tasks)
        self.keep_parts = bool(keep_parts)
        # Checks the arguments here, before anything runs.
        check = Session(pids=[os.getpid()], rate=rate, duration=max_duration, format="speedscope",
                        backend=backend, mode=mode, min_block=min_block)
        self.mode, self.min_block = check.mode, check.min_block
        self.options = {"rate": rate, "format": RAW_FORMAT, "socket_path": socket_path, "backend": backend,
                        "max_duration": max_duration, "children": False, "mode": self.mode,
                        "min_block": self.min_block}
        self.token = None
        self.started = {}   # role -> identity from _start_here
        self.addresses = {}  # role -> worker address (None for the scheduler)
        self.parts = {}
        self.missing = {}
        self.warnings = []
        self.task_stream = []
        self.tasks = None
        self.merged_on = None
        self.parts_dir = None
        self.t_start = self.t_end = None

    # -- the block --------------------------------------------------------------------------
    def __enter__(self):
        d = os.path.dirname(self.path)
        if not os.path.isdir(d):
            raise FileNotFoundError(2, "the directory of the output does not exist", d)
        if not os.access(d, os.W_OK):
            raise PermissionError(13, "cannot write into the output's directory", d)
        self.token = "pbp-%s" % uuid.uuid4().hex
        if self.collect_tasks:
            # The scheduler records the task stream only once asked (TaskStreamPlugin).
            self.client.get_task_stream(start=0, stop=0)
        roles = {}
        if self.want_scheduler:
            roles["scheduler"] = None
        if self.workers_wanted:
            infos = self.client.scheduler_info().get("workers", {})
            wanted = list(infos) if self.workers_wanted is True else list(self.workers_wanted)
            for addr in wanted:
                roles[addr] = addr
        self.addresses = roles
        self.t_start = time.time()
        calls = {}
        for role, addr in roles.items():
            calls[role] = self._rpc(addr, _start_async, self.token, self.options)
        results = _calls(calls, self.timeout)
        failed = {}
        for role, (ok, value) in results.items():
            if ok:
                self.started[role] = value
                for w in value.get("warnings", []):
                    self._warn("%s: %s" % (role, w))
            else:
                failed[role] = value
        if failed:
            self._close_all()
            raise ProfilingError("pybpfprof.dask: could not start profiling %s" % "; ".join(
                "%s: %s" % (role, _describe(e)) for role, e in failed.items()), "start_failed")
        return self

    def __exit__(self, exc_type, exc, tb):
        self.t_end = time.time()
        try:
            self._finish()
        except Exception as e:
            if exc_type is None:
                raise
            warnings.warn("pybpfprof.dask: the profile was not written: %s" % e, ProfilingWarning, stacklevel=2)
        return False

    # -- helpers ----------------------------------------------------------------------------
    def _rpc(self, addr, fn, *args):
        client = self.client
        if addr is None:
            return lambda: client.run_on_scheduler(fn, *args)

        def on_worker():
            r = client.run(fn, *args, workers=[addr], on_error="return")
            if addr not in r:
                raise ProfilingError("worker %s did not answer (it left the cluster?)" % addr, "worker_gone")
            if isinstance(r[addr], BaseException):
                raise r[addr]
            return r[addr]
        return on_worker

    def _warn(self, message):
        self.warnings.append(message)
        warnings.warn("pybpfprof.dask: " + message, ProfilingWarning, stacklevel=3)

    def _close_all(self):
        calls = {role: self._rpc(self.addresses[role], _close_async, self.token) for role in self.started}
        _calls(calls, min(self.timeout, 30.0))

    def _finish(self):
        calls = {role: self._rpc(self.addresses[role], _stop_async, self.token) for role in self.started}
        if self.collect_tasks:
            t_start = self.t_start
            calls[" tasks"] = lambda: self.client.get_task_stream(start=t_start)
        results = _calls(calls, self.timeout)
        stream = []
        if self.collect_tasks:
            ok, value = results.pop(" tasks")
            if ok:
                stream = value
            else:
                self._warn("the task stream could not be collected: %s" % _describe(value))
        parts = []  # (role, result)
        for role in self.started:
            ok, value = results[role]
            if not ok:
                self.missing[role] = _describe(value)
                self._warn("%s: its profile is lost: %s" % (role, self.missing[role]))
                continue
            for w in value.get("warnings", []):
                self._warn("%s: %s" % (role, w))
            parts.append((role, value))
            summary = value.get("summary") or {}
            self.parts[role] = {"pid": value["pid"], "host": value["host"], "backend": value.get("backend"),
                                "threads": value.get("threads", {}), "bytes": len(value["data"]),
                                "counts": summary.get("counts", ""), "warnings": value.get("warnings", [])}
        if not parts:
            raise ProfilingError("pybpfprof.dask: no process's profile came back (%s)" % "; ".join(
                "%s: %s" % kv for kv in self.missing.items()), "no_parts")
        # The window's tasks: those with a startstop in it.
        lo, hi = self.t_start, self.t_end
        self.task_stream = [r for r in stream
                            if any(ss.get("stop", 0) >= lo and ss.get("start", 0) <= hi for ss in r.get("startstops", ()))]
        self.tasks = self.task_file(self.task_stream)
        tasks_bytes = json.dumps(self.tasks).encode() if self.collect_tasks else None
        labels = [self._labels(role) for role, _ in parts]
        data = self._merge([p["data"] for _, p in parts], labels, tasks_bytes)
        write_atomically(self.path, data)

    def _labels(self, role):
        if self.addresses.get(role) is None:
            return [("role", "scheduler")]
        return [("role", "worker"), ("worker", role)]

    def task_file(self, records):
        """The task file ("pybpfprof-tasks", version 1) of Dask task-stream records: each
        record's worker and thread ident resolved to the worker's PID and kernel tid."""
        tasks = []
        for r in records:
            worker = r.get("worker")
            part = self.parts.get(worker) or {}
            thread = r.get("thread")
            key = _key_text(r.get("key"))
            t = {"key": key, "prefix": _key_split(r.get("key")), "worker": worker,
                 "startstops": [{k: v for k, v in ss.items() if k in ("action", "start", "stop", "source")}
                                for ss in r.get("startstops", ())]}
            if part:
                t["pid"] = part["pid"]
                t["host"] = part["host"]
                tid = part["threads"].get(str(thread))
                if tid:
                    t["tid"] = tid
            if thread is not None:
                t["thread"] = thread
            if r.get("status"):
                t["status"] = r["status"]
            tasks.append(t)
        return {"format": TASKS_FORMAT, "version": 1, "source": "dask", "start": self.t_start, "stop": self.t_end,
                "tasks": tasks}

    def _merge(self, parts, labels, tasks):
        how = self.merge_on_choice
        errors = []
        if how in ("auto", "client"):
            binary = find_binary()
            if binary:
                r = _run_merge(parts, labels, tasks, self.format, binary)
                self.merged_on = "client"
                return r["data"]
            errors.append("this machine (%s) has no pybpfprof binary" % socket.gethostname())
        if how in ("auto", "scheduler"):
            ok, value = _calls({"merge": lambda: self.client.run_on_scheduler(
                _merge_async, parts, labels, tasks, self.format)}, max(self.timeout, 600.0))["merge"]
            if ok:
                self.merged_on = "scheduler"
                return value["data"]
            errors.append("on the scheduler: %s" % _describe(value))
        self.parts_dir = self._keep(parts, labels, tasks)
        raise ProfilingError("pybpfprof.dask: could not merge the profiles (%s). The parts and the task file are in "
                             "%s; merge them where pybpfprof is installed with: %s" % (
                                 "; ".join(errors), self.parts_dir,
                                 " ".join(shlex.quote(a) for a in self._keep_command(len(parts), labels, tasks))),
                             "merge_failed")

    def _keep_command(self, n, labels, tasks):
        names = ["part-%d.%s" % (i + 1, RAW_EXTENSION) for i in range(n)]
        return merge_command("pybpfprof", names, labels, os.path.basename(self.path), self.format,
                             "tasks.json" if tasks is not None else None)

    def _keep(self, parts, labels, tasks):
        d = self.path + ".parts"
        os.makedirs(d, exist_ok=True)
        for i, data in enumerate(parts):
            write_atomically(os.path.join(d, "part-%d.%s" % (i + 1, RAW_EXTENSION)), data)
        if tasks is not None:
            write_atomically(os.path.join(d, "tasks.json"), tasks)
        cmd = " ".join(shlex.quote(a) for a in self._keep_command(len(parts), labels, tasks))
        write_atomically(os.path.join(d, "MERGE.sh"), ("#!/bin/sh\n# run in this directory\n%s\n" % cmd).encode())
        return d

    def __repr__(self):
        return "<pybpfprof.dask.DaskProfile %r (%s): %s>" % (self.path, self.format, ", ".join(self.parts) or "running")


def _describe(e):
    if isinstance(e, _Timeout):
        return "no answer within the time limit (%s)" % e
    return "%s: %s" % (type(e).__name__, e)


def profile(client, path, scheduler=True, workers=True, rate=99, format=None, timeout=120.0, socket_path=None,
            backend="auto", merge_on="auto", tasks=True, max_duration=None, mode="cpu", min_block=None):
    """Profiles a Dask cluster for the duration of a ``with`` block into one file.

    ``client``: a ``distributed.Client``. ``path``: the merged file, in the format of its
    extension (``.html``: the report with task lanes; any of pybpfprof's formats) or
    ``format``. ``scheduler``: profile the scheduler's process. ``workers``: True (every
    worker of the cluster at the start), False, or a list of worker addresses. ``rate``:
    samples per second per CPU. ``timeout``: seconds each call to a Dask process may take.
    ``socket_path``/``backend``: as ``pybpfprof.Session``, in every process. ``merge_on``:
    "auto" (the client's machine if it has the pybpfprof binary, else the scheduler's),
    "client" or "scheduler". ``tasks``: collect the task stream into the report.
    ``max_duration``: stop sampling after this many seconds even if the block goes on.
    ``mode``/``min_block``: as ``pybpfprof.profile`` ("cpu", "wall" or "gil"; docs/modes.md),
    in every process: "wall" shows where the scheduler's event loop and idle workers wait.

    Returns a DaskProfile; the file is written when the block ends, also when it raised."""
    return DaskProfile(client, path, scheduler=scheduler, workers=workers, rate=rate, format=format,
                       timeout=timeout, socket_path=socket_path, backend=backend, merge_on=merge_on, tasks=tasks,
                       max_duration=max_duration, mode=mode, min_block=min_block)


class _SchedulerProfile(object):
    def __init__(self, path, client, rate, format, timeout, socket_path, backend, ignored, mode="cpu",
                 min_block=None):
        self.path = os.path.abspath(os.fspath(path))
        self.client = client
        fmt = format or format_for_path(self.path) or "speedscope"
        if fmt not in format_names():
            raise ValueError("format %r is not an output format; choose one of %s" % (fmt, ", ".join(format_names())))
        self.format = fmt
        mode, min_us = _protocol.check_mode(mode, min_block)
        self.mode, self.min_block = mode, None if min_us is None else min_us / 1e6
        self.options = {"rate": rate, "format": fmt, "socket_path": socket_path, "backend": backend,
                        "children": False, "mode": self.mode, "min_block": self.min_block}
        self.timeout = timeout
        self.token = None
        self.result = None
        for k in ignored:
            warnings.warn("pybpfprof.dask.profile_scheduler: py-spy's option %r has no pybpfprof equivalent; ignored"
                          % k, ProfilingWarning, stacklevel=3)

    def __enter__(self):
        if self.client is None:
            from distributed import get_client
            self.client = get_client()
        self.token = "pbp-%s" % uuid.uuid4().hex
        ok, value = _calls({"start": lambda: self.client.run_on_scheduler(_start_async, self.token, self.options)},
                           self.timeout)["start"]
        if not ok:
            raise ProfilingError("pybpfprof.dask: could not start profiling the scheduler: %s" % _describe(value),
                                 "start_failed")
        for w in value.get("warnings", []):
            warnings.warn("pybpfprof.dask: scheduler: " + w, ProfilingWarning, stacklevel=2)
        return self

    def __exit__(self, exc_type, exc, tb):
        ok, value = _calls({"stop": lambda: self.client.run_on_scheduler(_stop_async, self.token)},
                           self.timeout)["stop"]
        if not ok:
            msg = "pybpfprof.dask: the scheduler's profile is lost: %s" % _describe(value)
            if exc_type is None:
                raise ProfilingError(msg, "stop_failed")
            warnings.warn(msg, ProfilingWarning, stacklevel=2)
            return False
        for w in value.get("warnings", []):
            warnings.warn("pybpfprof.dask: scheduler: " + w, ProfilingWarning, stacklevel=2)
        self.result = value
        write_atomically(self.path, value["data"])
        return False


def profile_scheduler(output="profile.json", client=None, rate=99, format=None, timeout=120.0, socket_path=None,
                      backend="auto", mode=None, min_block=None, **pyspy_options):
    """The drop-in for distributed-pyspy's ``pyspy_on_scheduler(output, client=None,
    **kwargs)``: profiles the scheduler's process for the duration of a ``with`` block and
    writes ``output`` on the client — speedscope JSON by default, like py-spy's
    ``profile.json``; another format from the extension or ``format``. ``client`` defaults to
    ``distributed.get_client()``. ``mode``/``min_block``: as ``pybpfprof.profile`` (default
    "cpu"). py-spy's ``idle=True`` is mode "wall" and ``gil=True`` mode "gil" (both: "gil",
    as ``pybpfprof-py-spy --idle --gil``); its other options (``native``, ``nonblocking``,
    ...) have no meaning here and are ignored with a warning; ``rate`` is samples per second,
    as py-spy's."""
    idle, gil = bool(pyspy_options.pop("idle", False)), bool(pyspy_options.pop("gil", False))
    pyspy_mode = "gil" if gil else "wall" if idle else None
    if mode is not None and pyspy_mode is not None and str(mode).lower() != pyspy_mode:
        raise ValueError("mode=%r and py-spy's %s=True ask for different modes; give only mode=" % (
            mode, "gil" if gil else "idle"))
    return _SchedulerProfile(output, client, rate, format, timeout, socket_path, backend, sorted(pyspy_options),
                             mode=mode or pyspy_mode or "cpu", min_block=min_block)
