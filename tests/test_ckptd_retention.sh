#!/usr/bin/env bash
# Deletion through the daemon (--role both): ckpt rm --daemon and ckpt gc
# --daemon mark copies in the coordinator, the agent deletes DRAM segments
# and the files under the rank's root, and the coordinator forgets them.
# Crash safety: the agent killed after deleting files but before dropping
# its records (fault agent.after_disk_delete), and inside libckpt's own
# deletion (gc.mid_delete), finishes the deletion when it restarts.
set -euo pipefail
BIN=${CKPT_BIN:?}
command -v python3 >/dev/null || exit 77
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-retention-XXXXXX")
pid=
stop() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	pid=
}
cleanup() { stop; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$tmp/ckptd.log" ] && tail -n 40 "$tmp/ckptd.log" >&2; exit 1; }
j() { python3 -c 'import json,sys; d=json.load(sys.stdin); exec(sys.argv[1])' "$1"; }

umask 077
head -c 48 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token"
chmod 600 "$tmp/token"
sock=$tmp/ckptd.sock
mkdir "$tmp/droot" "$tmp/root"
export CKPT_TOKEN_FILE=$tmp/token
unset CKPT_TOKEN CKPT_DAEMON

# start [FAULT]: the daemon, with CKPT_FAULT=FAULT when given.
start() {
	rm -f "$sock"
	CKPT_FAULT=${1:-} "$BIN/ckptd" --role both --socket "$sock" --root "$tmp/droot" --node n0 \
		--pool-size 64M --job-pool-size 16M --retention-interval 0 >>"$tmp/ckptd.log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do
		[ -S "$sock" ] && break
		kill -0 "$pid" 2>/dev/null || fail "ckptd exited"
		sleep 0.1
	done
	[ -S "$sock" ] || fail "ckptd did not come up"
}

daemon_versions() { # the versions the coordinator lists, space-separated
	"$BIN/ckpt" ls --daemon "unix:$sock" --job jr --json | j 'print(" ".join(str(x["version"]) for x in d))'
}
root_versions() {
	"$BIN/ckpt" ls --root "$tmp/root" --job jr --json | j 'print(" ".join(str(x["version"]) for x in d))'
}
# wait_for WHAT WANT: polls daemon_versions/root_versions until it prints WANT.
wait_for() {
	local got=
	for _ in $(seq 200); do
		got=$($1) || true
		[ "$got" = "$2" ] && return 0
		sleep 0.1
	done
	fail "$1: got '$got', want '$2'"
}
shard() { echo "$tmp/root/jobs/jr/v$(printf '%020d' "$1")/r000000.ckpt"; }

start
for v in 2 4 6 8 10 12 14; do
	head -c $((100000 + v)) /dev/urandom >"$tmp/s$v.bin"
	"$BIN/ckpt" save --daemon "unix:$sock" --root "$tmp/root" --job jr --version $v --json "$tmp/s$v.bin" >"$tmp/save.json" ||
		fail "save $v"
	j 'assert d["committed"] and d["local_mem"], d' <"$tmp/save.json" || fail "save --daemon: $(cat "$tmp/save.json")"
done
wait_for daemon_versions "2 4 6 8 10 12 14"
wait_for root_versions "2 4 6 8 10 12 14"
[ -e "$(shard 4)" ] || fail "layout: $(shard 4) missing; $(find "$tmp/root" -name '*.ckpt' | head -3)"

# verify --daemon: the agent reads every copy it holds.
"$BIN/ckpt" verify --daemon "unix:$sock" --job jr --version 14 --json >"$tmp/v.json" || fail "verify 14: $(cat "$tmp/v.json")"
j 'assert sorted((c["tier"], c["ok"]) for c in d["copies"]) == [("local_disk", True), ("local_mem", True)] and d["restorable"], d' \
	<"$tmp/v.json" || fail "verify 14: $(cat "$tmp/v.json")"
# A compressed disk file differs from its DRAM image (and from the checksum
# the coordinator keeps for the shard): both copies still verify and restore.
python3 -c 'import sys; sys.stdout.buffer.write(b"ckpt " * 40000)' >"$tmp/z.bin"
"$BIN/ckpt" save --daemon "unix:$sock" --root "$tmp/root" --job jz --version 1 --compress --json "$tmp/z.bin" >"$tmp/save.json" ||
	fail "compressed save"
j 'assert d["stored_bytes"] < d["bytes"] // 4 and d["local_mem"], d' <"$tmp/save.json" || fail "not compressed: $(cat "$tmp/save.json")"
"$BIN/ckpt" verify --daemon "unix:$sock" --job jz --version 1 --json >"$tmp/v.json" || fail "verify compressed: $(cat "$tmp/v.json")"
j 'assert sorted((c["tier"], c["ok"]) for c in d["copies"]) == [("local_disk", True), ("local_mem", True)], d' <"$tmp/v.json" ||
	fail "verify compressed: $(cat "$tmp/v.json")"
"$BIN/ckpt" rm --daemon "unix:$sock" --job jz --version 1 --tiers local_mem >/dev/null || fail "rm jz DRAM"
"$BIN/ckpt" restore --daemon "unix:$sock" --job jz --version 1 --out "$tmp/oz" --json >"$tmp/r.json" || fail "restore compressed"
j 'assert d["from_local_disk"] == 1, d' <"$tmp/r.json" || fail "restore jz: $(cat "$tmp/r.json")"
cmp -s "$tmp/oz/z.bin" "$tmp/z.bin" || fail "restore of the compressed file: bytes differ"
# A flipped data byte in a file: that copy is CORRUPT (exit 3), the DRAM one intact.
python3 - "$(shard 10)" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(4096 + 777); b = f.read(1); f.seek(4096 + 777); f.write(bytes([b[0] ^ 0x5a]))
PY
set +e
"$BIN/ckpt" verify --daemon "unix:$sock" --job jr --version 10 --json >"$tmp/v.json" 2>"$tmp/err"
rc=$?
set -e
[ $rc -eq 3 ] || fail "verify of a damaged file: exit $rc: $(cat "$tmp/v.json" "$tmp/err")"
j 'c={x["tier"]: x for x in d["copies"]}; assert not c["local_disk"]["ok"] and "checksum" in c["local_disk"]["error"] and c["local_mem"]["ok"] and d["restorable"], d' \
	<"$tmp/v.json" || fail "verify 10: $(cat "$tmp/v.json")"
# restore --daemon reads this node's copies: DRAM first (14), the DRAM copy
# when the file is damaged (10).
for v in 14 10; do
	"$BIN/ckpt" restore --daemon "unix:$sock" --job jr --version $v --out "$tmp/o$v" --json >"$tmp/r.json" ||
		fail "restore --daemon $v"
	j 'assert d["from_local_mem"] == 1 and d["from_local_disk"] == 0, d' <"$tmp/r.json" || fail "restore $v: $(cat "$tmp/r.json")"
	cmp -s "$tmp/o$v/s$v.bin" "$tmp/s$v.bin" || fail "restore --daemon $v: bytes differ"
done
# A file gone: MISSING.
mv "$(shard 8)" "$tmp/v8.keep"
set +e
"$BIN/ckpt" verify --daemon "unix:$sock" --job jr --version 8 >"$tmp/v.txt" 2>&1
rc=$?
set -e
[ $rc -eq 3 ] && grep "local_disk on n0: MISSING" "$tmp/v.txt" >/dev/null || fail "verify of a missing file: exit $rc: $(cat "$tmp/v.txt")"
mv "$tmp/v8.keep" "$(shard 8)"

# rm of one version: every copy goes, files first.
"$BIN/ckpt" rm --daemon "unix:$sock" --job jr --version 4 --json >"$tmp/rm.json" || fail "rm --daemon"
j 'assert d["copies"] == 2, d' <"$tmp/rm.json" || fail "rm marked $(cat "$tmp/rm.json")"
wait_for daemon_versions "2 6 8 10 12 14"
wait_for root_versions "2 6 8 10 12 14"
[ ! -e "$(shard 4)" ] || fail "version 4's file is still there"
set +e
"$BIN/ckpt" rm --daemon "unix:$sock" --job jr --version 4 >/dev/null 2>"$tmp/err"
rc=$?
set -e
[ $rc -eq 4 ] || fail "rm of a deleted version: exit $rc, want 4: $(cat "$tmp/err")"

# rm of the DRAM copy only: the disk copy stays.
"$BIN/ckpt" rm --daemon "unix:$sock" --job jr --version 12 --tiers local_mem >/dev/null || fail "rm --tiers"
"$BIN/ckpt" show --daemon "unix:$sock" --job jr --version 12 --json >"$tmp/show.json" || fail "show 12"
j 'assert [c["tier"] for c in d["copies"]] == ["local_disk"] and d["restorable"], d' <"$tmp/show.json" ||
	fail "after rm --tiers local_mem: $(cat "$tmp/show.json")"
[ -e "$(shard 12)" ] || fail "version 12's file went with its DRAM copy"
"$BIN/ckpt" restore --daemon "unix:$sock" --job jr --version 12 --out "$tmp/o12" --json >"$tmp/r.json" ||
	fail "restore --daemon 12"
j 'assert d["from_local_mem"] == 0 and d["from_local_disk"] == 1, d' <"$tmp/r.json" || fail "restore 12: $(cat "$tmp/r.json")"
cmp -s "$tmp/o12/s12.bin" "$tmp/s12.bin" || fail "restore --daemon 12 (disk): bytes differ"
set +e
"$BIN/ckpt" restore --daemon "unix:$sock" --job jr --version 4 --out "$tmp/o4" >/dev/null 2>"$tmp/err"
rc=$?
set -e
[ $rc -eq 4 ] || fail "restore --daemon of a deleted version: exit $rc: $(cat "$tmp/err")"

# gc with a policy: DRAM of the newest 1, disk of the newest 2, every 6th forever.
"$BIN/ckpt" gc --daemon "unix:$sock" --job jr --keep-dram 1 --keep-disk 2 --keep-every 6 >/dev/null || fail "gc"
wait_for root_versions "6 12 14"
wait_for daemon_versions "6 12 14"
"$BIN/ckpt" show --daemon "unix:$sock" --job jr --version 14 --json >"$tmp/show.json" || fail "show 14"
j 'assert sorted(c["tier"] for c in d["copies"]) == ["local_disk", "local_mem"], d' <"$tmp/show.json" ||
	fail "newest version lost a copy: $(cat "$tmp/show.json")"
"$BIN/ckpt" show --daemon "unix:$sock" --job jr --version 6 --json >"$tmp/show.json" || fail "show 6"
j 'assert [c["tier"] for c in d["copies"]] == ["local_disk"], d' <"$tmp/show.json" ||
	fail "version 6 kept DRAM or lost disk: $(cat "$tmp/show.json")"
# A new policy replaces the old one: 6 is no longer kept forever, 12 is
# (12 % 4 == 0); the newest restorable version is never deleted.
"$BIN/ckpt" gc --daemon "unix:$sock" --job jr --keep 1 --keep-every 4 --json >"$tmp/gc.json" || fail "gc --keep 1"
j 'assert d["copies"] == 1, d' <"$tmp/gc.json" || fail "gc --keep 1: $(cat "$tmp/gc.json")"
wait_for root_versions "12 14"
wait_for daemon_versions "12 14"

# A version number of another job touches nothing of this one.
set +e
out=$("$BIN/ckpt" rm --daemon "unix:$sock" --job other --version 14 2>&1)
rc=$?
set -e
[ $rc -eq 4 ] || fail "rm in another job: exit $rc: $out"
wait_for root_versions "12 14"

# Crash after the files went, before the agent dropped its records: the
# restarted daemon finishes, and nothing lists version 12 again.
stop
start "agent.after_disk_delete=kill"
"$BIN/ckpt" rm --daemon "unix:$sock" --job jr --version 12 >/dev/null 2>&1 || true
for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "the fault did not kill the agent"
wait "$pid" 2>/dev/null || true
pid=
grep -q "finishing a deletion" "$tmp/ckptd.log" && fail "finished before the restart?"
start
# The socket can appear before the agent has gone through its index (and
# the log line is written): poll for it.
for _ in $(seq 100); do
	grep -q "finishing a deletion a previous run left" "$tmp/ckptd.log" && break
	sleep 0.1
done
grep -q "finishing a deletion a previous run left" "$tmp/ckptd.log" || fail "restart did not finish the deletion"
wait_for root_versions "14"
wait_for daemon_versions "14"

# Crash inside libckpt's deletion (files half removed): finished on restart.
for v in 16 18; do
	head -c 70000 /dev/urandom >"$tmp/s$v.bin"
	CKPT_DAEMON="unix:$sock" CKPT_TIERS=local_mem,local_disk \
		"$BIN/ckpt" save --root "$tmp/root" --job jr --version $v "$tmp/s$v.bin" >/dev/null || fail "save $v"
done
wait_for daemon_versions "14 16 18"
stop
start "gc.mid_delete=kill"
"$BIN/ckpt" rm --daemon "unix:$sock" --job jr --version 16 >/dev/null 2>&1 || true
for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "gc.mid_delete did not kill the agent"
wait "$pid" 2>/dev/null || true
pid=
"$BIN/ckpt" ls --root "$tmp/root" --job jr --json | j 'assert [x["state"] for x in d if x["version"]==16] == ["DELETING"], d' ||
	fail "version 16 is not DELETING after the crash"
start
wait_for root_versions "14 18"
wait_for daemon_versions "14 18"
[ ! -e "$(shard 16)" ] || fail "version 16's file survived"
# The coordinator's own schedule: its --keep-* defaults for a job without a
# policy (jp), and each job's own (jr's keep 1 now drops 14: 14 % 4 != 0).
stop
rm -f "$sock"
"$BIN/ckptd" --role both --socket "$sock" --root "$tmp/droot" --node n0 --pool-size 64M \
	--job-pool-size 16M --retention-interval 200ms --keep-dram 1 --keep-disk 2 >>"$tmp/ckptd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
for v in 1 2 3 4; do
	head -c 5000 /dev/urandom >"$tmp/p$v.bin"
	CKPT_DAEMON="unix:$sock" CKPT_TIERS=local_mem,local_disk \
		"$BIN/ckpt" save --root "$tmp/root" --job jp --version $v "$tmp/p$v.bin" >/dev/null || fail "save jp $v"
done
jp_versions() { "$BIN/ckpt" ls --root "$tmp/root" --job jp --json | j 'print(" ".join(str(x["version"]) for x in d))'; }
wait_for jp_versions "3 4"
"$BIN/ckpt" show --daemon "unix:$sock" --job jp --version 3 --json >"$tmp/show.json" || fail "show jp 3"
j 'assert [c["tier"] for c in d["copies"]] == ["local_disk"], d' <"$tmp/show.json" ||
	fail "jp 3 kept its DRAM copy: $(cat "$tmp/show.json")"
wait_for root_versions "18"

# What is left restores bit-exact.
"$BIN/ckpt" restore --root "$tmp/root" --job jr --version 18 --out "$tmp/out" >/dev/null || fail "restore 18"
cmp -s "$tmp/out/s18.bin" "$tmp/s18.bin" || fail "restored bytes differ"
echo "retention: ok"
