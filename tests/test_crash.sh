#!/usr/bin/env bash
# kill -9 of a saving process at every named point of the save path, at
# random moments, and in the middle of gc: afterwards every COMMITTED version
# restores bit-exact, the interrupted one is never COMMITTED, and a restarted
# process carries on.
set -euo pipefail
BIN=${CKPT_BIN:?}; TB=${CKPT_TESTS_BIN:?}
root=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-crash-XXXXXX")
trap 'rm -rf "$root"' EXIT
SIZE=1500000 REG=5
fail() { echo "FAIL: $*" >&2; exit 1; }

state_of() { # job version -> state or ABSENT
	"$BIN/ckpt" ls --root "$root" --job "$1" --json | python3 -c '
import json,sys
v=[x["state"] for x in json.load(sys.stdin) if x["version"]=='"$2"']
print(v[0] if v else "ABSENT")'
}

check() { # job rank world
	"$TB/rank_saver" check "$root" "$1" "$2" "$3" $SIZE $REG >/dev/null || fail "check of $1 rank $2"
}

run_killed() { # expect the command to die of SIGKILL
	set +e
	"$@" >/dev/null 2>"$root/err"
	local rc=$?
	set -e
	[ $rc -eq 137 ] || { cat "$root/err" >&2; fail "expected a kill, got exit $rc from: $*"; }
}

for point in save.before_data save.mid_data save.before_footer save.before_fsync \
             save.before_rename save.before_index_commit persist.chunk; do
	job="kill-${point//./-}"
	nth=2
	[ "$point" = persist.chunk ] && nth=40
	CKPT_FAULT="$point=$nth@kill" run_killed "$TB/rank_saver" save "$root" "$job" 0 1 1 3 $SIZE $REG
	[ "$(state_of "$job" 1)" = COMMITTED ] || fail "$point: version 1 not committed"
	s2=$(state_of "$job" 2)
	[ "$s2" != COMMITTED ] || fail "$point: version 2 committed after a kill at $point"
	check "$job" 0 1
	"$BIN/ckpt" verify --root "$root" --job "$job" >/dev/null || fail "$point: verify"
	# The restarted process saves version 2 again and goes on.
	"$TB/rank_saver" save "$root" "$job" 0 1 2 4 $SIZE $REG >/dev/null || fail "$point: restart"
	for v in 1 2 3 4; do [ "$(state_of "$job" $v)" = COMMITTED ] || fail "$point: v$v after restart"; done
	check "$job" 0 1
	echo "kill at $point ($nth): ok (version 2 was $s2)"
done

# The same kills with recycling on: gc fills the root's pool, and the
# killed save (and the restarted one) overwrite pooled files of deleted
# versions. Nothing of the killed save or of the old versions is offered.
pool_count() { find "$root/recycle" -maxdepth 1 -name 'p*.free' -type f 2>/dev/null | wc -l; }
for point in save.before_data save.mid_data save.before_footer save.before_fsync \
             save.before_rename save.before_index_commit persist.chunk; do
	job="rkill-${point//./-}"
	nth=2
	[ "$point" = persist.chunk ] && nth=40
	CKPT_RECYCLE=1 "$TB/rank_saver" save "$root" "$job" 0 1 1 3 $SIZE $REG >/dev/null || fail "$point: recycled setup"
	"$BIN/ckpt" gc --root "$root" --job "$job" --keep 1 >/dev/null || fail "$point: gc"
	before=$(pool_count)
	[ "$before" -ge 2 ] || fail "$point: gc left $before files in the pool"
	CKPT_RECYCLE=1 CKPT_FAULT="$point=$nth@kill" run_killed "$TB/rank_saver" save "$root" "$job" 0 1 4 6 $SIZE $REG
	[ "$(pool_count)" -lt "$before" ] || fail "$point: no pooled file was reused"
	[ "$(state_of "$job" 4)" = COMMITTED ] || fail "$point (recycled): version 4 not committed"
	[ "$(state_of "$job" 5)" != COMMITTED ] || fail "$point (recycled): version 5 committed after a kill"
	for v in 1 2; do [ "$(state_of "$job" $v)" = ABSENT ] || fail "$point (recycled): v$v back"; done
	CKPT_RECYCLE=1 check "$job" 0 1
	"$BIN/ckpt" verify --root "$root" --job "$job" >/dev/null || fail "$point (recycled): verify"
	CKPT_RECYCLE=1 "$TB/rank_saver" save "$root" "$job" 0 1 5 6 $SIZE $REG >/dev/null || fail "$point (recycled): restart"
	for v in 3 4 5 6; do [ "$(state_of "$job" $v)" = COMMITTED ] || fail "$point (recycled): v$v after restart"; done
	CKPT_RECYCLE=1 check "$job" 0 1
	"$BIN/ckpt" verify --root "$root" --job "$job" >/dev/null || fail "$point (recycled): verify after restart"
	echo "kill at $point ($nth) with recycling: ok"
