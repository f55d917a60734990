#!/usr/bin/env bash
# ckpt ls/status --daemon against a real ckptd (--role both), over its Unix
# socket and over TCP; a wrong token is refused with exit 1.
set -euo pipefail
BIN=${CKPT_BIN:?}
command -v python3 >/dev/null || exit 77
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-cli-daemon-XXXXXX")
pid=
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$tmp/ckptd.log" ] && tail -n 30 "$tmp/ckptd.log" >&2; exit 1; }
j() { python3 -c 'import json,sys; d=json.load(sys.stdin); exec(sys.argv[1])' "$1"; }
code() { set +e; "$@" >"$tmp/out" 2>"$tmp/err"; echo $?; set -e; }

umask 077
head -c 48 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token"
chmod 600 "$tmp/token"
head -c 40 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/bad"
chmod 600 "$tmp/bad"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sock=$tmp/ckptd.sock
mkdir "$tmp/droot" "$tmp/root"
env -u CKPT_TOKEN "$BIN/ckptd" --role both --socket "$sock" --listen "127.0.0.1:$port" \
	--token-file "$tmp/token" --root "$tmp/droot" --node n0 --pool-size 64M 2>"$tmp/ckptd.log" &
pid=$!
for _ in $(seq 100); do
	[ -S "$sock" ] && python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1",int(sys.argv[1])),1)' "$port" 2>/dev/null && break
	kill -0 "$pid" 2>/dev/null || fail "ckptd exited"
	sleep 0.1
done
[ -S "$sock" ] || fail "ckptd did not come up"

head -c 200000 /dev/urandom >"$tmp/a.bin"
CKPT_DAEMON="unix:$sock" CKPT_TOKEN_FILE="$tmp/token" CKPT_TIERS=local_mem,local_disk \
	"$BIN/ckpt" save --root "$tmp/root" --job jd --version 3 "$tmp/a.bin" >/dev/null || fail "save through the daemon"

for addr in "unix:$sock" "127.0.0.1:$port"; do
	ok=
	for _ in $(seq 50); do # the commit at each tier is announced asynchronously
		if "$BIN/ckpt" ls --daemon "$addr" --token-file "$tmp/token" --job jd --json >"$tmp/ls.json" &&
			j 'v=[x for x in d if x["version"]==3]; assert v and v[0]["state"]=="COMMITTED" and "local_mem" in v[0]["tiers"], d' <"$tmp/ls.json"; then
			ok=1
			break
		fi
		sleep 0.1
	done
	[ -n "$ok" ] || fail "ls --daemon $addr: $(cat "$tmp/ls.json")"
	"$BIN/ckpt" ls --daemon "$addr" --token-file "$tmp/token" --job jd | grep "local_mem" >/dev/null || fail "ls table $addr"
	CKPT_TOKEN=$(cat "$tmp/token") "$BIN/ckpt" ls --daemon "$addr" --job jd --json | j 'assert any(x["version"]==3 for x in d), d' ||
		fail "ls with CKPT_TOKEN"
	"$BIN/ckpt" status --daemon "$addr" --token-file "$tmp/token" --json >"$tmp/st.json" || fail "status $addr"
	j 'assert d["node"]=="n0" and "agent" in d["roles"] and "coordinator" in d["roles"], d' <"$tmp/st.json" || fail "status json $addr"
	j 't={x["tier"]: x for x in d["tiers"]}; assert t["local_mem"]["versions"]==1 and t["local_disk"]["versions"]==1 and t["peer_mem"]["versions"]==0 and t["local_disk"]["bytes"]>=200000 and d["versions"]==1, d' <"$tmp/st.json" ||
		fail "status per tier $addr: $(cat "$tmp/st.json")"
	"$BIN/ckpt" status --daemon "$addr" --token-file "$tmp/token" | grep "node n0" >/dev/null || fail "status text $addr"
	[ "$(code "$BIN/ckpt" ls --daemon "$addr" --token-file "$tmp/bad" --job jd)" = 1 ] || fail "wrong token: not 1"
	grep -q "refused the token" "$tmp/err" || fail "wrong token message: $(cat "$tmp/err")"
	if grep -qF "$(cat "$tmp/bad")" "$tmp/err" "$tmp/out"; then fail "the token was printed"; fi
	[ "$(code "$BIN/ckpt" status --daemon "$addr" --token-file "$tmp/bad")" = 1 ] || fail "status wrong token: not 1"
done
CKPT_DAEMON="unix:$sock" CKPT_TOKEN_FILE="$tmp/token" "$BIN/ckpt" ls --job jd --json | j 'assert d[0]["tiers"], d'
# --root keeps the local behaviour even with CKPT_DAEMON set.
CKPT_DAEMON="unix:$sock" "$BIN/ckpt" ls --root "$tmp/root" --json | j 'assert d[0]["version"]==3 and "tiers" not in d[0], d'

[ "$(code "$BIN/ckpt" status)" = 2 ] || fail "status without --daemon: not 2"
[ "$(code "$BIN/ckpt" ls --daemon "unix:$tmp/nosock" --token-file "$tmp/token" --job jd)" = 1 ] || fail "unreachable: not 1"
grep -qF "unix:$tmp/nosock" "$tmp/err" || fail "unreachable message: $(cat "$tmp/err")"
kill "$pid"
wait "$pid" 2>/dev/null || true
pid=
[ "$(code "$BIN/ckpt" status --daemon "127.0.0.1:$port" --token-file "$tmp/token")" = 1 ] || fail "stopped daemon: not 1"
grep -qF "127.0.0.1:$port" "$tmp/err" || fail "unreachable tcp message: $(cat "$tmp/err")"
echo "cli daemon: ok"
