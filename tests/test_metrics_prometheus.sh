#!/usr/bin/env bash
# Debian's Prometheus scrapes ckptd during a run; a metric is read back
# through Prometheus' HTTP API.
set -euo pipefail
BIN=${CKPT_BIN:?}
command -v python3 >/dev/null || exit 77
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-prom-XXXXXX")
pid=
ppid_=
cleanup() {
	if [ -n "$ppid_" ]; then kill "$ppid_" 2>/dev/null || true; wait "$ppid_" 2>/dev/null || true; fi
	stop_ckptd
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }; done; exit 1; }
. "$(dirname "$0")/metrics_lib.sh"
need_tool prometheus prometheus

make_token
mkdir "$tmp/ranks"
head -c 100000 /dev/urandom >"$tmp/a.bin"
mport=$(free_port)
start_ckptd d --metrics-listen "127.0.0.1:$mport"

pport=$(free_port)
cat >"$tmp/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: ckptd
    static_configs:
      - targets: ['127.0.0.1:$mport']
YML
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
	--web.listen-address="127.0.0.1:$pport" >"$tmp/prometheus.log" 2>&1 &
ppid_=$!

nsaves=2
for v in $(seq $nsaves); do save jp "$v"; done

query='ckpt_versions_committed_total{ckpt_job="jp",tier="local_disk"}'
deadline=$((SECONDS + 60))
got=
while [ $SECONDS -lt $deadline ]; do
	kill -0 "$ppid_" 2>/dev/null || fail "prometheus exited"
	got=$(python3 - "http://127.0.0.1:$pport/api/v1/query" "$query" <<'PY' || true
import json, sys, urllib.parse, urllib.request
u = sys.argv[1] + "?" + urllib.parse.urlencode({"query": sys.argv[2]})
d = json.load(urllib.request.urlopen(u, timeout=5))
r = d["data"]["result"]
print(r[0]["value"][1] if d["status"] == "success" and r else "")
PY
)
	[ "$got" = "$nsaves" ] && break
	sleep 0.5
done
[ "$got" = "$nsaves" ] || fail "prometheus read '$got' for $query, wanted $nsaves"
echo "metrics through prometheus: ok"
