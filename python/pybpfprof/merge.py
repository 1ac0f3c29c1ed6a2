"""pybpfprof.merge: several profiles in pybpfprof's own format (.pbp) made into one, as
`pybpfprof merge` does (each input placed by its wall-clock start; every process keeps its
real PID and gets a host label). Merging needs no privileges and no agent, only the
pybpfprof binary on this machine."""
import os
import subprocess
import tempfile

from ._errors import ProfilingError, PybpfprofError
from .formats import format_for_path, format_names
from .session import find_binary

__all__ = ["merge"]


def merge(inputs, output, labels=None, tasks=None, format=None, target=None, binary=None, timeout=600):
    """Merges ``inputs`` (paths of .pbp files, or their bytes) into ``output``.

    labels: one dict per input (``{"role": "scheduler"}``), or None; tasks: the path of a task
    file (``pybpfprof merge --tasks``); format: by default from the output's extension, as the
    CLI maps it; target: what the merged run is called. Returns the output's absolute path.
    Raises PybpfprofError without a binary (PYBPFPROF_BIN, PATH or /usr/local/bin), and
    ProfilingError with the command's one-line error when it fails."""
    inputs = list(inputs)
    if not inputs:
        raise ValueError("merge needs at least one input")
    if labels is not None and len(labels) != len(inputs):
        raise ValueError("labels has %d entries for %d inputs" % (len(labels), len(inputs)))
    output = os.path.abspath(output)
    fmt = format or format_for_path(output)
    if not fmt:
        raise ValueError("cannot tell the output format from the name %s; give format= one of %s"
                         % (output, ", ".join(format_names())))
    exe = binary or find_binary()
    if not exe:
        raise PybpfprofError("pybpfprof.merge needs the pybpfprof binary (not on PATH nor at "
                             "/usr/local/bin/pybpfprof; set PYBPFPROF_BIN)")
    tmp = None
    try:
        paths = []
        for i, x in enumerate(inputs):
            if isinstance(x, (bytes, bytearray, memoryview)):
                if tmp is None:
                    tmp = tempfile.mkdtemp(prefix="pybpfprof-merge-")
                p = os.path.join(tmp, "input-%d.pbp" % (i + 1))
                with open(p, "wb") as f:
                    f.write(x)
                paths.append(p)
            else:
                paths.append(os.fspath(x))
        cmd = [exe, "merge"] + paths + ["-o", output, "-f", fmt, "--no-summary"]
        for i, lab in enumerate(labels or []):
            for k, v in sorted((lab or {}).items()):
                cmd += ["--label", "%d:%s=%s" % (i + 1, k, v)]
        if tasks:
            cmd += ["--tasks", os.fspath(tasks)]
        if target:
            cmd += ["--target", target]
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout)
        if r.returncode != 0:
            lines = [l for l in r.stderr.decode("utf-8", "replace").splitlines() if l.strip()]
            raise ProfilingError(lines[-1] if lines else "pybpfprof merge failed (exit %d)" % r.returncode,
                                 "merge_failed")
        return output
    finally:
        if tmp is not None:
            for name in os.listdir(tmp):
                os.unlink(os.path.join(tmp, name))
            os.rmdir(tmp)
