"""``pybpfprof.profile``: profile a block of code into a file.

    with pybpfprof.profile("out.html", rate=99) as p:
        work()
    print(p.samples, p.processes, p.top[:3])
"""

import datetime
import fcntl
import html
import os
import stat
import tempfile
import warnings

from ._errors import ProfilingError, ProfilingWarning
from .formats import default_extension, format_for_path, format_names, known_extensions_text
from .session import Session

__all__ = ["profile", "Profile", "write_atomically"]


def _umask():
    # /proc/self/status has it (Linux 4.7+) without changing it, which os.umask() would
    # do for every thread for a moment.
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def write_atomically(path, data):
    """Writes data to path as the CLI does (write_file_atomically in output_file.cpp): into
    a new file next to it, flushed to disk, then renamed over it, so that a full disk or a
    kill leaves an existing file as it was. A new file has the caller's owner and the
    permissions of an ordinary new file (0666 less the umask); a file replaced keeps its
    permissions, and its owner and group where the caller may give them. A symbolic link is followed
    (its target is replaced); a path that exists and is no regular file (/dev/null, a FIFO)
    is written in place. The new file is flock'ed until it is renamed, as the CLI's is: the
    CLI removes a file of that name only when its lock is free (a writer killed before its
    rename). Raises OSError."""
    path = os.fspath(path)
    if os.path.islink(path):
        path = os.path.realpath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "Is a directory", path)
        if not stat.S_ISREG(st.st_mode):
            with open(path, "wb") as f:
                f.write(data)
            return
    directory, name = os.path.split(path)
    directory = directory or "."
    fd, tmp = tempfile.mkstemp(prefix="." + name + ".tmp-", dir=directory)
    try:
        if st is None:
            os.fchmod(fd, 0o666 & ~_umask())
        else:
            try:
                os.fchown(fd, st.st_uid, st.st_gid)
            except OSError:
                pass  # another's file, which the directory let this user replace: now theirs
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & 0o777)
        with os.fdopen(fd, "wb") as f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            except OSError:
                pass  # a file system without locks: the CLI's cleanup then never takes it
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            os.replace(tmp, path)  # while locked
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def _same_file(a, b):
    """a and b name one file: the same path once resolved (it need not exist yet), or, for files
    that exist, the same inode. As the CLI's same_path (userspace/cli/options.cpp)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _check_writable_dir(path, what):
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(2, "cannot write the %s %s: its directory %s does not exist" % (what, path, directory),
                                path)
    if os.path.isdir(path):
        raise IsADirectoryError(21, "cannot write the %s %s: it is a directory" % (what, path), path)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PermissionError(13, "cannot write the %s %s: the directory %s is not writable by you"
                              % (what, path, directory), path)


class Profile(object):
    """What ``profile()`` returns: a context manager that profiles its block, then holds
    the result.

    After the block: ``path`` (the file written, made absolute when the block began), ``format``, ``samples``, ``processes``,
    ``threads``, ``lost``, ``duration`` (seconds), ``on_cpu`` and ``off_cpu`` (seconds seen
    on and off CPU; off CPU is sampled in mode "wall" only), ``gil`` (seconds by GIL
    state), ``top`` (a list of TopFunction:
    (self %, total %, function, "file:line")), ``top_text`` (the same as text),
    ``summary`` (the agent's summary dict), ``result`` (the ProfileResult: the bytes),
    ``report_path``, ``warnings``. Before the end of the block they are None (or empty).
    ``mode`` and ``min_block`` are what was asked (see profile())."""

    def __init__(self, path, rate=99, pids=None, children=True, duration=None, report=None, format=None,
                 socket_path=None, backend="auto", mode="cpu", min_block=None, native=False):
        self.path = os.fspath(path)
        fmt = format.lower() if isinstance(format, str) else format
        if fmt is None:
            fmt = format_for_path(self.path)
            if fmt is None:
                raise ValueError("cannot tell the output format from the name %s; give format= one of %s, or end "
                                 "the name in %s" % (self.path, ", ".join(format_names()), known_extensions_text()))
        elif fmt not in format_names():
            raise ValueError("format %r is not an output format; choose one of %s"
                             % (format, ", ".join(format_names())))
        self.format = fmt
        self.report_path = os.fspath(report) if report is not None else None
        if self.report_path is not None and _same_file(self.path, self.report_path):
            raise ValueError("report=%s is the profile's path too, and the report would replace the profile; "
                             "give the report a name of its own" % self.report_path)
        # Checked now, before anything starts (a session refused later would lose nothing,
        # but a typo in a path is better said at once).
        self._session = Session(pids=pids, children=children, rate=rate, duration=duration, format=fmt,
                                report=self.report_path is not None, socket_path=socket_path, backend=backend,
                                mode=mode, min_block=min_block, native=native)
        self.rate = rate
        self.native = native
        self.mode = self._session.mode
        self.min_block = self._session.min_block
        self.pids = self._session.pids
        self.children = self._session.children
        self.result = None
        self.summary = None
        self.samples = self.processes = self.threads = self.lost = self.duration = None
        self.on_cpu = self.off_cpu = None
        self.gil = {}
        self.top = []
        self.top_text = ""
        self.warnings = []
        self.backend = None
        self.started_at = None

    # ---- context manager ----------------------------------------------------------------
    def __enter__(self):
        # Absolute now: the block may change the working directory.
        self.path = os.path.abspath(self.path)
        _check_writable_dir(self.path, "profile")
        if self.report_path is not None:
            self.report_path = os.path.abspath(self.report_path)
            _check_writable_dir(self.report_path, "report")
        self.started_at = datetime.datetime.now()
        self._session.start()
        self.backend = self._session.backend
        return self

    def __exit__(self, exc_type, exc, tb):
        # The block's own exception always propagates unchanged; the profile is still
        # written. A failure of ours then becomes a warning rather than hiding it.
        if not self._session.in_owner:
            return False  # a forked child leaving the block: the session is its parent's
        if exc_type is None:
            self._finish()
            return False
        try:
            self._finish()
        except Exception as e:
            warnings.warn("pybpfprof: the profile of the failed block was not written: %s" % (e,),
                          ProfilingWarning, stacklevel=2)
        return False

    def _finish(self):
        result = self._session.stop(output_name=self.path)
        self._take(result)
        self.path = self._write(self.path, result.data, "profile", default_extension(self.format))
        if self.report_path is not None and result.report is not None:
            self.report_path = self._write(self.report_path, result.report, "report", "html")

    def _write(self, path, data, what, ext):
        try:
            write_atomically(path, data)
            return path
        except OSError as e:
            # Never lose the samples: they go to a file in the temporary directory.
            fd, fallback = tempfile.mkstemp(prefix="pybpfprof-fallback-", suffix="." + ext)
            os.close(fd)
            write_atomically(fallback, data)
            raise ProfilingError("cannot write the %s %s (%s); the samples were saved to %s instead"
                                 % (what, path, e.strerror or e, fallback), "write") from e

    def _take(self, result):
        self.result = result
        self.summary = result.summary
        self.samples = result.samples
        self.processes = result.processes
        self.threads = result.threads
        self.lost = result.lost
        self.duration = result.duration
        self.on_cpu = result.on_cpu
        self.off_cpu = result.off_cpu
        self.gil = result.gil
        self.top = result.top
        self.top_text = result.top_text
        self.warnings = result.warnings

    # ---- display --------------------------------------------------------------------------
    def __repr__(self):
        if self.result is None:
            state = "running" if self.started_at else "not started"
            return "<pybpfprof.Profile %r (%s): %s>" % (self.path, self.format, state)
        dur = "%.1f s" % self.duration if isinstance(self.duration, (int, float)) else "?"
        text = "<pybpfprof.Profile %r (%s): %s samples, %s %s, %s" % (
            self.path, self.format, self.samples, self.processes, "process" if self.processes == 1 else "processes",
            dur)
        if self.top:
            t = self.top[0]
            text += "; top: %s %.1f%%" % (t.function, t.self_percent)
        return text + ">"

    def _repr_html_(self):
        e = html.escape
        if self.result is None:
            return "<div><b>pybpfprof</b>: %s, %s</div>" % (
                e(self.path), "running" if self.started_at else "not started")
        dur = "%.1f s" % self.duration if isinstance(self.duration, (int, float)) else ""
        rows = [("file", "<code>%s</code>" % e(self.path)), ("format", e(self.format)),
                ("samples", e(str(self.samples))), ("processes", e(str(self.processes))), ("duration", e(dur))]
        if self.report_path:
            rows.insert(1, ("report", "<code>%s</code>" % e(self.report_path)))
        if self.lost:
            rows.append(("lost", e(str(self.lost))))
        out = ['<div class="pybpfprof-profile">', '<table>']
        out += ['<tr><th style="text-align:left">%s</th><td style="text-align:left">%s</td></tr>' % (k, v)
                for k, v in rows]
        out.append("</table>")
        if self.top:
            out.append('<table><thead><tr><th>self</th><th>total</th><th style="text-align:left">function</th>'
                       '<th style="text-align:left">file:line</th></tr></thead><tbody>')
            for t in self.top[:5]:
                out.append('<tr><td>%.1f%%</td><td>%.1f%%</td><td style="text-align:left"><code>%s</code></td>'
                           '<td style="text-align:left"><code>%s</code></td></tr>'
                           % (t.self_percent, t.total_percent, e(t.function), e(t.location)))
            out.append("</tbody></table>")
        if self.warnings:
            out.append("<div>warnings: %s</div>" % "; ".join(e(w) for w in self.warnings))
        out.append("</div>")
        return "\n".join(out)


def profile(path, rate=99, pids=None, children=True, duration=None, report=None, format=None, mode="cpu",
            min_block=None, native=False, **kwargs):
    """Profiles the block into ``path``::

        with pybpfprof.profile("out.html") as p:
            work()

    ``pids``: the processes (default: this one); ``children``: their descendants too,
    those running now and those started in the block. ``rate``: samples per second per
    CPU. ``duration``: stop sampling after this many seconds (default: at the end of the
    block). ``report``: also write the HTML report to this path. ``format``: the output
    format (default: from the path's extension, as ``pybpfprof -o``: .html/.htm,
    .speedscope.json/.json, .folded/.collapsed, .pb.gz/.pprof). ``mode``: "cpu" (on-CPU
    time, the default), "wall" (on- and off-CPU time: where threads wait too) or "gil" (only
    the samples that hold the GIL), as ``pybpfprof --mode``; ``min_block``: with "wall", the
    off-CPU interval in seconds under which intervals are summed rather than kept one by one
    (10e-6 to 1, default 0.001), as ``--min-block`` (docs/modes.md). ``native``: native (C,
    C++) and kernel frames with the Python ones, as ``--native`` (docs/native.md). Also ``socket_path`` (the
    agent's socket) and ``backend`` ("auto", "agent", "direct"), as for Session.

    Goes through the local pybpfprof agent, or runs the pybpfprof binary when there is
    none and this process may load BPF (root). Raises AgentUnavailableError when neither
    is possible, ProfilingError when the agent refuses. The file is written atomically
    at the end of the block, also when the block raises (its exception propagates)."""
    return Profile(path, rate=rate, pids=pids, children=children, duration=duration, report=report, format=format,
                   mode=mode, min_block=min_block, native=native, **kwargs)
