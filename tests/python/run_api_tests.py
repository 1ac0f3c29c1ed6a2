#!/usr/bin/python3
"""Runs tests/python/test_api.py with one interpreter against a real agent (ctest: Python.Api.*).

    run_api_tests.py --bin BUILD/pybpfprof --source SRC --python /usr/bin/python3
    run_api_tests.py --bin BUILD/pybpfprof --source SRC --python pyenv:3.9

As root: creates the test users (tests/tools/agent-test-users), starts `pybpfprof agent`
on a socket in a temporary directory, runs test_api.py as the unprivileged user
pbp-test-a with PYBPFPROF_AGENT_SOCKET naming it (PBP_TEST_MODE=agent), stops the agent,
then runs test_api.py as root with no agent (PBP_TEST_MODE=root). The package is imported
from the source tree (PYTHONPATH=SRC/python).

pyenv:X.Y is the newest /root/.pyenv/versions/X.Y.*. /root is not searchable by other
users, so for the unprivileged run an interpreter under /root is used through a tree of
hard links to it in the temporary directory (its libpython through LD_LIBRARY_PATH).

--test NAME runs another file of tests/python the same way (test_dask.py: ctest
Python.Dask.*), --modes agent (or root) only that run, and --only CLASS,... only those test
classes (PBP_TEST_ONLY; test_dask.py reads it).

Exits 0 when both runs pass, 77 (ctest's skip) when not root or the interpreter is
missing, except under CI=true, where that fails (1).
"""

import argparse
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

USER = "pbp-test-a"
CI = os.environ.get("CI", "").lower() == "true"


def skip(why):
    if CI:
        print("run_api_tests: %s; CI=true: failing instead of skipping" % why, file=sys.stderr)
        sys.exit(1)
    print("run_api_tests: skipped: %s" % why, file=sys.stderr)
    sys.exit(77)


def resolve_python(spec):
    if spec.startswith("pyenv:"):
        version = spec[len("pyenv:"):]
        found = sorted(glob.glob("/root/.pyenv/versions/%s.*/bin/python%s" % (version, version)),
                       key=lambda p: [int(x) if x.isdigit() else 0 for x in p.split("/")[4].split(".")])
        if not found:
            skip("pyenv %s is not installed (/root/.pyenv/versions/%s.*; tools/provision-pythons)" % (version, version))
        return found[-1]
    if not os.access(spec, os.X_OK):
        skip("%s is not an executable interpreter" % spec)
    return spec


def user_interpreter(python, tmp):
    """(interpreter path, extra env) that the test user can run."""
    real = os.path.realpath(python)
    if not real.startswith("/root/"):
        return python, {}
    # /root/.pyenv/versions/3.9.18/bin/python3.9 -> a hard-link tree of versions/3.9.18.
    parts = real.split("/")
    if len(parts) < 7 or parts[2] != ".pyenv" or parts[3] != "versions":
        skip("%s is under /root, which %s cannot reach, and is not a pyenv interpreter" % (real, USER))
    home = "/".join(parts[:5])
    copy = os.path.join(tmp, "python", parts[4])
    os.makedirs(os.path.dirname(copy), exist_ok=True)
    subprocess.run(["cp", "-al", home, copy], check=True)
    return os.path.join(copy, os.path.relpath(real, home)), {"LD_LIBRARY_PATH": os.path.join(copy, "lib")}


def connectable(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def run(cmd, env, label):
    print("run_api_tests: %s: %s" % (label, " ".join(cmd)), flush=True)
    r = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, timeout=900)
    print("run_api_tests: %s: exit %d" % (label, r.returncode), flush=True)
    return r.returncode


