#!/usr/bin/env bash
# tools/install-python (which tools/install runs) for real, without changing this machine:
# in a private mount namespace, a copy of Debian python3's local site directory is mounted
# over it and the package goes to a temporary prefix. Checks that it installs, that a second
# run changes nothing, that an unprivileged user's /usr/bin/python3 imports it from any
# directory with no PYTHONPATH, that a changed package is replaced, and that --uninstall
# removes exactly what was installed (twice: idempotent).
# Root only; exits 77 (skip) otherwise, except under CI=true.
set -euo pipefail
src=${1:?usage: check_install.sh SOURCE_DIR}
if [ "$(id -u)" != 0 ]; then
  [ "${CI:-}" = true ] && { echo "check_install: needs root (CI=true: failing)" >&2; exit 1; }
  echo "check_install: skipped: needs root" >&2
  exit 77
fi
if [ -z "${PBP_CHECK_INSTALL_INNER:-}" ]; then
  exec env PBP_CHECK_INSTALL_INNER=1 unshare --mount --propagation private "$0" "$@"
fi
fail() { echo "check_install: FAILED: $*" >&2; exit 1; }
py=/usr/bin/python3
site=$("$py" -c 'import site
print(next(d for d in site.getsitepackages() if d.startswith("/usr/local/")))')
tmp=$(mktemp -d /tmp/pbp-check-install.XXXXXX)
trap 'umount "$site" 2>/dev/null || true; rm -rf "$tmp"' EXIT
chmod 0755 "$tmp"
mkdir -p "$tmp/site" "$site"
cp -a "$site/." "$tmp/site/"
# An installed pybpfprof's own .pth (the README's first command installs one) is left out of
# the copy: the checks below are of what this install adds and removes (the machine's own
# file is untouched, outside this namespace).
rm -f "$tmp/site/pybpfprof.pth"
mount --bind "$tmp/site" "$site"
before=$(ls -A "$site")
prefix=$tmp/prefix
pydir=$prefix/lib/pybpfprof/python

out=$("$src/tools/install-python" --prefix "$prefix") || fail "the install failed: $out"
echo "$out"
grep -q "installed $pydir/pybpfprof" <<<"$out" || fail "it did not say it installed $pydir/pybpfprof"
[ "$(cat "$site/pybpfprof.pth")" = "$pydir" ] || fail "$site/pybpfprof.pth does not name $pydir"
diff -rq -x __pycache__ "$src/python/pybpfprof" "$pydir/pybpfprof" || fail "the installed package differs"

out=$("$src/tools/install-python" --prefix "$prefix") || fail "the second install failed: $out"
echo "$out"
grep -q "up to date" <<<"$out" || fail "a second run was not a no-op"
grep -q "installed" <<<"$out" && fail "a second run installed something again"

# Any user, any directory, no PYTHONPATH, no pip.
got=$(cd / && setpriv --reuid=nobody --regid=nogroup --clear-groups env -i PATH=/usr/bin:/bin "$py" -c \
  'import pybpfprof; print(pybpfprof.__file__); print(pybpfprof.profile)') || fail "nobody cannot import pybpfprof"
echo "$got"
[ "$(head -n1 <<<"$got")" = "$pydir/pybpfprof/__init__.py" ] || fail "imported from elsewhere: $got"

# A changed package replaces the installed one.
echo "# changed" >>"$pydir/pybpfprof/formats.py"
out=$("$src/tools/install-python" --prefix "$prefix") || fail "the reinstall failed: $out"
grep -q "installed $pydir/pybpfprof" <<<"$out" || fail "a changed package was not replaced: $out"
diff -rq -x __pycache__ "$src/python/pybpfprof" "$pydir/pybpfprof" || fail "the replaced package differs"
ls -d "$pydir".* 2>/dev/null && fail "a staging directory was left behind"

out=$("$src/tools/install-python" --prefix "$prefix" --uninstall) || fail "the uninstall failed: $out"
echo "$out"
[ ! -e "$site/pybpfprof.pth" ] || fail "$site/pybpfprof.pth is still there"
[ ! -e "$prefix/lib/pybpfprof" ] || fail "$prefix/lib/pybpfprof is still there"
[ "$(ls -A "$site")" = "$before" ] || fail "the site directory is not as it was: $(ls -A "$site")"
"$src/tools/install-python" --prefix "$prefix" --uninstall | grep -q "is not installed" || fail "a second uninstall"
( cd / && env -i "$py" -c 'import pybpfprof' 2>/dev/null ) && fail "pybpfprof still imports after the uninstall"
# tools/install runs it.
grep -q 'tools/install-python" --prefix "$prefix"' "$src/tools/install" || fail "tools/install does not run tools/install-python"
echo "check_install: passed"
