#!/usr/bin/env bash
# The reference trainer through ckptd, preempted as a cluster preempts it:
# a coordinator, agents n1 and n2 (node and partner DRAM pools), and a
# 2-rank trainer on n1 (CKPT_DAEMON = n1's socket; rank 1 is slow, so rank 0
# is blocked in a collective when the signal lands). SIGTERM to the trainer's
# launcher (what Kubernetes and systemd signal) is passed on to the ranks:
# the coordinator picks one step, every rank saves it, it lands in partner
# DRAM on n2, and the ranks leave; the launcher says "preempted at step S"
# and exits 0. Then n1 is gone (agent killed, its disk deleted) and the
# same command on n2 resumes from S, out of partner DRAM, and ends with the
# final digest of a run that was never interrupted. Exit 77 without
# libfabric's tcp;ofi_rxm provider.
set -euo pipefail
BIN=${CKPT_BIN:?}
command -v python3 >/dev/null || exit 77
fi_info -p 'tcp;ofi_rxm' >/dev/null 2>&1 || { echo "skip: no tcp;ofi_rxm provider"; exit 77; }
w=$(mktemp -d "${TMPDIR:-/tmp}/trainer-preempt-XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$w"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$w"/*.log "$w"/*.out "$w"/*.err; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 25 "$f" >&2; }; done; exit 1; }
free_port() { python3 -c 'import socket,sys; s=socket.socket(); s.bind((sys.argv[1],0)); print(s.getsockname()[1])' "$1"; }
unset CKPT_DAEMON CKPT_TOKEN CKPT_INTERVAL CKPT_FAULT CKPT_SHARED_DIR CKPT_RESTORE_ORDER
(umask 077; head -c 48 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$w/token")
cport=$(free_port 127.0.0.1)

daemon() { # name flags...
	local name=$1; shift
	mkdir -p "$w/$name.root"
	"$BIN/ckptd" --token-file "$w/token" --root "$w/$name.root" --node "$name" "$@" >"$w/$name.log" 2>&1 &
	pids+=($!)
	eval "pid_$name=$!"
}
daemon coord --role coordinator --listen "127.0.0.1:$cport" --agent-grace 300s
for k in 1 2; do
	daemon "n$k" --role agent --coordinator "127.0.0.1:$cport" --listen "127.0.0.$k:$(free_port 127.0.0.$k)" \
		--socket "$w/n$k.sock" --pool-size 64M --peer-pool-size 64M
done
ok=
for _ in $(seq 100); do
	n=$("$BIN/ckpt" status --daemon "127.0.0.1:$cport" --token-file "$w/token" --json 2>/dev/null |
		python3 -c 'import json,sys; print(sum(a["state"] == "up" for a in json.load(sys.stdin)["agents"]))' 2>/dev/null || echo 0)
	[ "$n" = 2 ] && [ -S "$w/n1.sock" ] && [ -S "$w/n2.sock" ] && { ok=1; break; }
	sleep 0.1
done
[ -n "$ok" ] || fail "the agents did not come up"

args=(--ranks 2 --steps 160 --ckpt-every 20 --seed 5 --log-every 1 --job tp)
"$BIN/trainer" "${args[@]}" --root "$w/ref" >"$w/ref.out" 2>"$w/ref.err" || fail "reference run"
ref=$(tail -1 "$w/ref.out")
case $ref in final-digest*) ;; *) fail "no final digest in the reference run";; esac

on_node() { # node: the environment of a rank on that node
	echo CKPT_DAEMON="unix:$w/$1.sock" CKPT_TOKEN_FILE="$w/token" CKPT_TIERS=local_mem,peer_mem,local_disk \
		CKPT_PREEMPT_GRACE_MS=40000 CKPT_FABRIC_PROVIDER='tcp;ofi_rxm' FI_TCP_IFACE=lo CKPT_DEBUG=INFO
}
env $(on_node n1) "$BIN/trainer" "${args[@]}" --root "$w/n1.ranks" --step-ms 40 --slow-rank 1 >"$w/a.out" 2>"$w/a.err" &
launcher=$!
pids+=("$launcher")
# A few seconds of step reports first: the coordinator picks the step from them.
for _ in $(seq 600); do
	grep -q "^step 70 " "$w/a.out" && break
	kill -0 "$launcher" 2>/dev/null || fail "the trainer ended early"
	sleep 0.05
done
grep -q "^step 70 " "$w/a.out" || fail "the trainer did not reach step 70"
kill -TERM "$launcher"
set +e
wait "$launcher"
rc=$?
set -e
[ "$rc" = 0 ] || fail "the preempted trainer exited $rc, want 0"
grep -q "^preempted at step " "$w/a.out" || fail "the launcher did not say it was preempted"
grep -q "final-digest" "$w/a.out" && fail "the run finished before the signal"
# The emergency version: every rank saved it, it is committed, and partner
# copies of it are on n2.
S=$(grep -h "emergency checkpoint: save at step" "$w/a.err" | sed -n 's/.*save at step \([0-9]*\).*/\1/p' | sort -u)
[ -n "$S" ] && [ "$(echo "$S" | wc -l)" = 1 ] || fail "the ranks were not told one emergency step: '$S'"
grep -q "emergency checkpoint at step $S" "$w/coord.log" || fail "the coordinator logged no decision for step $S"
"$BIN/ckpt" ls --daemon "127.0.0.1:$cport" --token-file "$w/token" --job tp --json >"$w/ls.json" ||
	fail "ckpt ls --daemon"
python3 - "$w/ls.json" "$S" <<'PY' || fail "version $S is not committed at peer_mem: $(cat "$w/ls.json")"
import json, sys
v = [e for e in json.load(open(sys.argv[1])) if e["version"] == int(sys.argv[2])]
sys.exit(0 if v and v[0]["state"] == "COMMITTED" and "peer_mem" in v[0]["tiers"] else 1)
PY
grep -q "emergency version $S is safe" "$w/coord.log" || fail "the coordinator did not end the emergency"

# n1 is gone: its agent and its disk.
{ kill -9 "$pid_n1"; wait "$pid_n1"; } 2>/dev/null || true
rm -rf "$w/n1.ranks" "$w/n1.root"
env $(on_node n2) "$BIN/trainer" "${args[@]}" --root "$w/n2.ranks" >"$w/b.out" 2>"$w/b.err" ||
	fail "the relaunch on n2 exited $?"
# The newest committed version: the emergency step, or a later interval
# save (--ckpt-every) made while the ranks waited for EXIT.
R=$(sed -n 's/^resumed from step \([0-9]*\)$/\1/p' "$w/b.out")
[ -n "$R" ] && [ "$R" -ge "$S" ] || fail "the relaunch did not resume from the emergency step $S or later: $(grep -h "resumed\|fresh" "$w/b.out")"
grep -q "restored from PEER_MEM\|restored from LOCAL_MEM" "$w/b.err" || fail "the relaunch did not restore from DRAM"
[ "$(tail -1 "$w/b.out")" = "$ref" ] || fail "resumed run ends '$(tail -1 "$w/b.out")', want '$ref'"
grep -q "ckpt ERROR" "$w/b.err" && fail "the relaunch logged an ERROR"
echo "ok: SIGTERM to the launcher at step ~70: emergency step $S in partner DRAM, exit 0; n1 lost; resumed on n2 from $R, $ref"
