#!/usr/bin/env bash
# Checks tools/test-digest against a real ctest run of the same kind as tools/test's
# (ctest --repeat until-pass:2 -j2): a project with a test that fails once and then passes, one
# that fails every time (gtest-like assertion lines among others), and one that passes. The
# digest must name the first as passed when run again and the second as failed, each with its
# assertion lines and not the noise around them, say nothing of the third nor of two tests ctest
# skipped (gtest's [  SKIPPED ] line, a skip return code), and print nothing at all for a run
# without failures.
# Usage: check_test_digest.sh REPO_DIR
set -euo pipefail
repo=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
say() { echo "FAIL: $*"; fail=1; }

cat >"$tmp/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16)
project(digest_check NONE)
enable_testing()
add_test(NAME Flaky COMMAND sh -c "if [ -e '$tmp/mark' ]; then echo second try; exit 0; fi; touch '$tmp/mark'; echo '[ RUN      ] Flaky.Once'; echo 'noise line'; echo 'x.cpp:12: Failure'; echo 'Expected: (share) >= (95.0), actual: 93.9 vs 95'; exit 1")
add_test(NAME Broken COMMAND sh -c "echo 'noise before'; echo 'y.cpp:3: Failure'; echo 'Value of: run.ok'; exit 1")
add_test(NAME Fine COMMAND sh -c "echo 'fine.cpp:1: Failure-free output'; exit 0")
add_test(NAME SkippedByGtest COMMAND sh -c "echo '[  SKIPPED ] needs a pyenv build'; exit 0")
set_tests_properties(SkippedByGtest PROPERTIES SKIP_REGULAR_EXPRESSION "\\\\[  SKIPPED \\\\]")
add_test(NAME SkippedByCode COMMAND sh -c "exit 77")
set_tests_properties(SkippedByCode PROPERTIES SKIP_RETURN_CODE 77)
EOF
cmake -S "$tmp" -B "$tmp/b" >/dev/null
(cd "$tmp/b" && ctest -j2 --repeat until-pass:2 >/dev/null 2>&1) && say "ctest passed a run with a broken test"
out=$("$repo/tools/test-digest" "$tmp/b")
echo "$out"
grep -qx '== test digest: 1 failed, 1 failed once and passed when run again ==' <<<"$out" || say "no or wrong headline"
grep -qx -- '-- Broken: FAILED' <<<"$out" || say "the broken test is not said to have failed"
grep -qx -- '-- Flaky: failed once, passed when run again' <<<"$out" || say "the flaky test is not said to have passed when run again"
grep -q 'Expected: (share) >= (95.0), actual: 93.9 vs 95' <<<"$out" || say "the flaky test's assertion is missing"
grep -q 'Value of: run.ok' <<<"$out" || say "the broken test's assertion is missing"
grep -q 'noise' <<<"$out" && say "lines that are not the assertions are printed"
grep -q 'Fine' <<<"$out" && say "a test that passed is named"
grep -q 'Skipped' <<<"$out" && say "a test ctest skipped is named (a skip is not a failure)"
# Broken first: what failed for good is read first.
[ "$(grep -n -- '-- Broken' <<<"$out" | cut -d: -f1)" -lt "$(grep -n -- '-- Flaky' <<<"$out" | cut -d: -f1)" ] ||
  say "the test that failed for good is not listed first"

# A run without failures: nothing at all.
rm -rf "$tmp/b"
sed -i '/Broken/d' "$tmp/CMakeLists.txt"
touch "$tmp/mark"
cmake -S "$tmp" -B "$tmp/b" >/dev/null
(cd "$tmp/b" && ctest -j2 --repeat until-pass:2 >/dev/null 2>&1) || say "ctest failed a run of passing tests"
[ -z "$("$repo/tools/test-digest" "$tmp/b")" ] || say "the digest of a run without failures is not empty"

[ "$fail" = 0 ] && echo "check_test_digest: ok"
exit $fail
