#!/bin/bash
# Every CKPT_* environment variable the code reads is documented: each
# "CKPT_..." string literal in libckpt/, ckptd/, storage/ and tools/ (the
# settings tables' env fields, getenv calls, the names they are built from)
# must appear in `ckpt --help-config` or in `ckptd --help`.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
bin=${CKPT_BIN:?CKPT_BIN not set}
[ -x "$bin/ckpt" ] && [ -x "$bin/ckptd" ] || { echo "skip: no ckpt or ckptd in $bin"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

help=$("$bin/ckpt" --help-config; "$bin/ckptd" --help) || fail "a help command failed"
vars=$(cd "$src" && grep -ohrE --include='*.c' --include='*.h' '"CKPT_[A-Z0-9_]+"' libckpt ckptd storage tools |
	tr -d '"' | sort -u)
n=$(echo "$vars" | grep -c .)
# The scan itself works: it finds the table's and the logger's variables.
[ "$n" -ge 50 ] || fail "only $n CKPT_* literals found under $src: the scan is broken"
for must in CKPT_ROOT CKPT_DEBUG CKPT_LISTEN CKPT_FAULT; do
	echo "$vars" | grep -qx "$must" || fail "the scan missed $must"
done
missing=""
for v in $vars; do
	echo "$help" | grep -qw -- "$v" || missing="$missing $v"
done
[ -z "$missing" ] || fail "read by the code but in neither help output:$missing"
echo "ok: $n CKPT_* variables, each in ckpt --help-config or ckptd --help"