def run_root(python, base, tmp, root_out, test):
    env = dict(base, PBP_TEST_MODE="root", PBP_TEST_OUT=root_out, TMPDIR=root_out,
               PYBPFPROF_AGENT_SOCKET=os.path.join(tmp, "no-agent.sock"))
    return run([python, "-u", test], env, "%s as root without an agent" % python)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--test", default="test_api.py", help="the file of tests/python to run")
    ap.add_argument("--modes", default="agent,root", help="agent, root, or agent,root")
    ap.add_argument("--only", default="", help="the test classes to run (PBP_TEST_ONLY), comma-separated")
    a = ap.parse_args()
    modes = set(a.modes.split(","))
    if not modes or not modes <= {"agent", "root"}:
        sys.exit("run_api_tests: --modes takes agent, root or agent,root")
    if os.geteuid() != 0:
        skip("needs root (it starts the agent and runs clients as %s)" % USER)
    python = resolve_python(a.python)
    source = os.path.abspath(a.source)
    binary = os.path.abspath(a.bin)
    test = os.path.join(source, "tests", "python", a.test)
    r = subprocess.run([os.path.join(source, "tests", "tools", "agent-test-users")])
    if r.returncode != 0:
        sys.exit("run_api_tests: tests/tools/agent-test-users failed")

    tmp = tempfile.mkdtemp(prefix="pbp-pyapi-")
    agent = None
    try:
        os.chmod(tmp, 0o755)
        user_out = os.path.join(tmp, USER)
        root_out = os.path.join(tmp, "root")
        os.mkdir(user_out)
        os.mkdir(root_out)
        shutil.chown(user_out, USER, USER)
        sock = os.path.join(tmp, "agent.sock")
        base = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": "/tmp",
            "LANG": "C.UTF-8",
            "PYTHONPATH": os.path.join(source, "python"),
            "PYTHONDONTWRITEBYTECODE": "1",  # nothing written into the source tree
            "PYBPFPROF_BIN": binary,
            "PBP_SOURCE_DIR": source,
            "CI": os.environ.get("CI", ""),
        }
        if a.only:
            base["PBP_TEST_ONLY"] = a.only
        if os.environ.get("PBP_TEST_KEEP"):  # a directory the tests copy their outputs to
            base["PBP_TEST_KEEP"] = os.environ["PBP_TEST_KEEP"]

        agent_rc = stopped = root_rc = 0
        # 1. Through the agent, as an unprivileged user.
        if "agent" not in modes:
            return run_root(python, base, tmp, root_out, test)
        agent_log = open(os.path.join(tmp, "agent.log"), "w+")
        agent = subprocess.Popen([binary, "agent", "--socket", sock, "--admin-group", "pbp-test-admins"],
                                 stdin=subprocess.DEVNULL, stdout=agent_log, stderr=subprocess.STDOUT)
        for _ in range(200):
            if connectable(sock) or agent.poll() is not None:
                break
            time.sleep(0.05)
        if not connectable(sock):
            agent_log.seek(0)
            sys.exit("run_api_tests: the agent did not listen on %s:\n%s" % (sock, agent_log.read()))
        upython, uenv = user_interpreter(python, tmp)
        env = dict(base, PBP_TEST_MODE="agent", PBP_TEST_OUT=user_out, TMPDIR=user_out,
                   PYBPFPROF_AGENT_SOCKET=sock, **uenv)
        cmd = ["setpriv", "--reuid=" + USER, "--regid=" + USER, "--init-groups", "env", "-i"]
        cmd += ["%s=%s" % kv for kv in sorted(env.items())]
        cmd += [upython, "-u", test]
        agent_rc = run(cmd, None, "%s as %s through the agent" % (python, USER))
        agent.send_signal(signal.SIGTERM)
        try:
            stopped = agent.wait(30)
        except subprocess.TimeoutExpired:
            agent.kill()
            stopped = agent.wait()
        agent = None
        agent_log.seek(0)
        log = agent_log.read()
        if agent_rc != 0 or stopped != 0:
            print("run_api_tests: the agent's log (it exited %d):\n%s" % (stopped, log))

        # 2. As root, with no agent: the binary directly.
        if "root" in modes:
            root_rc = run_root(python, base, tmp, root_out, test)
        ok = agent_rc == 0 and stopped == 0 and root_rc == 0
        print("run_api_tests: %s: %s" % (python, "passed" if ok else "FAILED"))
        return 0 if ok else 1
    finally:
        if agent is not None:
            agent.kill()
            agent.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
