#!/usr/bin/env bash
# The main job end to end on one machine, no daemon: the reference trainer
# runs four data-parallel rank processes that checkpoint every few steps into
# one root; the whole job is killed with SIGKILL mid-run (as a failed node
# takes its ranks down) and relaunched; it resumes from the newest committed
# version and ends bit-identical to a run that was never interrupted. Then the
# ckpt tool: list, show, verify, a corrupted shard caught and skipped, restore
# to files, gc.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/deps.sh
ckpt_install_deps
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
BIN=build/bin
work=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-demo-XXXXXX")
trap 'rm -rf "$work"' EXIT
RANKS=4 STEPS=300 EVERY=20
args=(--job demo --ranks $RANKS --steps $STEPS --ckpt-every $EVERY --seed 7 --log-every 50)

echo "== 1. reference run: the reference trainer (char-level MLP, AdamW, ZeRO-1), $RANKS ranks,"
echo "      $STEPS steps, a checkpoint every $EVERY steps"
"$BIN/trainer" "${args[@]}" --root "$work/ref" | tee "$work/ref.log"
ref=$(tail -1 "$work/ref.log")

echo "== 2. the same job, killed with SIGKILL mid-run (launcher and every rank), then relaunched"
"$BIN/trainer" "${args[@]}" --root "$work/run" --step-ms 10 >"$work/run1.log" 2>&1 &
launcher=$!
sleep "1.$((RANDOM % 9))"
kill -9 $(pgrep -P $launcher) $launcher 2>/dev/null || true
wait $launcher 2>/dev/null || true
echo "killed after: $(grep '^step' "$work/run1.log" | tail -1)"
echo "the index now says:"
"$BIN/ckpt" ls --root "$work/run" --job demo | tail -4
"$BIN/trainer" "${args[@]}" --root "$work/run" | tee "$work/run2.log"
got=$(tail -1 "$work/run2.log")
if [ "$got" = "$ref" ]; then
	echo "resumed run ends with $got: identical to the uninterrupted run"
else
	echo "DEMO FAILED: resumed run ends with '$got', the reference with '$ref'" >&2
	exit 1
fi

echo "== 3. the ckpt tool"
"$BIN/ckpt" ls --root "$work/run" --job demo
"$BIN/ckpt" show --root "$work/run" --job demo --version latest --rank 0
"$BIN/ckpt" verify --root "$work/run" --job demo --version latest
newest=$("$BIN/ckpt" ls --root "$work/run" --job demo --json | python3 -c 'import json,sys; print(max(v["version"] for v in json.load(sys.stdin) if v["state"]=="COMMITTED"))')
shard=$(printf '%s/run/jobs/demo/v%020d/r%06d.ckpt' "$work" "$newest" 1)
echo "-- flipping one byte in $(basename "$(dirname "$shard")")/$(basename "$shard")"
printf '\xff' | dd of="$shard" bs=1 seek=100000 conv=notrunc status=none
set +e
"$BIN/ckpt" verify --root "$work/run" --job demo --version "$newest"
echo "verify exit code: $? (3 = corruption found)"
"$BIN/ckpt" restore --root "$work/run" --job demo --out "$work/restored" --rank 1
set -e
ls -l "$work/restored"
echo "-- files as regions: checkpoint this script and the README as version 1 of job 'files'"
"$BIN/ckpt" save --root "$work/run" --job files --version 1 tools/demo.sh README.md
"$BIN/ckpt" restore --root "$work/run" --job files --out "$work/files"
cmp tools/demo.sh "$work/files/demo.sh" && echo "restored files are identical"
"$BIN/ckpt" gc --root "$work/run" --job demo --keep 2
"$BIN/ckpt" ls --root "$work/run"
echo "DEMO OK"
