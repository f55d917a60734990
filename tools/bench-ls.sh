#!/usr/bin/env bash
# `ckpt ls --daemon` end to end against a coordinator whose index holds 10^6
# shard records (1,000 versions of 1,000 ranks): process start, handshake,
# listing, printing. Target: under 100 ms.
#
# usage: tools/bench-ls.sh [BUILD_DIR] [--versions 1000] [--ranks 1000]
#                          [--runs 7] [--json]
# Programs come from $CKPT_BIN, else BUILD_DIR/bin (BUILD_DIR: build).
# Prints the engine's own listing time and the whole tool's (median and min
# over --runs processes); --json prints one JSON object instead.
set -euo pipefail
build=build
versions=1000
ranks=1000
runs=7
json=""
while [ $# -gt 0 ]; do
	case "$1" in
	--versions) versions=$2; shift 2 ;;
	--ranks) ranks=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--json) json=1; shift ;;
	-h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "bench-ls.sh: unknown argument '$1'" >&2; exit 2 ;;
	*) build=$1; shift ;;
	esac
done
bench_name=bench-ls.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench/lib.sh"
for v in versions ranks runs; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--$v '${!v}' is not a positive number"
done
bin=${CKPT_BIN:-$build/bin}
for exe in ckptd ckpt ckptd-coord-bench; do
	[ -x "$bin/$exe" ] || die "no $bin/$exe: build the project first (cmake --build build)"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-bench-ls-XXXXXX")
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
CKPT_BENCH_KEEP=1 "$bin/ckptd-coord-bench" --worlds 8 --versions "$versions" --ranks "$ranks" "$tmp" \
	>"$tmp/coord-bench.out" || { cat "$tmp/coord-bench.out" >&2; die "ckptd-coord-bench failed"; }
engine_ms=$(sed -n 's/^list: .*: \([0-9.]*\) ms$/\1/p' "$tmp/coord-bench.out")
[ -n "$engine_ms" ] || die "no listing time in ckptd-coord-bench's output"
[ -n "$json" ] || grep -E "^(build|list)" "$tmp/coord-bench.out"
mkdir "$tmp/root"
mv "$tmp/db" "$tmp/root/coord"
head -c 32 /dev/urandom | base64 >"$tmp/token"
chmod 600 "$tmp/token"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin/ckptd" --role coordinator --root "$tmp/root" --listen "127.0.0.1:$port" \
	--token-file "$tmp/token" --retention-interval 0 >"$tmp/ckptd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1",int(sys.argv[1])),1)' "$port" 2>/dev/null && break
	kill -0 "$pid" 2>/dev/null || { cat "$tmp/ckptd.log" >&2; die "ckptd exited"; }
	sleep 0.1
done
python3 - "$bin/ckpt" "127.0.0.1:$port" "$tmp/token" "$versions" "$ranks" "$runs" "$engine_ms" "$json" <<'PY'
import json, subprocess, sys, time
ckpt, addr, tok = sys.argv[1:4]
versions, ranks, runs = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
engine_ms, want_json = float(sys.argv[7]), sys.argv[8] == "1"
cmd = [ckpt, "ls", "--daemon", addr, "--token-file", tok, "--job", "big", "--json"]
times = []
for _ in range(runs):
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True).stdout
    times.append(time.perf_counter() - t0)
    n = len(json.loads(out))
    assert n == versions, "listed %d versions, want %d" % (n, versions)
times.sort()
med, low = 1e3 * times[len(times) // 2], 1e3 * times[0]
if want_json:
    print(json.dumps({"versions": versions, "records": versions * ranks, "engine_list_ms": engine_ms,
                      "ls_median_ms": med, "ls_min_ms": low, "runs": runs}))
else:
    print("ckpt ls --daemon: %d versions over %d shard records: median %.1f ms, min %.1f ms (%d runs, whole process)"
          % (versions, versions * ranks, med, low, runs))
PY
