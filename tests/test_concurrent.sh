#!/usr/bin/env bash
# Several rank processes, and two jobs, saving into one root at once: every
# version COMMITTED exactly when all its ranks are durable, all restore.
set -euo pipefail
BIN=${CKPT_BIN:?}; TB=${CKPT_TESTS_BIN:?}
root=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-conc-XXXXXX")
trap 'rm -rf "$root"' EXIT
SIZE=2000000 REG=4
pids=()
for r in 0 1 2 3; do
	"$TB/rank_saver" save "$root" jobA $r 4 1 6 $SIZE $REG >/dev/null & pids+=($!)
done
for r in 0 1; do
	"$TB/rank_saver" save "$root" jobB $r 2 10 14 $SIZE $REG >/dev/null & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { echo "FAIL: a rank process failed" >&2; exit 1; }; done
"$BIN/ckpt" ls --root "$root" --json | python3 -c '
import json,sys
vs=json.load(sys.stdin)
a=[v for v in vs if v["job"]=="jobA"]; b=[v for v in vs if v["job"]=="jobB"]
assert [v["version"] for v in a]==[1,2,3,4,5,6], a
assert [v["version"] for v in b]==[10,11,12,13,14], b
for v in a: assert v["state"]=="COMMITTED" and v["shards_done"]==4 and v["world_size"]==4, v
for v in b: assert v["state"]=="COMMITTED" and v["shards_done"]==2, v
print("index: ok")'
for r in 0 1 2 3; do "$TB/rank_saver" check "$root" jobA $r 4 $SIZE $REG >/dev/null; done
for r in 0 1; do "$TB/rank_saver" check "$root" jobB $r 2 $SIZE $REG >/dev/null; done
"$BIN/ckpt" verify --root "$root" --job jobA >/dev/null
# Rebuilding the index from the files alone gives the same committed set.
rm -rf "$root/index"
"$BIN/ckpt" reindex --root "$root" >/dev/null
n=$("$BIN/ckpt" ls --root "$root" --json | python3 -c 'import json,sys; print(sum(1 for v in json.load(sys.stdin) if v["state"]=="COMMITTED"))')
[ "$n" = 11 ] || { echo "FAIL: $n committed after reindex" >&2; exit 1; }
for r in 0 1 2 3; do "$TB/rank_saver" check "$root" jobA $r 4 $SIZE $REG >/dev/null; done
echo "concurrent: ok"
