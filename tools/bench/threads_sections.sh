#!/bin/bash
# The threads axis broken down: alternating 10- and 1000-thread runs of one pattern, each with
# the BPF section timers and counters (PYBPFPROF_TIMING=1, PYBPFPROF_DEBUG=1), a line per run.
#   tools/bench/threads_sections.sh [PYTHON] [PATTERN] [RATE] [ROUNDS] [SECONDS]
# e.g. tools/bench/threads_sections.sh /root/.pyenv/versions/3.12.1/bin/python3.12 pool 99 4 15
# PYBPFPROF overrides the binary (default: build/pybpfprof). Run on an otherwise idle machine.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
py=${1:-/usr/bin/python3}
pattern=${2:-pool}
rate=${3:-99}
rounds=${4:-4}
secs=${5:-15}
bin=${PYBPFPROF:-$here/build/pybpfprof}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for round in $(seq 1 "$rounds"); do
  for n in 10 1000; do
    log=$(PYBPFPROF_DEBUG=1 PYBPFPROF_TIMING=1 "$bin" -r "$rate" -o "$out/p.json" -- \
      "$py" "$here/tools/bench/workloads/threads.py" "$pattern" "$n" "$secs" 2>&1 >/dev/null)
    ns=$(sed -n 's/.*BPF: \([0-9]*\) ns per profiled sample.*/\1/p' <<<"$log")
    sections=$(sed -n 's/.*BPF sections, ns per sample: \(.*\); per sample.*/\1/p' <<<"$log")
    walks=$(grep -o 'tstate_walk=[0-9]*' <<<"$log" || true)
    hints=$(grep -o 'tstate_hint=[0-9]*' <<<"$log" || true)
    echo "round $round, $n threads: $ns ns/sample; $walks ${hints:-tstate_hint=0}; $sections"
  done
done
