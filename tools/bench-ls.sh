#!/usr/bin/env bash
# `ckpt ls --daemon` end to end against a coordinator whose index holds 10^6
# shard records (1,000 versions of 1,000 ranks): process start, handshake,
# listing, printing. Target: under 100 ms.
#   tools/bench-ls.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-bench-ls-XXXXXX")
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
CKPT_BENCH_KEEP=1 "$build/bin/ckptd-coord-bench" "$tmp" | grep -E "^(build|list)"
mkdir "$tmp/root"
mv "$tmp/db" "$tmp/root/coord"
head -c 32 /dev/urandom | base64 >"$tmp/token"
chmod 600 "$tmp/token"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$build/bin/ckptd" --role coordinator --root "$tmp/root" --listen "127.0.0.1:$port" \
	--token-file "$tmp/token" --retention-interval 0 >"$tmp/ckptd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1",int(sys.argv[1])),1)' "$port" 2>/dev/null && break
	sleep 0.1
done
python3 - "$build/bin/ckpt" "127.0.0.1:$port" "$tmp/token" <<'PY'
import json, subprocess, sys, time
ckpt, addr, tok = sys.argv[1:]
cmd = [ckpt, "ls", "--daemon", addr, "--token-file", tok, "--job", "big", "--json"]
times = []
for _ in range(7):
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True).stdout
    times.append(time.perf_counter() - t0)
n = len(json.loads(out))
assert n == 1000, n
times.sort()
print(f"ckpt ls --daemon: {n} versions over 10^6 shard records: median {1e3*times[3]:.1f} ms, min {1e3*times[0]:.1f} ms (7 runs, whole process)")
PY
