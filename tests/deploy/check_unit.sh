#!/usr/bin/env bash
# Checks deploy/pybpfprof-agent.service without running systemd:
#  - `systemd-analyze verify` accepts it with no warning at all (an unknown key or a bad
#    value is only a warning there, so any output fails), the binary replaced by a stand-in
#    (verify wants ExecStart's file to exist);
#  - it runs `pybpfprof agent` from tools/install's default place, with the options from
#    /etc/default/pybpfprof-agent, and tools/install rewrites that line for --prefix;
#  - its RuntimeDirectory= is the directory of the agent's default socket (kDefaultSocket in
#    userspace/agent/, else the documented /run/pybpfprof/agent.sock), mode 0755;
#  - it hides no path the agent reads targets through (no PrivateTmp=, ProtectHome=yes,
#    ProtectProc=, ProcSubset=, InaccessiblePaths=...), and keeps the limits BPF needs;
#  - a broken unit is rejected (so the check can fail).
# Exits 77 (skipped) when systemd-analyze is missing, except under CI=true.
# Usage: check_unit.sh REPO_DIR
set -euo pipefail
repo=$1
unit=$repo/deploy/pybpfprof-agent.service
fail=0
say() { echo "FAIL $unit: $*"; fail=1; }

if ! command -v systemd-analyze >/dev/null; then
  if [ "${CI:-}" = true ]; then
    echo "FAIL: systemd-analyze is missing and required under CI=true; run tools/install-deps (Debian package systemd)"
    exit 1
  fi
  echo "skipped: systemd-analyze is missing (Debian package systemd; tools/install-deps installs it)"
  exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#!/bin/sh\nexit 0\n' >"$tmp/pybpfprof"
chmod +x "$tmp/pybpfprof"

# Verifies unit text (as pybpfprof-agent.service); prints what systemd-analyze said.
verify() {
  mkdir -p "$tmp/v"
  sed "s#/usr/local/bin/pybpfprof #$tmp/pybpfprof #" >"$tmp/v/pybpfprof-agent.service"
  # --man=no: no Documentation= man page lookups; SYSTEMD_LOG_COLOR: plain text.
  SYSTEMD_LOG_COLOR=0 systemd-analyze verify --man=no "$tmp/v/pybpfprof-agent.service" 2>&1 || echo "(exit $?)"
}

out=$(verify <"$unit")
[ -z "$out" ] || say "systemd-analyze verify: $(tr '\n' ' ' <<<"$out")"

# What the unit must say. The last assignment of a key wins, as in systemd.
value() { sed -n "s/^$1=//p" "$unit" | tail -1; }
[ "$(value Type)" = simple ] || say "Type= must be simple (the agent does not fork)"
# shellcheck disable=SC2016 # a literal $VAR: systemd expands it
[ "$(value ExecStart)" = '/usr/local/bin/pybpfprof agent $PYBPFPROF_AGENT_ARGS' ] ||
  say "ExecStart= must be '/usr/local/bin/pybpfprof agent \$PYBPFPROF_AGENT_ARGS' (tools/install rewrites the path)"
[ "$(value EnvironmentFile)" = -/etc/default/pybpfprof-agent ] ||
  say "EnvironmentFile= must be -/etc/default/pybpfprof-agent (tools/install writes it)"
[ "$(value Restart)" = on-failure ] || say "Restart= must be on-failure"
[ "$(value LimitMEMLOCK)" = infinity ] || say "LimitMEMLOCK= must be infinity (BPF maps before Linux 5.11)"
[ "$(value LimitNOFILE)" = 65536 ] || say "LimitNOFILE= must be 65536"
[ "$(value RuntimeDirectoryMode)" = 0755 ] || say "RuntimeDirectoryMode= must be 0755 (every user reaches the socket)"
[ "$(value WantedBy)" = multi-user.target ] || say "WantedBy= must be multi-user.target"

# The socket's directory: the agent's compiled-in default (kDefaultSocket).
default_socket=$(grep -rhoE 'kDefaultSocket(\[\])?[[:space:]]*(=|\{)[[:space:]]*"[^"]+"' "$repo/userspace/agent" \
  --include='*.h' --include='*.cpp' 2>/dev/null | sed -E 's/.*"([^"]+)"/\1/' | head -1 || true)
if [ -z "$default_socket" ]; then
  default_socket=/run/pybpfprof/agent.sock
  echo "note: no kDefaultSocket = \"...\" in userspace/agent/: checked against the documented $default_socket"
fi
[ "/run/$(value RuntimeDirectory)" = "$(dirname "$default_socket")" ] ||
  say "RuntimeDirectory=$(value RuntimeDirectory) is not the directory of the default socket $default_socket"
grep -q "/run/pybpfprof/agent.sock" "$repo/tools/install" || say "tools/install does not name the socket it waits for"

# Nothing that hides a path the agent reads targets through, or their processes.
for bad in '^PrivateTmp=(yes|true|1)' '^ProtectHome=(yes|true|1|tmpfs)' '^ProtectProc=(invisible|noaccess|ptraceable)' \
  '^ProcSubset=pid' '^InaccessiblePaths=' '^TemporaryFileSystem=' '^PrivateUsers=(yes|true|1)' \
  '^PrivatePIDs=' '^User=' '^DynamicUser=(yes|true|1)' '^CapabilityBoundingSet=' '^SystemCallFilter='; do
  if line=$(grep -E "$bad" "$unit"); then say "$line: the agent must see every process and file, with every capability"; fi
done

# tools/install keeps the unit's ExecStart in step with --prefix.
grep -q 's#^ExecStart=/usr/local/bin/pybpfprof #' "$repo/tools/install" ||
  say "tools/install does not rewrite ExecStart=/usr/local/bin/pybpfprof for --prefix"

# The check can fail: a typo'd key, a bad value, a missing binary.
for mutation in 's/^ProtectSystem=/ProtectSytem=/' 's/^RestrictNamespaces=.*/RestrictNamespaces=cgroupx/' \
  "s#^ExecStart=/usr/local/bin/pybpfprof #ExecStart=$tmp/missing #"; do
  out=$(sed "$mutation" "$unit" | verify)
  [ -n "$out" ] || say "self-test: a unit changed by '$mutation' was accepted by the check"
done

if [ $fail = 0 ]; then echo "ok $unit: systemd-analyze verify is silent, agent requirements met"; fi
exit $fail
