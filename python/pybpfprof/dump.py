"""pybpfprof.dump: every thread's current Python stack of running CPython processes, asleep or
not, as ``pybpfprof dump --json`` gives it (docs/dump.md), as Python objects::

    doc = pybpfprof.dump()                  # this process
    doc = pybpfprof.dump(pid=1234)          # another of yours
    for t in doc["processes"][0]["threads"]:
        print(t["tid"], t["name"], t["state"], [f["function"] for f in t["frames"]])

The targets are never stopped or signalled. It goes through the local pybpfprof agent, which
dumps the caller's own processes (the rule it profiles by, docs/agent.md), or, with no agent,
runs the pybpfprof binary when this process is root."""
import json
import os
import subprocess

from . import _protocol
from ._errors import AgentUnavailableError, ProfilingError
from .session import find_binary

__all__ = ["dump"]

MAX_DEPTH = 1024  # PBP_MAX_DEPTH: frames read per thread at most
_DUMP_DEPTH = 8   # the document's nesting (kMaxDumpDepth in agent/protocol.h)


def _targets(pid, pids, all_python):
    chosen = (pid is not None) + (pids is not None) + bool(all_python)
    if chosen > 1:
        raise ValueError("give one of pid, pids and all_python")
    if all_python:
        return None
    if pids is not None:
        return _protocol.check_pids(pids)
    return _protocol.check_pids(os.getpid() if pid is None else [pid] if _protocol._is_int(pid) else pid)


def _check_document(doc, source):
    if not isinstance(doc, dict) or not isinstance(doc.get("processes"), list) or \
            not isinstance(doc.get("warnings"), list):
        raise ProfilingError("%s is not a dump (no 'processes' and 'warnings' lists)" % source, "client_protocol")
    return doc


def _via_agent(sock, pids, max_depth, async_tasks, timeout):
    req = {"op": "dump"}
    if pids is None:
        req["all_python"] = True
    else:
        req["pids"] = pids
    if max_depth is not None:
        req["max_depth"] = max_depth
    if async_tasks:
        req["async"] = True
    try:
        _protocol.send_request(sock, req)
        header, attachments = _protocol.read_message(sock, timeout)
    finally:
        sock.close()
    kind = header.get("type")
    if kind == "error":
        message, code = str(header.get("message", "the agent refused the dump")), str(header.get("code", "")) or None
        if code == "protocol" and '(got "dump")' in message:  # an agent older than dumps
            raise ProfilingError("the agent is older than pybpfprof.dump (it answered: %s); restart it with this "
                                 "version of pybpfprof" % message, "unsupported")
        raise ProfilingError(message, code)
    if kind != "dump" or len(attachments) != 1:
        raise ProfilingError("the agent answered the dump with a %r message; is it older than this package?" % kind,
                             "client_protocol")
    try:
        doc = _protocol.parse_json_strict(attachments[0], _DUMP_DEPTH)
    except ValueError as e:
        raise ProfilingError("the agent's dump: %s" % e, "client_protocol") from None
    return _check_document(doc, "the agent's answer")


def _direct(pids, max_depth, async_tasks, timeout, binary):
    exe = binary or find_binary()
    if not exe:
        raise AgentUnavailableError("no pybpfprof agent answers, and the pybpfprof binary to dump directly was not "
                                    "found (not on PATH nor at /usr/local/bin/pybpfprof; set PYBPFPROF_BIN)")
    cmd = [exe, "dump", "--json"]
    if pids is None:
        cmd.append("--all-python")
    for p in pids or []:
        cmd += ["--pid", str(p)]
    if max_depth is not None:
        cmd += ["--max-depth", str(max_depth)]
    if async_tasks:
        cmd.append("--async")
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    if r.returncode != 0:
        lines = [l for l in r.stderr.decode("utf-8", "replace").splitlines() if l.strip()]
        message = lines[-1] if lines else "pybpfprof dump exited with status %d" % r.returncode
        if message.startswith("pybpfprof dump: "):
            message = message[len("pybpfprof dump: "):]
        raise ProfilingError(message, "exit_%d" % r.returncode)
    try:
        doc = json.loads(r.stdout.decode("utf-8"))
    except ValueError as e:
        raise ProfilingError("pybpfprof dump printed no JSON document: %s" % e, "client_protocol") from None
    return _check_document(doc, "pybpfprof dump's output")


def dump(pid=None, pids=None, all_python=False, max_depth=None, socket_path=None, backend="auto", timeout=120.0,
         binary=None, async_tasks=False):
    """Every thread's current stack of ``pid`` (default: this process), of ``pids`` (a list),
    or of every CPython process with ``all_python`` (through the agent: every one of yours).

    Returns the JSON document of docs/dump.md as Python objects: ``{"processes": [{"pid",
    "ns_pid", "command", "exe", "python_version", "python", "gil_unknown", "threads": [{"tid",
    "ns_tid", "name", "os_name", "state", "python", "gil", "waiting_for_gil",
    "stack_changed_while_read", "problem",
    "frames": [{"function", "file", "line"}, ...]}, ...]}, ...], "warnings": [...]}``; frames
    innermost first. ``max_depth``: frames read per thread at most (1 to 1024; default 1024).
    ``async_tasks``: also every asyncio task of each process (CPython 3.14+; docs/asyncio.md),
    as the process's "asyncio" object: ``{"note", "tasks": [{"id", "name", "state", "thread",
    "awaited_by", "coroutine_stack"}, ...]}``.
    ``backend``: "auto" (the agent at ``socket_path``, default $PYBPFPROF_AGENT_SOCKET or
    /run/pybpfprof/agent.sock; else the pybpfprof binary when this process is root), "agent"
    or "direct". ``timeout``: seconds to wait for the dump.

    Raises AgentUnavailableError (no agent, not root), ProfilingError with the one-line
    reason otherwise: ``code`` "forbidden" (not your process), "bad_input" (no such process,
    not CPython, none found) through the agent; "exit_N" from the binary."""
    targets = _targets(pid, pids, all_python)
    if max_depth is not None:
        if isinstance(max_depth, bool) or not isinstance(max_depth, int) or not 1 <= max_depth <= MAX_DEPTH:
            raise ValueError("max_depth must be a whole number of frames from 1 to %d (got %r)" % (MAX_DEPTH, max_depth))
    if not isinstance(async_tasks, bool):
        raise ValueError("async_tasks must be True or False (got %r)" % (async_tasks,))
    if backend not in ("auto", "agent", "direct"):
        raise ValueError("backend must be 'auto', 'agent' or 'direct' (got %r)" % (backend,))
    path = socket_path or _protocol.socket_path()
    reason = None
    if backend in ("auto", "agent"):
        try:
            sock = _protocol.connect(path)
        except OSError as e:
            reason = e.strerror or str(e)
            if backend == "agent":
                raise AgentUnavailableError("cannot reach the agent at %s (%s); start it with: sudo systemctl enable "
                                            "--now pybpfprof-agent" % (path, reason), path, reason) from None
        else:
            return _via_agent(sock, targets, max_depth, async_tasks, timeout)
    if backend == "auto" and os.geteuid() != 0:
        raise AgentUnavailableError(
            "no pybpfprof agent answers at %s (%s), and reading another process's stacks needs root. Start the "
            "agent once, as root: sudo systemctl enable --now pybpfprof-agent, or run this program as root. An "
            "agent on another socket: set %s." % (path, reason, _protocol.SOCKET_ENV), path, reason)
    return _direct(targets, max_depth, async_tasks, timeout, binary)
