#!/bin/bash
# One wall-mode run of the half-sleeping workload (tests/workloads/wall_half_sleep.py: 20 ms of
# computing, 20 ms of time.sleep, for 3 s), its split summed from the folded output: the compute
# line on CPU and runnable, and the sleep line, against what the workload measured itself; and
# how many switch-ins the scheduler never reported (PYBPFPROF_DEBUG's wall line). As root.
#   tools/bench/wall_half_sleep_split.sh BIN [RATE] [PYTHON]
# e.g. for i in $(seq 8); do tools/bench/wall_half_sleep_split.sh build/pybpfprof 99; done
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:?usage: wall_half_sleep_split.sh PYBPFPROF_BINARY [RATE] [PYTHON]}
rate=${2:-99}
py=${3:-/root/.pyenv/versions/3.13.0/bin/python3.13}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
measured=$(PYBPFPROF_DEBUG=1 "$bin" -q --mode wall -r "$rate" -f collapsed -o "$tmp/hs.folded" -- \
  "$py" "$here/tests/workloads/wall_half_sleep.py" 3 2>"$tmp/err" | grep -o "measured.*" || true)
awk -v m="$measured" '
/^#/ { next }
{ n = $NF }
/compute \(/ && /\[runnable/ { runnable += n; next }
/compute \(/ { cpu += n; next }
/rest \(/ && /\[sleeping\]/ { sleep += n; next }
END { printf "%s | compute on CPU %.1f ms, runnable %.1f ms | sleep %.1f ms", m, cpu / 1e6, runnable / 1e6, sleep / 1e6 }' "$tmp/hs.folded"
echo " | $(grep -oE '[0-9]+ switch-ins never reported' "$tmp/err" || echo '? switch-ins never reported')"
