#!/usr/bin/python3
"""Validates deploy/pybpfprof-agent.yaml.

1. Schema: every object is checked against the Kubernetes API schema as compiled into the
   official Python client's models (Debian's python3-kubernetes): unknown fields, wrong
   types and missing required fields are errors.
2. What the agent needs: hostPID, the capabilities measured by the integration tests
   (BPF, PERFMON, SYS_PTRACE, SYS_ADMIN), seccomp unconfined, the host cgroup2 hierarchy,
   kubelet's directories (under --node-root, if the agent is given one), a namespace
   labelled privileged.
3. The container runs `pybpfprof agent`, its socket is the one node users' clients reach
   by default (the agent's kDefaultSocket) on a writable hostPath of that directory, and
   its liveness (and startup, if any) probe runs `pybpfprof agent status` on that socket.
4. The guides (docs/profile-a-pod.md, docs/agent.md) use the manifest's namespace, labels,
   file name and socket.

Usage: check_manifests.py REPO_DIR [--self-test]
--self-test also checks that broken manifests are rejected (so the check can fail).
"""
import copy
import glob
import os
import re
import sys

import yaml
from kubernetes import client

KINDS = {
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("apps/v1", "DaemonSet"): "V1DaemonSet",
}
NEEDED_CAPS = {"BPF", "PERFMON", "SYS_PTRACE", "SYS_ADMIN"}
NEEDED_HOST_PATHS = {"/sys/fs/cgroup", "/var/log/pods", "/var/log/containers", "/var/lib/kubelet/pods"}
# kubelet's directories: read under the agent's --node-root (default /).
KUBELET_PATHS = {"/var/log/pods", "/var/log/containers", "/var/lib/kubelet/pods"}
# The socket a client uses when $PYBPFPROF_AGENT_SOCKET is unset: the agent's kDefaultSocket
# (read from userspace/agent/ when it is there), else the documented default.
DOCUMENTED_SOCKET = "/run/pybpfprof/agent.sock"


def default_socket(repo):
    pattern = re.compile(r'kDefaultSocket(?:\[\])?\s*(?:=|\{)\s*"([^"]+)"')
    for path in sorted(glob.glob(f"{repo}/userspace/agent/*.h") + glob.glob(f"{repo}/userspace/agent/*.cpp")):
        with open(path) as f:
            m = pattern.search(f.read())
        if m:
            return m.group(1)
    return DOCUMENTED_SOCKET


def option(argv, name, default):
    """The value of --name V or --name=V in argv (the last one wins), else default."""
    value = default
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            value = argv[i + 1]
        elif a.startswith(name + "="):
            value = a[len(name) + 1:]
    return value


def is_pybpfprof(arg):
    return isinstance(arg, str) and os.path.basename(arg) == "pybpfprof"


def model(name):
    return getattr(client.models, name)


def check_value(val, typ, path, errors):
    if val is None:
        return
    if typ.startswith("list["):
        if not isinstance(val, list):
            errors.append(f"{path}: want a list, got {type(val).__name__}")
            return
        for i, v in enumerate(val):
            check_value(v, typ[5:-1], f"{path}[{i}]", errors)
    elif typ.startswith("dict("):
        if not isinstance(val, dict):
            errors.append(f"{path}: want a map, got {type(val).__name__}")
            return
        inner = typ[typ.index(",") + 1:-1].strip()
        for k, v in val.items():
            check_value(v, inner, f"{path}.{k}", errors)
    elif typ == "str" or typ == "datetime":
        if not isinstance(val, str):
            errors.append(f"{path}: want a string, got {val!r}")
    elif typ == "int":
        if not isinstance(val, int) or isinstance(val, bool):
            errors.append(f"{path}: want an integer, got {val!r}")
    elif typ == "bool":
        if not isinstance(val, bool):
            errors.append(f"{path}: want true/false, got {val!r}")
    elif typ == "object":
        pass  # IntOrString, Quantity, RawExtension
    else:
        check_model(val, typ, path, errors)


def check_model(obj, name, path, errors):
    if not isinstance(obj, dict):
        errors.append(f"{path}: want an object ({name}), got {obj!r}")
        return
    cls = model(name)
    by_json = {v: k for k, v in cls.attribute_map.items()}
    for key, val in obj.items():
        if key not in by_json:
            errors.append(f"{path}.{key}: unknown field of {name}")
            continue
        check_value(val, cls.openapi_types[by_json[key]], f"{path}.{key}", errors)