done

# Two ranks; rank 1 dies before its index commit of version 3: version 3
# stays PENDING and latest is 2 for both ranks.
job=two-ranks
"$TB/rank_saver" save "$root" $job 0 2 1 3 $SIZE $REG >/dev/null &
p0=$!
CKPT_FAULT="save.before_index_commit=3@kill" run_killed "$TB/rank_saver" save "$root" $job 1 2 1 3 $SIZE $REG
wait $p0 || fail "rank 0 of $job"
[ "$(state_of $job 2)" = COMMITTED ] || fail "$job v2"
[ "$(state_of $job 3)" = PENDING ] || fail "$job v3 should be PENDING"
check $job 0 2
check $job 1 2
echo "rank killed before commit: ok"

# Random moments, from outside.
job=random
for i in 1 2 3 4 5 6; do
	"$TB/rank_saver" save "$root" $job 0 1 1 400 $SIZE $REG >/dev/null 2>&1 &
	pid=$!
	sleep "0.$((RANDOM % 6 + 1))"
	kill -9 $pid 2>/dev/null || true
	wait $pid 2>/dev/null || true
	check $job 0 1
done
"$BIN/ckpt" verify --root "$root" --job $job >/dev/null || fail "verify after random kills"
echo "random kills: ok ($("$BIN/ckpt" ls --root "$root" --job $job --json | python3 -c 'import json,sys; print(sum(1 for x in json.load(sys.stdin) if x["state"]=="COMMITTED"))') committed)"

# Mid-gc: the interrupted deletion leaves a DELETING version, never restored,
# finished by the next gc.
job=gc
"$TB/rank_saver" save "$root" $job 0 1 1 5 $SIZE $REG >/dev/null
CKPT_FAULT="gc.mid_delete=kill" run_killed "$BIN/ckpt" gc --root "$root" --job $job --keep 2
[ "$(state_of $job 1)" = DELETING ] || fail "gc: version 1 should be DELETING, is $(state_of $job 1)"
check $job 0 1
"$BIN/ckpt" gc --root "$root" --job $job --keep 2 >/dev/null || fail "second gc"
for v in 1 2 3; do [ "$(state_of $job $v)" = ABSENT ] || fail "gc: v$v still there"; done
for v in 4 5; do [ "$(state_of $job $v)" = COMMITTED ] || fail "gc: v$v lost"; done
[ ! -e "$root/jobs/$job/v00000000000000000001" ] || fail "gc: files of v1 left"
check $job 0 1
# A context opened on the root finishes a deletion too.
CKPT_FAULT="gc.mid_delete=kill" run_killed "$BIN/ckpt" rm --root "$root" --job $job --version 4
[ "$(state_of $job 4)" = DELETING ] || fail "rm: v4 should be DELETING"
check $job 0 1
[ "$(state_of $job 4)" = ABSENT ] || fail "open did not finish the deletion of v4"
echo "gc kills: ok"

# Stale PENDING versions from crashed saves are collected by gc.
[ "$(state_of two-ranks 3)" = PENDING ]
"$BIN/ckpt" gc --root "$root" --job two-ranks --keep 5 >/dev/null
[ "$(state_of two-ranks 3)" = PENDING ] || fail "gc removed a pending version newer than all committed"
echo "crash: ok"
