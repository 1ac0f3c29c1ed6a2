#!/bin/bash
# Two pybpfprof binaries alternated on what a change of the BPF programs' verification could
# move (BENCHMARKS.md, "BPF verification: wall mode and --native cut by a third"): the whole run of
# a --mode wall --native start (verification is most of it), the scheduler program's ns per run
# (tools/bench/wall_switch_cost.sh, 1 and 3 places, and 3 with --native), and the BPF ns per
# sample at 999 Hz with and without --native. As root, on an otherwise idle machine.
#   tools/bench/verify_cost_cmp.sh BEFORE_BIN AFTER_BIN
set -u
cd "$(dirname "$0")/../.."
B=$1; A=$2
echo "## start-up to 'profiling' (wall --native), s"
for r in 1 2 3; do for bin in $B $A; do
  s=$(date +%s.%N); $bin -q --mode wall --native -d 0.1 -f collapsed -o /tmp/cmp.folded -- /usr/bin/python3 -c pass >/dev/null 2>&1; e=$(date +%s.%N)
  echo "$bin $(echo "$e - $s" | bc)"; done; done
echo "## switch cost (places 1 and 3)"
for r in 1 2; do for bin in $B $A; do for pl in 1 3; do echo "$bin places $pl: $(tools/bench/wall_switch_cost.sh $bin 3 0 $pl 2>&1 | grep -i 'off-CPU program' | head -1)"; done; done; done
echo "## switch cost --native (places 3)"
for r in 1 2; do for bin in $B $A; do echo "$bin: $(tools/bench/wall_switch_cost.sh $bin 3 0 3 --native 2>&1 | grep -i 'off-CPU program' | head -1)"; done; done
echo "## --native per sample, 999 Hz, 5 s recursion"
for r in 1 2 3; do for bin in $B $A; do
  echo "$bin: $(PYBPFPROF_DEBUG=1 $bin -q --native -r 999 -f collapsed -o /tmp/cmp.folded -- /usr/bin/python3 -c '
import time
def f(n):
    return f(n-1) if n else sum(range(200))
t=time.time()
while time.time()-t<5: f(30)' 2>&1 | grep -E 'BPF: [0-9]+ ns' | head -1)"; done; done
echo "## cpu per sample, 999 Hz"
for r in 1 2 3; do for bin in $B $A; do
  echo "$bin: $(PYBPFPROF_DEBUG=1 $bin -q -r 999 -f collapsed -o /tmp/cmp.folded -- /usr/bin/python3 -c '
import time
def f(n):
    return f(n-1) if n else sum(range(200))
t=time.time()
while time.time()-t<5: f(30)' 2>&1 | grep -E 'BPF: [0-9]+ ns' | head -1)"; done; done
