#!/usr/bin/env bash
# `ckpt preempt` says what really happened: for a job the coordinator does
# not know, and for one whose ranks do not report their steps (ckpt_step),
# no rank is told: exit 4 and "emergency": false, through the coordinator's
# TCP address and through an agent's socket alike. Notices from the tool are
# counted as ckpt_preempt_notices_total{source="cli"} (and a trigger file's
# as source="file", on the agent's counter too), and a noticed node
# comes back into partner placement once its deadline is past.
set -euo pipefail
BIN=${CKPT_BIN:?}
command -v python3 >/dev/null || exit 77
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-preempt-cli-XXXXXX")
pid=
cleanup() { stop_ckptd; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }; done; exit 1; }
. "$(dirname "$0")/metrics_lib.sh"

# The help says what --daemon serves (preempt among them), and what preempt's exit codes are.
"$BIN/ckpt" --help >"$tmp/help.txt" 2>&1 || true
grep -A2 -- "--daemon ADDR" "$tmp/help.txt" | grep -q preempt || fail "ckpt --help: --daemon does not list preempt"
grep -q -- "--daemon ADDR *ls, status:" "$tmp/help.txt" && fail "ckpt --help still says --daemon is for ls and status"
"$BIN/ckpt" preempt --help 2>&1 | grep -q "4 when no rank was" || fail "ckpt preempt --help does not give its exit codes"

make_token
mkdir "$tmp/ranks"
head -c 100000 /dev/urandom >"$tmp/a.bin"
mport=$(free_port)
cport=$(free_port)
start_ckptd d --listen "127.0.0.1:$cport" --metrics-listen "127.0.0.1:$mport" --notice-file "$tmp/notice" \
	--notice-interval 200ms

# preempt ADDR JOB NODE DEADLINE: JSON on $tmp/out.json, exit code in $rc.
preempt() {
	set +e
	env -u CKPT_TOKEN -u CKPT_DAEMON "$BIN/ckpt" preempt --daemon "$1" --token-file "$tmp/token" --job "$2" \
		--node "$3" --deadline "$4" --json >"$tmp/out.json" 2>"$tmp/err.txt"
	rc=$?
	set -e
}
json_is() { # json_is KEY VALUE (Python's repr of the value)
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if repr(d.get(sys.argv[2])) == sys.argv[3] else 1)' \
		"$tmp/out.json" "$1" "$2" || fail "$1 is not $2 in $(cat "$tmp/out.json")"
}

# An unknown job, through the coordinator's TCP address.
preempt "127.0.0.1:$cport" ghost n7 1s
[ "$rc" = 4 ] || fail "ckpt preempt for an unknown job exited $rc, want 4: $(cat "$tmp/err.txt")"
json_is emergency False
json_is jobs_told 0
grep -q "no rank was told" "$tmp/err.txt" || fail "no explanation on stderr: $(cat "$tmp/err.txt")"
grep -q "ranks save" "$tmp/out.json" "$tmp/err.txt" && fail "it still says the ranks will save"

# A job the coordinator knows (a save through the agent) whose ranks never
# call ckpt_step, through the agent's socket.
save quiet 1
preempt "unix:$sock" quiet n8 1s
[ "$rc" = 4 ] || fail "ckpt preempt for a job without step reports exited $rc, want 4: $(cat "$tmp/err.txt")"
json_is emergency False
json_is jobs_told 0

# Both notices counted under source="cli".
ok=
for _ in $(seq 50); do
	fetch "http://127.0.0.1:$mport/metrics" "$tmp/m.txt" >/dev/null
	[ "$(sample "$tmp/m.txt" ckpt_preempt_notices_total 'source="cli"')" = 2 ] && { ok=1; break; }
	sleep 0.1
done
[ -n "$ok" ] || fail "ckpt_preempt_notices_total{source=\"cli\"} is not 2: $(grep preempt_notices "$tmp/m.txt")"
grep -q 'ckpt_preempt_notices_total{source=""}' "$tmp/m.txt" && fail "a notice counted without its source"
# A notice from the agent's trigger-file poller: source="file" on both counters.
echo "deadline=2" >"$tmp/notice.new" && mv "$tmp/notice.new" "$tmp/notice"
ok=
for _ in $(seq 100); do
	fetch "http://127.0.0.1:$mport/metrics" "$tmp/m.txt" >/dev/null
	[ "$(sample "$tmp/m.txt" ckpt_agent_preempt_notices_total 'source="file"')" = 1 ] &&
		[ "$(sample "$tmp/m.txt" ckpt_preempt_notices_total 'source="file"')" = 1 ] && { ok=1; break; }
	sleep 0.1
done
[ -n "$ok" ] || fail "the trigger file's notice is not counted under source=\"file\": $(grep preempt_notices "$tmp/m.txt")"
grep -q 'preempt_notices_total{source=""}' "$tmp/m.txt" && fail "a notice counted without its source"

# The noticed nodes come back into placement a few seconds after the deadline.
for n in n7 n8; do
	ok=
	for _ in $(seq 150); do
		grep -q "node $n outlived its notice's deadline" "$tmp/d.log" && { ok=1; break; }
		sleep 0.1
	done
	[ -n "$ok" ] || fail "node $n stayed out of partner placement after its deadline"
done
echo "ok: ckpt preempt reports that nobody was told (exit 4), counts source=cli, readmits the nodes"
