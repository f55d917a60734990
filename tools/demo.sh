#!/usr/bin/env bash
# The main job end to end on one machine, no daemon: four rank processes of
# a data-parallel job checkpoint every few steps into one root; the whole job
# is killed with SIGKILL mid-run (as a failed node takes its ranks down) and
# relaunched; every rank resumes from the newest committed version and ends
# bit-identical to a run that was never interrupted. Then the ckpt tool:
# list, show, verify, a corrupted shard caught and skipped, restore to files,
# gc.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/deps.sh
ckpt_install_deps
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
BIN=build/bin
work=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-demo-XXXXXX")
trap 'rm -rf "$work"' EXIT
RANKS=4 STEPS=60 EVERY=5
args=(--job demo --world-size $RANKS --steps $STEPS --ckpt-every $EVERY --state-bytes 8388608)

launch() { # root log-prefix extra-args...
	local root=$1 tag=$2; shift 2
	pids=()
	for r in $(seq 0 $((RANKS - 1))); do
		"$BIN/ckpt-example" --root "$root" --rank "$r" "${args[@]}" "$@" >"$work/$tag.$r.log" 2>&1 &
		pids+=($!)
	done
}

echo "== 1. reference run: $RANKS ranks, $STEPS steps, a checkpoint every $EVERY steps"
launch "$work/ref" ref
wait "${pids[@]}"
for r in $(seq 0 $((RANKS - 1))); do tail -1 "$work/ref.$r.log"; done

echo "== 2. the same job, killed with SIGKILL mid-run, then relaunched"
launch "$work/run" run --step-ms 20
sleep 0.$((RANDOM % 5 + 4))
kill -9 "${pids[@]}" 2>/dev/null || true
wait "${pids[@]}" 2>/dev/null || true
echo "killed all ranks; the index now says:"
"$BIN/ckpt" ls --root "$work/run" --job demo
launch "$work/run" run2
wait "${pids[@]}"
ok=1
for r in $(seq 0 $((RANKS - 1))); do
	grep -h "resumed\|starting fresh" "$work/run2.$r.log"
	a=$(tail -1 "$work/ref.$r.log"); b=$(tail -1 "$work/run2.$r.log")
	if [ "$a" = "$b" ]; then echo "rank $r: $b (identical to the reference)"; else echo "rank $r: $b != $a"; ok=0; fi
done
[ $ok = 1 ] || { echo "DEMO FAILED: resumed run differs" >&2; exit 1; }

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
