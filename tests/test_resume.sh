#!/usr/bin/env bash
# A 4-rank job killed with SIGKILL at a random moment and relaunched resumes
# from the newest committed version and ends bit-identical to a run that was
# never interrupted.
set -euo pipefail
BIN=${CKPT_BIN:?}
work=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-resume-XXXXXX")
trap 'rm -rf "$work"' EXIT
args=(--job resume --world-size 4 --steps 40 --ckpt-every 3 --state-bytes 2097152)
run() { # root tag extra...
	local root=$1 tag=$2; shift 2
	pids=()
	for r in 0 1 2 3; do
		"$BIN/ckpt-example" --root "$root" --rank $r "${args[@]}" "$@" >"$work/$tag.$r" 2>&1 & pids+=($!)
	done
}
run "$work/ref" ref; wait "${pids[@]}"
for attempt in 1 2 3; do
	root="$work/kill$attempt"
	run "$root" a --step-ms 15
	sleep "0.$((RANDOM % 4 + 2))"
	kill -9 "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
	run "$root" b; wait "${pids[@]}"
	for r in 0 1 2 3; do
		a=$(tail -1 "$work/ref.$r"); b=$(tail -1 "$work/b.$r")
		[ "$a" = "$b" ] || { echo "FAIL: rank $r: $b != $a"; cat "$work/b.$r"; exit 1; }
		grep -q "final-digest" "$work/b.$r"
	done
	echo "attempt $attempt: $(grep -h 'resumed\|fresh' "$work/b.0")"
done
echo "resume: ok"
