#!/bin/sh
# Prints the CPython struct offsets pybpfprof's layout tables are built from, for each
# set of headers given (default: every pyenv 3.x build, plus the sid chroot's 3.14/3.15).
#   tests/tools/gen_layout_offsets.sh [/path/to/include/python3.X ...]
# FREE_THREADED=1 compiles with Py_GIL_DISABLED (the free-threaded layout of 3.13+ headers).
set -e
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -eq 0 ]; then
	for d in /root/.pyenv/versions/3.*/include/python3.* \
	         /var/cache/pybpfprof/chroots/sid/usr/include/python3.1[4-9]; do
		[ -d "$d" ] && set -- "$@" "$d"
	done
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for inc in "$@"; do
	echo "== $inc"
	extra=""
	# Debian keeps pyconfig.h under the multiarch include dir
	case "$inc" in
	/var/cache/pybpfprof/chroots/sid/*)
		root=${inc%%/usr/include/*}
		extra="-idirafter $root/usr/include" ;;
	esac
	[ -n "$FREE_THREADED" ] && extra="$extra -DPy_GIL_DISABLED=1"
	cc -std=gnu11 -w -I"$inc" $extra "$here/gen_layout_offsets.c" -o "$out/gen"
	"$out/gen"
done
