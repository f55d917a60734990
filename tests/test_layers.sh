#!/usr/bin/env bash
# The layering rule (libckpt/README.md) holds for the tree, and the check
# really fails on each kind of crossing planted in a copy of it.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
check=$src/tools/layers/check-layers.py
command -v python3 >/dev/null || exit 77
python3 "$check" "$src"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for d in libckpt ckptd tools storage kernels trainer; do cp -r "$src/$d" "$tmp/"; done
plant() { # file include: the copy must now fail, naming the file
	local f=$1 inc=$2 out
	cp "$tmp/$f" "$tmp/$f.orig"
	printf '#include "%s"\n' "$inc" >>"$tmp/$f"
	if out=$(python3 "$check" "$tmp"); then
		echo "FAIL: $f including $inc was not caught" >&2; exit 1
	fi
	grep -q "^$f:" <<<"$out" || { echo "FAIL: the report does not name $f: $out" >&2; exit 1; }
	mv "$tmp/$f.orig" "$tmp/$f"
}
plant libckpt/src/ctx.c server/log.h           # the library reaching into the daemon
plant libckpt/src/ctx.c ../../ckptd/roles/roles.h
plant libckpt/base/common.c format/format.h    # base above format
plant libckpt/wire/proto.c format/index.h      # wire beside format, not above it
plant libckpt/format/reader.c src/ctx.h        # format above src
plant tools/ckpt/cmds.c src/ctx.h              # the tool into the library's internals
plant tools/ckpt/cmds.c server/config.h        # the tool into the daemon
plant storage/uring.c base/common.h            # a leaf that is not one
plant trainer/main.c format/format.h           # a rank program past ckpt.h
python3 "$check" "$tmp" >/dev/null
echo "test_layers: ok"
