#!/usr/bin/env bash
# ckpt save FILE streams its input through the staging pool:
#  1. a file several times the pool's size is saved with a peak RSS within
#     the pool (measured with wait4 on the child, against a save of a small
#     file as the baseline: reading it whole took the file's size more),
#     without the library's warning that a save outgrew its pool (meant for
#     memory state), and restores byte for byte;
#  2. a file changed in the middle of the save (after some chunks were read:
#     fault point save.file_read) fails it, naming the file, with nothing
#     committed: bytes rewritten in place, the file grown, the file shrunk;
#  3. recycled shard files are the default with --keep: the fourth save
#     overwrites the file of version 1, which the third one's retention
#     deleted (same inode), two versions stay; --no-recycle and a save
#     without --keep empty the pool; --keep with --daemon is refused (the
#     coordinator's retention rules there).
# Sizes: CKPT_TEST_SMALL (the sanitizer run) halves the file.
set -uo pipefail
BIN=${CKPT_BIN:?}
command -v python3 >/dev/null || { echo "SKIP: no python3 (to measure the child's peak RSS)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-save-stream-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }
unset CKPT_STAGING_BYTES CKPT_RECYCLE CKPT_KEEP_VERSIONS CKPT_FAULT CKPT_SNAPSHOT_OVERLAP CKPT_DAEMON

# peak_rss OUT CMD...: runs CMD, its peak RSS in KiB to OUT; returns its status.
peak_rss() {
	local out=$1
	shift
	python3 - "$out" "$@" <<'EOF'
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, ru = os.wait4(pid, 0)
open(sys.argv[1], "w").write("%d\n" % ru.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
EOF
}

mb=192
[ -n "${CKPT_TEST_SMALL:-}" ] && mb=96
pool_mb=16
python3 -c 'import os, sys; b = os.urandom(1 << 20); [sys.stdout.buffer.write(b[i:] + b[:i]) for i in range(int(sys.argv[1]))]' "$mb" >"$tmp/big.bin"
head -c 4096 /dev/urandom >"$tmp/small.bin"

# --- 1. memory within the pool
export CKPT_STAGING_BYTES=${pool_mb}M
peak_rss "$tmp/rss.small" "$BIN/ckpt" save --root "$tmp/r1" --job s --version 1 "$tmp/small.bin" >"$tmp/out" 2>&1 ||
	fail "save of a small file: $(cat "$tmp/out")"
peak_rss "$tmp/rss.big" "$BIN/ckpt" save --root "$tmp/r1" --job s --version 2 "$tmp/big.bin" >"$tmp/out" 2>&1 ||
	fail "save of a ${mb} MiB file: $(cat "$tmp/out")"
small=$(cat "$tmp/rss.small") big=$(cat "$tmp/rss.big")
# Streaming is the design here: no warning that the save outgrew its pool.
! grep -qi "staging pool of" "$tmp/out" || fail "the save of a file larger than the pool warns: $(cat "$tmp/out")"
# The small save's pool is one chunk (8 MiB): the big one may add the rest
# of its pool, and 8 MiB for what the kernel and libraries vary by.
limit=$((small + pool_mb * 1024 + 8192))
if [ "$big" -le "$limit" ]; then
	ok "${mb} MiB through a ${pool_mb} MiB pool: peak RSS $((big / 1024)) MiB (a 4 KiB file's save: $((small / 1024)) MiB)"
else
	fail "${mb} MiB through a ${pool_mb} MiB pool: peak RSS $((big / 1024)) MiB, over $((limit / 1024)) MiB (4 KiB file: $((small / 1024)) MiB)"
fi
"$BIN/ckpt" restore --root "$tmp/r1" --job s --version 2 --out "$tmp/back" >"$tmp/out" 2>&1 ||
	fail "restore: $(cat "$tmp/out")"
cmp -s "$tmp/back/big.bin" "$tmp/big.bin" && ok "restored byte for byte" || fail "the restored file differs"
unset CKPT_STAGING_BYTES

# --- 2. changed mid-save: 64 KiB chunks, a 2 s pause before the 4th
versions() { # ROOT JOB [STATE]: its versions (in that state), space-separated
	"$BIN/ckpt" ls --root "$1" --job "$2" --json 2>/dev/null | python3 -c '
import json, sys
print(" ".join(str(x["version"]) for x in json.load(sys.stdin) if len(sys.argv) < 2 or x["state"] == sys.argv[1]))' ${3:+"$3"}
}
# A failed save leaves its version PENDING (as any save that dies does;
# never restored, and ckpt gc removes it): it must not be COMMITTED.
listed() { case " $(versions "$tmp/r2" c COMMITTED) " in *" $1 "*) return 0 ;; esac; return 1; }
change_mid_save() { # label version expect-word command-that-changes-the-file
	local label=$1 v=$2 word=$3 pid rc
	shift 3
	head -c 1M /dev/urandom >"$tmp/c.bin"
	CKPT_FAULT=save.file_read=4@delay:2000 "$BIN/ckpt" save --root "$tmp/r2" --job c --version "$v" \
		--chunk-bytes 64K "$tmp/c.bin" >"$tmp/out" 2>&1 &
	pid=$!
	# The save has read its first three chunks once it says it pauses
	# before the fourth (for two seconds): change the file then.
	for _ in $(seq 400); do
		grep -q "fault point save.file_read: delay" "$tmp/out" 2>/dev/null && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	"$@"
	wait "$pid"
	rc=$?
	if [ "$rc" = 0 ]; then fail "$label: the save succeeded"
	elif ! grep -q "c.bin: the file $word while it was read; nothing saved" "$tmp/out"; then
		fail "$label: exit $rc without saying the file $word: $(cat "$tmp/out")"
	elif listed "$v"; then fail "$label: version $v was committed"
	elif "$BIN/ckpt" restore --root "$tmp/r2" --job c --version "$v" --out "$tmp/r2out$v" >/dev/null 2>&1; then
		fail "$label: version $v restores"
	else ok "$label mid-save: refused (exit $rc), nothing committed"; fi
}
change_mid_save "bytes rewritten" 1 changed \
	dd if=/dev/urandom of="$tmp/c.bin" bs=4096 count=1 seek=100 conv=notrunc status=none
change_mid_save "file grown" 2 changed sh -c "head -c 4096 /dev/urandom >>'$tmp/c.bin'"
change_mid_save "file shrunk" 3 shrank truncate -s 100000 "$tmp/c.bin"
# The same file left alone saves.
"$BIN/ckpt" save --root "$tmp/r2" --job c --version 4 --chunk-bytes 64K "$tmp/c.bin" >"$tmp/out" 2>&1 &&
	listed 4 || fail "a file left alone did not save: $(cat "$tmp/out")"

# --- 3. recycled shard files with --keep
shard() { printf '%s/jobs/k/v%020d/r000000.ckpt' "$tmp/r3" "$1"; }
for v in 1 2 3 4; do
	"$BIN/ckpt" save --root "$tmp/r3" --job k --version "$v" --keep 2 "$tmp/c.bin" >"$tmp/out" 2>&1 ||
		fail "save --keep 2 of version $v: $(cat "$tmp/out")"
	[ "$v" = 1 ] && ino1=$(stat -c %i "$(shard 1)")
done
vs=$(versions "$tmp/r3" k)
[ "$vs" = "3 4" ] || fail "--keep 2 left versions '$vs', not '3 4'"
[ -d "$tmp/r3/recycle" ] || fail "--keep made no pool of recycled files"
[ "$(stat -c %i "$(shard 4)")" = "$ino1" ] && ok "--keep 2: version 4 overwrote version 1's shard file (recycled by default)" ||
	fail "version 4's shard is not version 1's recycled file (inodes $(stat -c %i "$(shard 4)") and $ino1)"
[ "$(find "$tmp/r3/recycle" -name 'p*.free' | wc -l)" = 1 ] || fail "the pool does not hold version 2's file"
"$BIN/ckpt" save --root "$tmp/r3" --job k --version 5 --keep 2 --no-recycle "$tmp/c.bin" >"$tmp/out" 2>&1 ||
	fail "save --no-recycle: $(cat "$tmp/out")"
n=$(find "$tmp/r3/recycle" -name 'p*.free' 2>/dev/null | wc -l)
[ "$n" = 0 ] && ok "--no-recycle: the pool emptied" || fail "--no-recycle left $n pooled files"
"$BIN/ckpt" save --root "$tmp/r3" --job k --version 6 --keep 2 "$tmp/c.bin" >"$tmp/out" 2>&1 &&
	[ "$(find "$tmp/r3/recycle" -name 'p*.free' | wc -l)" = 1 ] || fail "save 6 --keep 2: no pooled file: $(cat "$tmp/out")"
"$BIN/ckpt" save --root "$tmp/r3" --job k --version 7 "$tmp/c.bin" >"$tmp/out" 2>&1 || fail "save 7: $(cat "$tmp/out")"
n=$(find "$tmp/r3/recycle" -name 'p*.free' 2>/dev/null | wc -l)
[ "$n" = 0 ] && ok "a save without --keep empties the pool" || fail "a save without --keep left $n pooled files"

# Through a daemon the coordinator's retention rules: --keep is refused there.
"$BIN/ckpt" save --root "$tmp/r4" --job k --version 1 --daemon "unix:$tmp/none.sock" --keep 2 "$tmp/c.bin" \
	>"$tmp/out" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "coordinator's retention" "$tmp/out" && ok "--keep with --daemon refused (exit 2)" ||
	fail "--keep with --daemon: exit $rc: $(cat "$tmp/out")"

[ "$fails" = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all passed"
