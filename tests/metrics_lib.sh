# Sourced by the metrics tests: a ckptd (--role both) on loopback with its
# metrics endpoint, saves through it, and fetching /metrics.
# Needs: BIN, tmp, fail(). Sets: pid (ckptd), sock, mport.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# In CI a missing tool is a failure, elsewhere a skip.
need_tool() {
	command -v "$1" >/dev/null && return 0
	if [ -n "${CI:-}" ]; then fail "$1 is missing (tools/deps.sh installs it)"; fi
	echo "skip: no $1 (Debian package $2)"
	exit 77
}

make_token() {
	umask 077
	head -c 48 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token"
	chmod 600 "$tmp/token"
}

# start_ckptd NAME [flags...]: stdout and stderr in $tmp/NAME.log.
start_ckptd() {
	local name=$1
	shift
	sock=$tmp/$name.sock
	mkdir -p "$tmp/$name.root"
	env -u CKPT_TOKEN -u CKPT_METRICS_LISTEN "$BIN/ckptd" --role both --socket "$sock" --token-file "$tmp/token" \
		--root "$tmp/$name.root" --node n0 --pool-size 64M "$@" >"$tmp/$name.log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do
		[ -S "$sock" ] && return 0
		kill -0 "$pid" 2>/dev/null || fail "ckptd exited: $(cat "$tmp/$name.log")"
		sleep 0.1
	done
	fail "ckptd did not come up"
}

stop_ckptd() {
	if [ -n "${pid:-}" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	pid=
}

# save JOB VERSION: one save through the agent, DRAM and disk tiers.
save() {
	CKPT_DAEMON="unix:$sock" CKPT_TOKEN_FILE="$tmp/token" CKPT_TIERS=local_mem,local_disk \
		"$BIN/ckpt" save --root "$tmp/ranks" --job "$1" --version "$2" "$tmp/a.bin" >>"$tmp/save.log" 2>&1 ||
		fail "save $1 v$2: $(tail -n 5 "$tmp/save.log")"
}

# fetch URL OUT: the body into OUT; prints the HTTP status and content type.
fetch() {
	python3 - "$1" "$2" <<'PY'
import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=5)
    code, ctype, body = r.status, r.headers.get("Content-Type", ""), r.read()
except urllib.error.HTTPError as e:
    code, ctype, body = e.code, e.headers.get("Content-Type", ""), e.read()
open(sys.argv[2], "wb").write(body)
print(code, ctype)
PY
}

# sample FILE NAME LABELS: the value of one sample (exact label text), or "".
sample() {
	python3 - "$@" <<'PY'
import sys
path, name, labels = sys.argv[1], sys.argv[2], sys.argv[3]
want = name + ("{" + labels + "}" if labels else "")
for line in open(path):
    if line.startswith(want + " "):
        print(line.split()[-1]); break
PY
}
