#!/bin/bash
# A shard of many regions through the ckpt tool with few descriptors: 1,100
# regions saved, then verified and restored under `ulimit -n 128` (restore
# once kept one descriptor per region and failed with EMFILE). The restored
# files must equal the inputs.
# Needs CKPT_BIN (ckpt).
set -u
export LC_ALL=C
ckpt="${CKPT_BIN:-}/ckpt"
[ -x "$ckpt" ] || { echo "SKIP: no ckpt binary (set CKPT_BIN)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-test-many-regions-XXXXXX")
trap '[ -n "${CKPT_TEST_KEEP:-}" ] || rm -rf "$tmp"' EXIT
N=1100
mkdir -p "$tmp/in"
for i in $(seq 1 $N); do printf 'region %d\n' "$i" > "$tmp/in/f$i"; done
(cd "$tmp/in" && "$ckpt" save --root "$tmp/root" --job m --version 1 f*) > "$tmp/save.out" 2>&1 || {
	echo "FAIL: save of $N files"; cat "$tmp/save.out"; exit 1; }
if ! (ulimit -n 128 && "$ckpt" verify --root "$tmp/root" --job m --version 1) > "$tmp/verify.out" 2>&1; then
	echo "FAIL: verify of $N regions under ulimit -n 128"; tail -5 "$tmp/verify.out"; exit 1
fi
if ! (ulimit -n 128 && "$ckpt" restore --root "$tmp/root" --job m --out "$tmp/out") > "$tmp/restore.out" 2>&1; then
	echo "FAIL: restore of $N regions under ulimit -n 128"; tail -5 "$tmp/restore.out"; exit 1
fi
diff -r "$tmp/in" "$tmp/out" > /dev/null || { echo "FAIL: restored files differ from the inputs"; exit 1; }
echo "ok: $N regions saved, verified and restored under ulimit -n 128"
