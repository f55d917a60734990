#!/usr/bin/env bash
# ckptd's Prometheus endpoint (--metrics-listen): real values after saves
# through the agent, `promtool check metrics` on the exposition, 404 and 405,
# and no listener unless the setting is there.
set -euo pipefail
BIN=${CKPT_BIN:?}
command -v python3 >/dev/null || exit 77
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-metrics-XXXXXX")
pid=
cleanup() { stop_ckptd; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }; done; exit 1; }
. "$(dirname "$0")/metrics_lib.sh"
need_tool promtool prometheus

make_token
mkdir "$tmp/ranks"
head -c 200000 /dev/urandom >"$tmp/a.bin"

# Bad values and a taken port are refused, naming the setting.
set +e
"$BIN/ckptd" --metrics-listen nonsense --help >/dev/null 2>"$tmp/err"; rc=$?
set -e
[ "$rc" = 2 ] && grep -q -- "--metrics-listen" "$tmp/err" || fail "bad --metrics-listen: rc $rc: $(cat "$tmp/err")"
env -u CKPT_METRICS_LISTEN "$BIN/ckptd" --print-config | grep -q '^metrics-listen = *# default' || fail "metrics-listen not unset by default"
CKPT_METRICS_LISTEN=127.0.0.1:9 "$BIN/ckptd" --print-config | grep -q '^metrics-listen = 127.0.0.1:9 *# env' ||
	fail "CKPT_METRICS_LISTEN not read"

# Off by default: a daemon without the setting listens on no TCP port at all.
start_ckptd off
python3 - "$pid" <<'PY' || fail "a TCP listener without --metrics-listen"
import os, sys
pid = sys.argv[1]
inodes = set()
for fd in os.listdir(f"/proc/{pid}/fd"):
    try:
        t = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        continue
    if t.startswith("socket:["):
        inodes.add(t[8:-1])
for tab in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        lines = open(tab).read().splitlines()[1:]
    except OSError:
        continue
    for l in lines:
        f = l.split()
        if f[3] == "0A" and f[9] in inodes:
            sys.exit(1)
PY
stop_ckptd

mport=$(free_port)
mkdir "$tmp/shared"
start_ckptd on --metrics-listen "127.0.0.1:$mport" --shared-dir "$tmp/shared" --shared-rate 0
# The port is ours: a second daemon cannot take it, and says which setting.
set +e
env -u CKPT_TOKEN "$BIN/ckptd" --role both --socket "$tmp/x.sock" --token-file "$tmp/token" --root "$tmp/on.root2" \
	--metrics-listen "127.0.0.1:$mport" >"$tmp/taken.log" 2>&1; rc=$?
set -e
[ "$rc" != 0 ] && grep -q -- "--metrics-listen 127.0.0.1:$mport" "$tmp/taken.log" || fail "port taken: rc $rc"

nsaves=3
for v in $(seq $nsaves); do save jm "$v"; done

url=http://127.0.0.1:$mport
ok=
for _ in $(seq 50); do # commits are announced, and pool gauges set, asynchronously
	st=$(fetch "$url/metrics" "$tmp/m.txt")
	if [ "$(sample "$tmp/m.txt" ckpt_versions_committed_total 'ckpt_job="jm",tier="local_mem"')" = "$nsaves" ] &&
		[ "$(sample "$tmp/m.txt" ckpt_versions_committed_total 'ckpt_job="jm",tier="local_disk"')" = "$nsaves" ] &&
		[ "$(sample "$tmp/m.txt" ckpt_versions_committed_total 'ckpt_job="jm",tier="shared"')" = "$nsaves" ] &&
		[ -n "$(sample "$tmp/m.txt" ckpt_job_pool_used_bytes 'ckpt_job="jm"')" ]; then
		ok=1
		break
	fi
	sleep 0.2
done
[ -n "$ok" ] || fail "committed counters never reached $nsaves: $(grep -v '^#' "$tmp/m.txt" | grep -v _bucket)"
case "$st" in "200 text/plain; version=0.0.4"*) ;; *) fail "GET /metrics: $st" ;; esac

# Real values, not just names.
[ "$(sample "$tmp/m.txt" ckpt_save_stall_seconds_count 'ckpt_job="jm",tier="local_disk"')" = "$nsaves" ] ||
	fail "stall histogram count"
[ "$(sample "$tmp/m.txt" ckpt_save_stall_seconds_bucket 'ckpt_job="jm",tier="local_disk",le="+Inf"')" = "$nsaves" ] ||
	fail "stall histogram +Inf bucket"
[ "$(sample "$tmp/m.txt" ckpt_time_to_durable_seconds_count 'ckpt_job="jm",tier="local_mem"')" = "$nsaves" ] ||
	fail "time-to-durable count"
[ "$(sample "$tmp/m.txt" ckpt_commit_latency_seconds_count 'ckpt_job="jm",tier="local_disk"')" = "$nsaves" ] ||
	fail "commit latency count: $(grep ckpt_commit_latency_seconds_count "$tmp/m.txt")"
[ "$(sample "$tmp/m.txt" ckpt_agent_shard_reports_total 'ckpt_job="jm",tier="local_disk"')" = "$nsaves" ] ||
	fail "agent reports"
python3 - "$tmp/m.txt" <<'PY' || fail "values: $(grep -v '^#' "$tmp/m.txt" | grep -v _bucket)"
import sys
v = {}
for l in open(sys.argv[1]):
    if not l.startswith("#"):
        k, x = l.rsplit(" ", 1)
        v[k] = float(x)
assert v['ckpt_job_pool_used_bytes{ckpt_job="jm"}'] > 0
assert v["ckpt_pool_used_bytes"] > 0
assert v['ckpt_shard_bytes_total{ckpt_job="jm",tier="local_disk"}'] >= 3 * 200000
assert v['ckpt_save_stall_seconds_sum{ckpt_job="jm",tier="local_disk"}'] > 0
# the flush to --shared-dir: every shard file once, nothing left behind
assert v['ckpt_shared_flush_bytes_total{ckpt_job="jm"}'] >= 3 * 200000
assert v['ckpt_shared_flush_seconds_count{ckpt_job="jm"}'] == 3
assert v.get('ckpt_shared_backlog_versions{ckpt_job="jm"}', 0) == 0
assert v['ckpt_agents{state="up"}'] == 1
assert v["ckpt_uptime_seconds"] > 0
assert any(k.startswith("ckpt_build_info{") and x == 1 for k, x in v.items())
PY

promtool check metrics <"$tmp/m.txt" >"$tmp/promtool.log" 2>&1 || fail "promtool check metrics: $(cat "$tmp/promtool.log")"

st=$(fetch "$url/other" "$tmp/404.txt")
[ "${st%% *}" = 404 ] || fail "GET /other: $st"
st=$(python3 - "$url/metrics" <<'PY'
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=b"x", method="POST"), timeout=5)
    print(200)
except urllib.error.HTTPError as e:
    print(e.code, e.headers.get("Allow"))
PY
)
[ "$st" = "405 GET, HEAD" ] || fail "POST /metrics: $st"
echo "metrics: ok"
