#!/usr/bin/env bash
# SIGTERM to a real rank program (ckpt-example, linked against the built
# libckpt.so, started by exec as a launcher starts it) is a preemption
# notice: the rank saves the next step, leaves with status 0 and says so;
# relaunched, it resumes from that step and ends bit-identical to a run that
# was never interrupted. SIGUSR1 (Slurm's --signal) the same. On Debian,
# libfabric pulls in libinfinipath, whose constructor installs a SIGTERM
# handler that exits with status 1; a program that loads libfabric before
# libckpt (here with LD_PRELOAD, as an MPI library linked into a trainer
# would) must not be ended by it: the log names the handler left out.
# (libckpt's own lazy load of libfabric is preempt_sigterm's case.)
set -euo pipefail
BIN=${CKPT_BIN:?}
work=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-presig-XXXXXX")
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.out; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }; done; exit 1; }
unset CKPT_DAEMON CKPT_INTERVAL CKPT_PREEMPT_SIGNALS CKPT_FAULT
export CKPT_DEBUG=INFO CKPT_PREEMPT_GRACE_MS=20000
args=(--job sig --rank 0 --world-size 1 --steps 400 --state-bytes 65536)
fab=$(ldconfig -p 2>/dev/null | sed -n 's/^[[:space:]]*libfabric\.so\.1 .*=> \(.*\)$/\1/p' | head -1)
psm=
[ -n "$fab" ] && ldd "$fab" | grep -q libinfinipath && psm=1
asan=$(ldd "$BIN/ckpt-example" | sed -n 's/^[[:space:]]*libasan\.so[^ ]* => \([^ ]*\) .*/\1/p' | head -1)
"$BIN/ckpt-example" --root "$work/ref" "${args[@]}" --ckpt-every 1000 >"$work/ref.out" 2>&1 || fail "reference run"
ref=$(tail -1 "$work/ref.out")

cases="TERM USR1"
[ -n "$fab" ] && cases="$cases TERM-preload"
for case in $cases; do
	sig=${case%-preload}
	root=$work/$case
	pre=()
	# An ASan build needs its runtime first in the preload list.
	[ "$case" != "$sig" ] && pre=(env LD_PRELOAD="${asan:+$asan }$fab")
	"${pre[@]}" "$BIN/ckpt-example" --root "$root" "${args[@]}" --ckpt-every 10 --step-ms 20 >"$work/$case.a.out" 2>&1 &
	pid=$!
	for _ in $(seq 300); do
		grep -q "step 10 saved" "$work/$case.a.out" && break
		kill -0 "$pid" 2>/dev/null || fail "SIG$sig: the rank ended before step 10"
		sleep 0.05
	done
	grep -q "step 10 saved" "$work/$case.a.out" || fail "SIG$sig: no save at step 10"
	kill -"$sig" "$pid"
	set +e
	wait "$pid"
	rc=$?
	set -e
	pid=
	[ "$rc" = 0 ] || fail "SIG$sig: the rank exited with status $rc, want 0 (saved and left)"
	X=$(sed -n 's/^rank 0: preempted at step \([0-9]*\)$/\1/p' "$work/$case.a.out")
	S=$(sed -n 's/^rank 0: step \([0-9]*\) saved$/\1/p' "$work/$case.a.out" | tail -1)
	[ -n "$X" ] || fail "SIG$sig: the rank did not say it was preempted"
	# The emergency version is the one the library says it committed as
	# such; on a slow machine an interval save may still land after it,
	# before the rank sees EXIT, and the relaunch then resumes from that.
	E=$(sed -n 's/.* v=\([0-9]*\): emergency checkpoint committed.*/\1/p' "$work/$case.a.out" | tail -1)
	[ -n "$E" ] && [ "$E" -gt 10 ] && [ "$E" -le "$X" ] || fail "SIG$sig: no emergency save after the signal (got: ${E:-none})"
	[ -n "$S" ] && [ "$S" -ge "$E" ] && [ "$S" -le "$X" ] || fail "SIG$sig: last save ${S:-none} is not between the emergency step $E and the exit at $X"
	grep -q "final-digest" "$work/$case.a.out" && fail "SIG$sig: the run finished before the signal"
	if [ "$case" = TERM-preload ] && [ -n "$psm" ]; then
		grep -q "libinfinipath.*signal 15" "$work/$case.a.out" ||
			fail "libckpt links libinfinipath, but the log does not say its SIGTERM handler is left out"
	fi
	"$BIN/ckpt-example" --root "$root" "${args[@]}" --ckpt-every 1000 >"$work/$case.b.out" 2>&1 || fail "SIG$sig: relaunch"
	grep -q "resumed from version $S at step $S" "$work/$case.b.out" || fail "SIG$sig: the relaunch did not resume from $S"
	[ "$(tail -1 "$work/$case.b.out")" = "$ref" ] || fail "SIG$sig: resumed run ends $(tail -1 "$work/$case.b.out"), want $ref"
	echo "ok: $case after step 10: emergency step $E (last save $S), left at $X with status 0, resumed bit-identical"
	[ "$case" != TERM-preload ] || [ -z "$psm" ] || echo "   (libinfinipath and its SIGTERM handler were loaded before libckpt)"
done
