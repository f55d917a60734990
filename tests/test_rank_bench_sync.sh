#!/usr/bin/env bash
# ckpt-rank-bench train (the benchmarks' rank program): four ranks in
# lockstep (--sync) take their regular checkpoint at the first step at which
# the --save-when file exists, and all at the same step. The file appears at
# a random moment while they run; each rank once checked it on its own, so
# the file could appear between two ranks' checks of the same step: one rank
# saved a step before the others, a version that never commits, and
# tools/bench-preempt.sh waited for it until its timeout (seen about once in
# ten tries).
set -euo pipefail
BIN=${CKPT_BIN:?}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-rank-sync-XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

first_save() { sed -n 's/.*"kind": "save", "step": \([0-9]*\).*/\1/p' "$1" | head -1; }

trials=${TRIALS:-6}
for ((t = 1; t <= trials; t++)); do
	w=$tmp/t$t
	mkdir -p "$w/root"
	head -c 256 /dev/zero >"$w/sync"
	pids=()
	for r in 0 1 2 3; do
		CKPT_JOB=sync CKPT_RANK=$r CKPT_WORLD_SIZE=4 CKPT_ROOT=$w/root CKPT_TIERS=local_disk CKPT_DAEMON= \
			"$BIN/ckpt-rank-bench" train --size 64K --step-ms 1 --save-at 1 --max-steps 1000000 \
			--sync "$w/sync" --save-when "$w/go" --timeout 120 >"$w/r$r.json" 2>"$w/r$r.log" &
		pids+=($!)
	done
	# Until every rank has stepped, then the file at a random moment.
	for r in 0 1 2 3; do
		for _ in $(seq 300); do grep -q '"started"' "$w/r$r.json" && break; sleep 0.05; done
	done
	sleep "0.$(printf '%03d' $((RANDOM % 800)))"
	touch "$w/go"
	# They run until killed, once each has saved (however slow this machine).
	for r in 0 1 2 3; do
		for _ in $(seq 600); do grep -q '"kind": "save"' "$w/r$r.json" && break; sleep 0.05; done
	done
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	pids=()
	steps=()
	for r in 0 1 2 3; do
		s=$(first_save "$w/r$r.json")
		[ -n "$s" ] || fail "trial $t: rank $r took no regular checkpoint: $(tail -3 "$w/r$r.log")"
		steps+=("$s")
	done
	[ "${steps[0]}" = "${steps[1]}" ] && [ "${steps[1]}" = "${steps[2]}" ] && [ "${steps[2]}" = "${steps[3]}" ] ||
		fail "trial $t: the ranks saved steps ${steps[*]}, want one step"
	echo "trial $t: all four ranks saved step ${steps[0]}"
done
echo "ok: $trials trials, the regular checkpoint at one step in every rank"
