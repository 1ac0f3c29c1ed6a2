#!/usr/bin/env bash
# Checks deploy/Dockerfile without a container engine (CI has none):
#  - every package its stages install exists in Debian (apt-cache);
#  - the runtime stage installs every package that owns a shared library the built
#    pybpfprof links (ldd), so the image's binary can start;
#  - the build stage runs the repository's own install and build scripts, and the image
#    ships pybpfprof-py-spy next to pybpfprof (it links the same libraries);
#  - the image runs the agent (`pybpfprof agent`) by default.
# Usage: check_dockerfile.sh REPO_DIR PYBPFPROF_BINARY
set -euo pipefail
repo=$1 bin=$2
df=$repo/deploy/Dockerfile
fail=0
say() { echo "FAIL $df: $*"; fail=1; }

# The runtime stage: from the last FROM on; packages are the apt-get install arguments.
runtime=$(awk '/^FROM /{buf=""} {buf=buf"\n"$0} END{print buf}' "$df")
pkgs=$(printf '%s\n' "$runtime" | sed -n '/apt-get install/,/rm -rf/p' | tr ' \\' '\n\n' |
  grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -vE '^(apt-get|install|rm|DEBIAN_FRONTEND.*)$' || true)
[ -n "$pkgs" ] || say "no packages found in the runtime stage"
for p in $pkgs; do
  apt-cache show "$p" >/dev/null 2>&1 || say "package $p does not exist in Debian"
done

# Every shared library pybpfprof needs, and the package owning it.
while read -r name path; do
  [ -n "$path" ] || continue
  real=$(readlink -f "$path")
  owner=
  # the exact file, under /usr or not (merged-/usr systems register either)
  for f in "$real" "${real#/usr}" "/usr$real" "$path" "${path#/usr}" "/usr$path"; do
    owner=$(dpkg -S "$f" 2>/dev/null | head -1 | cut -d: -f1 || true)
    [ -z "$owner" ] || break
  done
  if [ -z "$owner" ]; then say "no package owns $name ($real)"; continue; fi
  grep -qx "$owner" <<<"$pkgs" || say "$bin links $name from $owner, which the runtime stage does not install"
done < <(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')

grep -q 'tools/install-deps --runtime-only' "$df" || say "the build stage must run tools/install-deps --runtime-only"
grep -q 'tools/build pybpfprof' "$df" || say "the build stage must run tools/build pybpfprof"
grep -q '^COPY --from=build /build/pybpfprof /usr/local/bin/pybpfprof$' "$df" ||
  say "the runtime stage must copy the built binary to /usr/local/bin/pybpfprof"
grep -q 'tools/build pybpfprof pybpfprof-py-spy' "$df" || say "the build stage must build pybpfprof-py-spy too"
grep -q '^COPY --from=build /build/pybpfprof-py-spy /usr/local/bin/pybpfprof-py-spy$' "$df" ||
  say "the runtime stage must copy pybpfprof-py-spy to /usr/local/bin/pybpfprof-py-spy"
# The binaries are built unless asked otherwise (BINARIES=prebuilt, for builds with no registry).
grep -q '^ARG BINARIES=build$' "$df" || say "the build stage must build the binaries by default (ARG BINARIES=build)"
# The default command: ENTRYPOINT + CMD (exec form) must be pybpfprof agent.
entry=$(sed -n 's/^ENTRYPOINT \[\(.*\)\]$/\1/p' "$df" | tail -1)
cmd=$(sed -n 's/^CMD \[\(.*\)\]$/\1/p' "$df" | tail -1)
argv=$(printf '%s, %s' "$entry" "$cmd" | tr -d '"' | sed 's/, *$//; s/^, *//')
case "$argv" in
  "/usr/local/bin/pybpfprof, agent" | "/usr/local/bin/pybpfprof, agent, "*) ;;
  *) say "the image must run the agent: ENTRYPOINT [\"/usr/local/bin/pybpfprof\"] and CMD [\"agent\"] (found: $argv)" ;;
esac
if [ $fail = 0 ]; then echo "ok $df: $(wc -w <<<"$pkgs") runtime packages, every library of $(basename "$bin") covered"; fi
exit $fail