def schema_errors(docs):
    errors = []
    api = client.ApiClient()
    for i, d in enumerate(docs):
        key = (d.get("apiVersion"), d.get("kind"))
        if key not in KINDS:
            errors.append(f"document {i}: unexpected {key}")
            continue
        where = f"{d['kind']}/{d.get('metadata', {}).get('name', '?')}"
        check_model(d, KINDS[key], where, errors)
        try:  # required fields: the models refuse None for them
            api._ApiClient__deserialize(d, KINDS[key])
        except (ValueError, TypeError) as e:
            errors.append(f"{where}: {e}")
    return errors


def agent_errors(docs, guide, agent_guide="", socket=DOCUMENTED_SOCKET):
    errors = []
    by_kind = {d["kind"]: d for d in docs}
    ns = by_kind.get("Namespace")
    ds = by_kind.get("DaemonSet")
    if not ns or not ds:
        return ["the manifest must hold a Namespace and a DaemonSet"]
    nsname = ns["metadata"]["name"]
    if ns["metadata"].get("labels", {}).get("pod-security.kubernetes.io/enforce") != "privileged":
        errors.append("the agent's namespace must be labelled pod-security.kubernetes.io/enforce: privileged")
    if ds["metadata"].get("namespace") != nsname:
        errors.append(f"the DaemonSet must be in namespace {nsname}")
    spec = ds["spec"]["template"]["spec"]
    if spec.get("hostPID") is not True:
        errors.append("the DaemonSet needs hostPID: true")
    labels = ds["spec"]["template"]["metadata"]["labels"]
    if ds["spec"]["selector"].get("matchLabels") != labels:
        errors.append("selector.matchLabels must equal the pod template's labels")
    c = spec["containers"][0]
    sc = c.get("securityContext", {})
    caps = set(sc.get("capabilities", {}).get("add", []))
    if not sc.get("privileged") and not NEEDED_CAPS <= caps:
        errors.append(f"capabilities.add lacks {sorted(NEEDED_CAPS - caps)} (or use privileged: true)")
    if sc.get("seccompProfile", {}).get("type") != "Unconfined" and not sc.get("privileged"):
        errors.append("the default seccomp profile blocks bpf(): seccompProfile.type must be Unconfined")
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    host_paths = set()
    mounted_at = {}  # host path -> (mountPath, readOnly)
    for m in c.get("volumeMounts", []):
        v = volumes.get(m["name"])
        if v is None:
            errors.append(f"volumeMount {m['name']} has no volume")
        elif "hostPath" in v:
            host_paths.add(v["hostPath"]["path"])
            mounted_at[v["hostPath"]["path"]] = (m["mountPath"].rstrip("/") or "/", m.get("readOnly", False), v)
    for p in sorted(NEEDED_HOST_PATHS - host_paths):
        errors.append(f"host path {p} is not mounted into the agent")

    # The container runs the agent.
    argv = list(c.get("command") or []) + list(c.get("args") or [])
    if len(argv) < 2 or not is_pybpfprof(argv[0]) or argv[1] != "agent":
        errors.append(f"the container must run `pybpfprof agent` (command + args are {argv})")
        argv = []
    # kubelet's directories where the agent reads them: under its --node-root.
    node_root = option(argv, "--node-root", "/").rstrip("/")
    for p in sorted(KUBELET_PATHS & mounted_at.keys()):
        if mounted_at[p][0] != node_root + p:
            errors.append(f"host path {p} is mounted at {mounted_at[p][0]}, but the agent (--node-root "
                          f"{node_root or '/'}) reads it at {node_root + p}")
    # Its socket: where node users' clients look by default, on a writable hostPath.
    sock = option(argv, "--socket", socket) if argv else socket
    if argv and sock != socket:
        errors.append(f"the agent's --socket {sock} is not {socket}, where clients look by default")
    sock_dir = os.path.dirname(sock)
    shared = [p for p, (at, ro, v) in mounted_at.items() if at == sock_dir]
    if not shared:
        errors.append(f"the socket directory {sock_dir} is not a hostPath mount: node users cannot reach the agent")
    else:
        at, ro, v = mounted_at[shared[0]]
        if shared[0] != sock_dir:
            errors.append(f"the socket directory {sock_dir} is mounted from the host's {shared[0]}, not the same path")
        if ro:
            errors.append(f"the socket directory {sock_dir} is mounted read-only: the agent cannot create its socket")
        if v["hostPath"].get("type") not in ("Directory", "DirectoryOrCreate"):
            errors.append(f"the socket's hostPath {shared[0]} must have type Directory or DirectoryOrCreate")
    # Probes: `pybpfprof agent status` on that socket.
    if "livenessProbe" not in c:
        errors.append("the agent needs a livenessProbe (exec: pybpfprof agent status)")
    for probe in ("livenessProbe", "startupProbe", "readinessProbe"):
        if probe not in c:
            continue
        cmd = c[probe].get("exec", {}).get("command") or []
        if len(cmd) < 3 or not is_pybpfprof(cmd[0]) or cmd[1] != "agent" or cmd[-1] != "status":
            errors.append(f"{probe} must exec `pybpfprof agent [--socket PATH] status`, not {cmd}")
        elif option(cmd, "--socket", socket) != sock:
            errors.append(f"{probe} asks the socket {option(cmd, '--socket', socket)}, the agent listens on {sock}")
    # The guide's commands must match the manifest.
    for want, what in [
        ("kubectl apply -f deploy/pybpfprof-agent.yaml", "how to install the manifest"),
        (f"-n {nsname}", f"the agent namespace {nsname}"),
        (",".join(f"{k}={v}" for k, v in labels.items()), "the agent's pod label selector"),
        ("pybpfprof --cgroup", "the --cgroup command"),
        ("kubectl cp", "kubectl cp"),
        (c["image"].split("/")[-1], "the image tag"),
    ]:
        if want not in guide:
            errors.append(f"docs/profile-a-pod.md does not show {what} ({want!r})")
    for want, what in [
        ("kubectl apply -f deploy/pybpfprof-agent.yaml", "how to install the manifest"),
        (socket, "the agent's socket"),
        ("pybpfprof agent status", "pybpfprof agent status"),
    ]:
        if want not in agent_guide:
            errors.append(f"docs/agent.md does not show {what} ({want!r})")
    if socket not in guide:
        errors.append(f"docs/profile-a-pod.md does not show the agent's socket ({socket!r})")
    return errors


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    repo = sys.argv[1]
    path = f"{repo}/deploy/pybpfprof-agent.yaml"
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    with open(f"{repo}/docs/profile-a-pod.md") as f:
        guide = f.read()
    agent_guide = ""
    if os.path.exists(f"{repo}/docs/agent.md"):
        with open(f"{repo}/docs/agent.md") as f:
            agent_guide = f.read()
    socket = default_socket(repo)
    errors = schema_errors(docs) + agent_errors(docs, guide, agent_guide, socket)
    for e in errors:
        print(f"FAIL {path}: {e}")
    if "--self-test" in sys.argv:
        def broken(mutate):
            d = copy.deepcopy(docs)
            mutate({x["kind"]: x for x in d})
            return schema_errors(d) + agent_errors(d, guide, agent_guide, socket)

        def container(k):
            return k["DaemonSet"]["spec"]["template"]["spec"]["containers"][0]

        def volume(k, path):
            return next(v for v in k["DaemonSet"]["spec"]["template"]["spec"]["volumes"]
                        if v.get("hostPath", {}).get("path") == path)
        cases = {
            "unknown field": lambda k: k["DaemonSet"]["spec"]["template"]["spec"].update(hostPid=True),
            "wrong type": lambda k: k["DaemonSet"]["spec"]["template"]["spec"].update(hostPID="yes"),
            "missing required": lambda k: k["DaemonSet"]["spec"]["template"]["spec"]["containers"][0].pop("name"),
            "no SYS_PTRACE": lambda k: k["DaemonSet"]["spec"]["template"]["spec"]["containers"][0]["securityContext"]
            ["capabilities"]["add"].remove("SYS_PTRACE"),
            "no cgroup mount": lambda k: volume(k, "/sys/fs/cgroup")["hostPath"].update(path="/sys/fs/cgroupx"),
            "a sleeping container": lambda k: container(k).update(command=["/bin/sh", "-c", "sleep infinity"]),
            "no socket hostPath": lambda k: volume(k, os.path.dirname(socket))["hostPath"].update(path="/var/run/x"),
            "another --socket": lambda k: container(k).update(args=["--socket", "/tmp/agent.sock"]),
            "a read-only socket dir": lambda k: next(m for m in container(k)["volumeMounts"]
                                                     if m["mountPath"] == os.path.dirname(socket)).update(readOnly=True),
            "no liveness probe": lambda k: container(k).pop("livenessProbe"),
            "a probe that is not status": lambda k: container(k)["livenessProbe"]["exec"].update(
                command=["/usr/local/bin/pybpfprof", "--help"]),
            "kubelet dirs outside --node-root": lambda k: container(k).update(args=["--node-root", "/host"]),
        }
        for name, mutate in cases.items():
            if not broken(mutate):
                errors.append(f"self-test: a manifest with {name} was accepted")
                print(f"FAIL self-test: a manifest with {name} was accepted")
    if not errors:
        print(f"ok {path}: {len(docs)} objects valid against the Kubernetes {client.__name__} models, agent requirements met")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
