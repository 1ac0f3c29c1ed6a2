#!/usr/bin/env bash
# The wall-mode scheduler program's cost per run, for before/after comparisons of bpf/offcpu.bpf.h
# (BENCHMARKS.md, "Wall mode: the place check"): the max-rate ping-pong
# (workloads/pingpong.py SECONDS 0, both processes pinned to CPU 1) profiled by
# `PYBPFPROF_DEBUG=1 BIN --mode wall -r 99 -p PARENT -p CHILD` on CPU 0; prints the ping-pong's
# own line, the profiler's own CPU time meanwhile, and its "off-CPU program" line (runs, ns per
# run, how switch-outs found their stacks). As root. PLACES: pingpong.py's (3: every switch-out walks); EXTRA: more options
# for the profiler, e.g. --native.
#
#   tools/bench/wall_switch_cost.sh BIN [SECONDS] [WORK] [PLACES] [EXTRA...]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:?usage: wall_switch_cost.sh PYBPFPROF_BINARY [SECONDS] [WORK]}
secs=${2:-3}
work=${3:-0}
places=${4:-1}
shift $(($# < 4 ? $# : 4))
extra=("$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
coproc PP { taskset -c 1 /usr/bin/python3.11 "$here/tools/bench/workloads/pingpong.py" "$secs" "$work" "$places"; }
read -r line <&"${PP[0]}"
set -- $line  # "pids PARENT CHILD"
PYBPFPROF_DEBUG=1 taskset -c 0 "$bin" --mode wall ${extra[@]+"${extra[@]}"} -r 99 -p "$2" -p "$3" -o "$tmp/out.json" 2>"$tmp/err" &
prof=$!
sleep 2.5  # its BPF programs loaded and attached
ticks() { awk '{print $14 + $15}' "/proc/$prof/stat"; }  # utime + stime, in clock ticks
t0=$(ticks)
echo go >&"${PP[1]}"
read -r result <&"${PP[0]}"
t1=$(ticks)
echo "$result"
echo "profiler CPU during the ping-pong: $(( (t1 - t0) * 1000 / $(getconf CLK_TCK) )) ms"
kill -INT "$prof"
wait "$prof" || true
echo end >&"${PP[1]}" 2>/dev/null || true
grep "off-CPU program" "$tmp/err" | sed 's/.*debug: //'
