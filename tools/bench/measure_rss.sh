#!/bin/bash
# measure_rss.sh BIN OUTDIR SECONDS: pybpfprof's VmRSS and VmHWM (kB) every 30 s while it
# profiles 4 busy.py processes launched under it at 999 Hz (BENCHMARKS.md, "Memory of a long
# run"), and its peak RSS over the whole run, writing the outputs at the end included (from
# /usr/bin/time: the 30 s readings miss the last seconds). Writes OUTDIR/rss.txt ("seconds
# rss_kB hwm_kB" lines, then "peak_kB N"), the profile, the report and pybpfprof's stderr.
# The environment passes through (PYBPFPROF_SAMPLE_WINDOW).
BIN=$1; OUT=$2; SECS=$3
W=$(cd "$(dirname "$0")" && pwd)/workloads/busy.py
mkdir -p "$OUT"
/usr/bin/time -f "peak_kB %M" -o "$OUT/peak.txt" \
  "$BIN" -q -r 999 -d "$SECS" -o "$OUT/profile.json" --report "$OUT/report.html" -- \
  sh -c "for i in 1 2 3 4; do /usr/bin/python3 $W $((SECS+30)) \$i & done; wait" > "$OUT/stdout" 2> "$OUT/stderr" &
T=$!
P=""
for _ in $(seq 100); do
  P=$(awk '{print $1}' /proc/$T/task/$T/children 2>/dev/null)
  [ -n "$P" ] && break
  sleep 0.05
done
echo "pid $P start $(date -u +%T)" > "$OUT/rss.txt"
for ((t=0; t<=SECS+60; t+=30)); do
  [ -n "$P" ] && [ -d /proc/$P ] || break
  echo "$t $(awk '/VmRSS/ {print $2}' /proc/$P/status) $(awk '/VmHWM/ {print $2}' /proc/$P/status)" >> "$OUT/rss.txt"
  sleep 30
done
wait $T; echo "exit $? end $(date -u +%T)" >> "$OUT/rss.txt"
cat "$OUT/peak.txt" >> "$OUT/rss.txt"
