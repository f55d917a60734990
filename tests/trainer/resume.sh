#!/usr/bin/env bash
# The headline: a 4-rank job whose launcher and rank processes are all
# killed with SIGKILL at a random step (a failing node), then started again
# with the same arguments, resumes from a committed checkpoint (step > 0)
# and ends with the same final digest as a run that was never interrupted;
# the loss lines after the resume point are identical too. In the last
# attempt only the launcher is killed: its ranks must die with it.
#   resume.sh cpu|cuda      (cuda exits 77 where there is no GPU)
set -euo pipefail
BIN=${CKPT_BIN:?}
dev=${1:-cpu}
work=$(mktemp -d "${TMPDIR:-/tmp}/trainer-resume-$dev-XXXXXX")
pids=()
cleanup() {
	[ ${#pids[@]} -eq 0 ] || kill -9 "${pids[@]}" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
steps=300
# Any change to device state between a lazy save and its fence fails the save.
[ "$dev" = cuda ] && export CKPT_LAZY_CHECK=1
base=(--device "$dev" --ranks 4 --ckpt-every 10 --log-every 1 --seed 11)
args=("${base[@]}" --steps $steps)

alive() { # pid: running (a zombie waiting for init is dead)
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${st:0:1}" != Z ]
}
digest() { tail -1 "$1" | sed -n 's/^final-digest \([0-9a-f]\{16\}\)$/\1/p'; }
after() { awk -v s="$2" '$1 == "step" && $2 + 0 > s + 0' "$1"; }   # loss lines past step s
upto() { awk -v s="$2" '$1 == "step" && $2 + 0 <= s + 0' "$1"; }

t0=$SECONDS
set +e
"$BIN/trainer" "${args[@]}" --root "$work/ref" >"$work/ref.out" 2>"$work/ref.err"
rc=$?
set -e
if [ $rc -eq 77 ]; then
	echo "skip: $(tail -1 "$work/ref.err")"
	exit 77
fi
[ $rc -eq 0 ] || { cat "$work/ref.out" "$work/ref.err" >&2; fail "reference run exited $rc"; }
ref=$(digest "$work/ref.out")
[ -n "$ref" ] || fail "no final-digest in the reference run"
echo "reference: $ref ($((SECONDS - t0)) s)"

for attempt in 1 2 3; do
	root="$work/run$attempt"
	# Kill when a random step between the second checkpoint and the end has
	# been printed; the time the kill takes to land adds more randomness.
	target=$((25 + RANDOM % (steps - 60)))
	"$BIN/trainer" "${args[@]}" --root "$root" --step-ms 8 >"$work/a$attempt.out" 2>"$work/a$attempt.err" &
	launcher=$!
	pids=("$launcher")
	for _ in $(seq 600); do
		grep -q "^step $target " "$work/a$attempt.out" && break
		kill -0 "$launcher" 2>/dev/null || break
		sleep 0.02
	done
	# On a slow machine, give the first checkpoint time to commit, so
	# that there is something to resume from.
	if [ -x "$BIN/ckpt" ]; then
		for _ in $(seq 500); do
			"$BIN/ckpt" ls --root "$root" --job trainer 2>/dev/null | grep COMMITTED >/dev/null && break
			kill -0 "$launcher" 2>/dev/null || break
			sleep 0.02
		done
	fi
	ranks=$(ps -o pid= --ppid "$launcher" | tr '\n' ' ' || true)
	[ -n "$ranks" ] || fail "attempt $attempt: no rank processes under the launcher"
	if [ $attempt -eq 3 ]; then
		# Only the launcher: its ranks must not outlive it.
		kill -9 "$launcher"
		for p in $ranks; do
			for _ in $(seq 250); do alive "$p" || break; sleep 0.02; done
			! alive "$p" || fail "rank process $p outlived its launcher"
		done
	fi
	pids+=($ranks)
	kill -9 "${pids[@]}" 2>/dev/null || true
	wait "$launcher" 2>/dev/null || true
	for p in $ranks; do
		for _ in $(seq 250); do alive "$p" || break; sleep 0.02; done
		! alive "$p" || fail "rank process $p survived kill -9"
	done
	pids=()
	killed_at=$(grep '^step ' "$work/a$attempt.out" | tail -1 | awk '{print $2}')
	! grep -q '^final-digest' "$work/a$attempt.out" || fail "the run finished before it was killed"
	# What the killed run printed matches the reference so far.
	diff <(upto "$work/a$attempt.out" "${killed_at:-0}") <(upto "$work/ref.out" "${killed_at:-0}") >&2 ||
		fail "attempt $attempt: the killed run diverged from the reference before the kill"

	t1=$SECONDS
	"$BIN/trainer" "${args[@]}" --root "$root" >"$work/b$attempt.out" 2>"$work/b$attempt.err" ||
		{ cat "$work/b$attempt.out" "$work/b$attempt.err" >&2; fail "attempt $attempt: relaunch failed"; }
	resumed=$(sed -n 's/^resumed from step \([0-9]*\)$/\1/p' "$work/b$attempt.out")
	[ -n "$resumed" ] || { cat "$work/b$attempt.out" >&2; fail "attempt $attempt: the relaunch did not resume"; }
	[ "$resumed" -gt 0 ] && [ "$resumed" -le "$killed_at" ] ||
		fail "attempt $attempt: resumed from step $resumed after a kill at step $killed_at"
	got=$(digest "$work/b$attempt.out")
	[ "$got" = "$ref" ] || fail "attempt $attempt: final digest $got, reference $ref"
	diff <(after "$work/b$attempt.out" "$resumed") <(after "$work/ref.out" "$resumed") >&2 ||
		fail "attempt $attempt: loss lines after step $resumed differ from the reference"
	[ "$(after "$work/b$attempt.out" "$resumed" | wc -l)" -eq $((steps - resumed)) ] ||
		fail "attempt $attempt: expected a loss line for every step after $resumed"
	echo "attempt $attempt: killed at step $killed_at (target $target), resumed from step $resumed," \
	     "relaunch $((SECONDS - t1)) s: digest ok, $((steps - resumed)) loss lines equal"
done

# A job stopped cleanly and continued with more steps ends where the
# uninterrupted run does.
"$BIN/trainer" "${base[@]}" --steps 150 --root "$work/ext" >"$work/ext1.out" 2>&1 || fail "first half failed"
"$BIN/trainer" "${args[@]}" --root "$work/ext" >"$work/ext2.out" 2>&1 || fail "second half failed"
grep -q '^resumed from step 150$' "$work/ext2.out" || fail "extended job: not resumed from step 150"
[ "$(digest "$work/ext2.out")" = "$ref" ] || fail "extended job: another digest"
echo "stop at step 150 and continue: digest ok"

if [ "$dev" = cuda ]; then
	# One rank per GPU takes the NCCL path (several ranks on one GPU go
	# through host memory): check that path stops and resumes exactly too.
	one=(--device cuda --ranks 1 --ckpt-every 10 --seed 3)
	"$BIN/trainer" "${one[@]}" --steps 60 --root "$work/n0" >"$work/n0.out" 2>"$work/n0.err" ||
		{ cat "$work/n0.err" >&2; fail "1-rank CUDA run failed"; }
	"$BIN/trainer" "${one[@]}" --steps 30 --root "$work/n1" >"$work/n1a.out" 2>&1 || fail "1-rank first half"
	"$BIN/trainer" "${one[@]}" --steps 60 --root "$work/n1" >"$work/n1b.out" 2>&1 || fail "1-rank second half"
	grep -q '^resumed from step 30$' "$work/n1b.out" || fail "1-rank: not resumed from step 30"
	[ "$(digest "$work/n1b.out")" = "$(digest "$work/n0.out")" ] || fail "1-rank CUDA: another digest"
	echo "1 rank ($(grep -o 'collectives [A-Za-z]*' "$work/n0.err" || true)): stop and resume: digest ok"
fi

# A finished job started again has nothing left to do and says the same.
"$BIN/trainer" "${args[@]}" --root "$work/run1" >"$work/again.out" 2>"$work/again.err" ||
	fail "restart of a finished job failed"
grep -q "^resumed from step $steps\$" "$work/again.out" || fail "finished job: not resumed from step $steps"
[ "$(digest "$work/again.out")" = "$ref" ] || fail "finished job: another digest"
echo "resume ($dev): ok in $SECONDS s"
