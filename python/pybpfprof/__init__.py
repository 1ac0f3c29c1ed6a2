"""pybpfprof: profile CPython processes with the pybpfprof eBPF profiler, from Python.

    import pybpfprof

    with pybpfprof.profile("out.html") as p:      # this process and its children
        work()
    print(p.samples, p.top[0])

    s = pybpfprof.Session(pids=[pid]).start()     # start in one call...
    result = s.stop()                             # ...stop in another: result.data (bytes)

    doc = pybpfprof.dump(pid=pid)                 # every thread's stack now (docs/dump.md's JSON)

It goes through the local pybpfprof agent (docs/agent.md), or, with no agent, runs the
pybpfprof binary when this process is root. See docs/python.md.
"""
# This file is read by every Python that imports the package: it must stay valid Python 2.7
# and 3.x syntax, so that an old interpreter gets the message below and not a SyntaxError.
import sys as _sys

__version__ = "0.1.0"

MIN_PYTHON = (3, 9)

if _sys.version_info < MIN_PYTHON:
    raise ImportError(
        "pybpfprof needs Python %d.%d or newer; this is Python %d.%d (%s). Profile this program from outside "
        "instead, with the command: pybpfprof --pid PID (or: pybpfprof -- python ARGS)"
        % (MIN_PYTHON[0], MIN_PYTHON[1], _sys.version_info[0], _sys.version_info[1], _sys.executable))

from ._errors import (AgentProtocolError, AgentUnavailableError, ProfilingError,  # noqa: E402
                      ProfilingWarning, PybpfprofError)
from .api import Profile, profile, write_atomically  # noqa: E402
from .formats import format_for_path, format_names, known_extensions_text  # noqa: E402
from .session import (ProfileResult, Session, TopFunction, find_binary, parse_mode_lines,  # noqa: E402
                      parse_top)
from ._protocol import DEFAULT_SOCKET, socket_path  # noqa: E402
from .merge import merge  # noqa: E402
from .dump import dump  # noqa: E402

__all__ = [
    "profile", "Profile", "Session", "ProfileResult", "TopFunction",
    "PybpfprofError", "AgentUnavailableError", "ProfilingError", "AgentProtocolError", "ProfilingWarning",
    "format_for_path", "format_names", "known_extensions_text", "parse_top", "parse_mode_lines", "find_binary", "socket_path",
    "write_atomically", "DEFAULT_SOCKET", "merge", "dump",
]
