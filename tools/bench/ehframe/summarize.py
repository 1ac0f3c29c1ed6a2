#!/usr/bin/env python3
# tools/bench/ehframe/run measure's log -> min / median of each figure (stdin or argv[1]).
import re
import statistics
import sys
from collections import defaultdict

text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
proto = defaultdict(lambda: defaultdict(list))  # (mode, depth) -> key -> values
pbp = defaultdict(list)  # (config, d) -> [run dicts]
loads = []
cur = None
for line in text.splitlines():
    m = re.match(r"--- prototype ([\w-]+) depth (\d+)", line)
    if m:
        cur = ("proto", m.group(1), int(m.group(2)))
        continue
    m = re.match(r"--- pybpfprof (\S+) -d (\d+)(?: depth (\d+))?", line)
    if m:
        cur = ("pbp", m.group(1), int(m.group(2)), int(m.group(3) or 20))
        pbp[cur[1:]].append({})
        continue
    if line.startswith("load:"):
        loads.append(float(line.split()[1]))
        continue
    if not cur:
        continue
    if cur[0] == "proto":
        for k, v in re.findall(r"(\w+)=([0-9.]+)\b", line):
            proto[cur[1:]][k].append(float(v))
    else:
        r = pbp[cur[1:]][-1]
        m = re.search(r"Wrote .*: (\d+) samples", line)
        if m:
            r["samples"] = int(m.group(1))
        m = re.search(r"BPF: (\d+) ns per profiled sample", line)
        if m:
            r["inprog"] = int(m.group(1))
        m = re.search(r"bpf_stats: (\d+) ns per perf event over all CPUs \((\d+) events\)", line)
        if m:
            r["stats_total"] = int(m.group(1)) * int(m.group(2))
        m = re.search(r"native_bytes=(\d+)", line)
        if m:
            r["native_bytes"] = int(m.group(1))
        m = re.search(r"(\d+) ms unwinding", line)
        if m:
            r["unwind_ms"] = int(m.group(1))
        m = re.search(r"(\d+) ns each in userspace", line)
        if m:
            r["unwind_wall_ns"] = int(m.group(1))
        m = re.search(r"time: ([0-9.]+) user ([0-9.]+) sys", line)
        if m:
            r["cpu"] = float(m.group(1)) + float(m.group(2))


def mm(v):
    v = [x for x in v if x is not None]
    if not v:
        return "-"
    return "%.0f / %.0f" % (min(v), statistics.median(v)) if max(v) >= 100 else "%.2f / %.2f" % (min(v), statistics.median(v))


print("load averages seen (1 min): %s" % " ".join("%.1f" % x for x in loads))
print("\nprototype (min / median over rounds)")
print("| mode | depth | frames/sample | in-program ns/sample | bpf_stats ns/sample | bytes/sample | complete |")
print("|---|---|---|---|---|---|---|")
for (mode, d), kv in sorted(proto.items(), key=lambda x: (x[0][1], x[0][0])):
    comp = "-"
    if kv.get("walks"):
        comp = "%d of %d" % (sum(kv["outermost"]), sum(kv["walks"]))
    print("| %s | %d | %s | %s | %s | %s | %s |" % (mode, d, mm(kv.get("frames_per_sample", [])),
          mm(kv["in_prog_ns_per_sample"]), mm(kv["ns_per_sample"]), mm(kv["bytes_per_sample"]), comp))

print("\npybpfprof (min / median over rounds)")
for depth in sorted({k[2] for k in pbp}):
    for cfg in ("python-only", "--native"):
        ds = [d for c, d, p in pbp if c == cfg and p == depth]
        if not ds:
            continue
        runs = pbp.get((cfg, max(ds), depth), [])
        short = pbp.get((cfg, min(ds), depth), [])
        inprog = [r.get("inprog") for r in runs]
        stats = [r["stats_total"] / r["samples"] for r in runs if r.get("samples") and r.get("stats_total")]
        nb = [r["native_bytes"] / r["samples"] for r in runs if r.get("native_bytes")]
        unw = [r["unwind_ms"] * 1e3 / r["samples"] for r in runs if r.get("unwind_ms") is not None]
        cpu = []
        for a, b in zip(short, runs):
            if "cpu" in a and "cpu" in b and b.get("samples", 0) > a.get("samples", 0):
                cpu.append((b["cpu"] - a["cpu"]) * 1e6 / (b["samples"] - a["samples"]))
        print("depth %d %s: in-program ns/sample %s; bpf_stats ns/sample %s; native bytes/sample %s; libdwfl unwind CPU"
              " us/sample %s; CLI CPU us/sample (long - short run) %s; samples %s" % (depth, cfg, mm(inprog), mm(stats),
              mm(nb), mm(unw), mm(cpu), [r.get("samples") for r in runs]))
