#!/usr/bin/env bash
# tools/bench-daemon.sh — the LOCAL_MEM tier against memcpy, in one run: starts
# a ckptd (--role both) on a Unix socket in a temporary directory, with a fresh
# 0600 token and a pool of 2.5x the state, and runs ckpt-bench with
# --tiers local_mem,local_disk against it. Reports the stall of a save into
# node DRAM against a memcpy of the same bytes (into private memory, and into
# shared memory like the agent's pool), the time until the version is
# committed in DRAM (against the time until it is durable on disk), and a
# restore from DRAM (the shard file removed first) against memcpy.
#
# --startup-ms MS: each restoring context waits this long after it opened
# before it restores (a trainer building its model), untimed. Default 0.
#
# usage: tools/bench-daemon.sh [--size 1G] [--regions 64] [--iters 5]
#                              [--dir DIR] [--pool BYTES] [--compress] [--json]
#                              [--startup-ms MS]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

size=1G
regions=64
iters=5
dir=""
pool=""
json=""
compress=""
startup_ms=0

usage() {
	sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
	case "$1" in
	--size) size=$2; shift 2 ;;
	--regions) regions=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--pool) pool=$2; shift 2 ;;
	--compress) compress=--compress; shift ;;
	--startup-ms) startup_ms=$2; shift 2 ;;
	--json) json=--json; shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "bench-daemon.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
	esac
done

bench_name=bench-daemon.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench/lib.sh"

[[ $size =~ ^[0-9]+[KkMmGg]?$ ]] || die "--size '$size' is not a number with an optional K/M/G suffix"
[[ $regions =~ ^[1-9][0-9]*$ ]] || die "--regions '$regions' is not a positive number"
[[ $iters =~ ^[1-9][0-9]*$ ]] || die "--iters '$iters' is not a positive number"
[[ $startup_ms =~ ^[0-9]+$ ]] || die "--startup-ms '$startup_ms' is not a number of milliseconds"
bytes=$(to_bytes "$size")
if [ -z "$pool" ]; then
	# Two versions in DRAM at once (the newest committed one is never
	# evicted while the next is written), with room for the images' headers
	# and footers.
	pool=$(( (bytes * 5 / 2 + (1 << 20) - 1) >> 20 ))M
fi
[[ $pool =~ ^[0-9]+[KkMmGg]?$ ]] || die "--pool '$pool' is not a number with an optional K/M/G suffix"

# State, the two memcpy targets and the agent's pool, all resident at once.
need_kib=$(( (bytes * 3 + $(to_bytes "$pool")) >> 10 ))
avail_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
[ "$avail_kib" -gt "$need_kib" ] ||
	die "needs about $((need_kib >> 20)) GiB of memory, $((avail_kib >> 20)) GiB available; try a smaller --size"

bin=${CKPT_BIN:-$repo/build/bin}
for exe in ckptd ckpt-bench; do
	[ -x "$bin/$exe" ] || die "no $bin/$exe: build the project first (cmake --build build)"
done

if [ -z "$dir" ]; then
	mkdir -p "$repo/build"
	dir=$(mktemp -d "$repo/build/bench-daemon-XXXXXX")
else
	mkdir -p "$dir"
	dir=$(mktemp -d "$dir/bench-daemon-XXXXXX")
fi
pid=
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$dir"
}
trap cleanup EXIT

umask 077
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/token"
chmod 600 "$dir/token"
mkdir "$dir/droot"
sock=$dir/agent.sock
env -u CKPT_TOKEN -u CKPT_ROOT -u CKPT_CONFIG "$bin/ckptd" --role both --root "$dir/droot" --socket "$sock" \
	--token-file "$dir/token" --pool-size "$pool" --node bench --log-level warn >"$dir/ckptd.log" 2>&1 &
pid=$!
for _ in $(seq 300); do
	[ -S "$sock" ] && break
	kill -0 "$pid" 2>/dev/null || { cat "$dir/ckptd.log" >&2; die "ckptd exited"; }
	sleep 0.1
done
[ -S "$sock" ] || die "ckptd did not come up"

log "ckptd pool $pool, state $size in $regions regions, $iters iterations, in $dir"
log "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
# CKPT_DEBUG=INFO: the library says where each restore read from.
set +e
CKPT_DAEMON="unix:$sock" CKPT_TOKEN_FILE="$dir/token" CKPT_DEBUG=${CKPT_DEBUG:-INFO} \
	"$bin/ckpt-bench" --root "$dir/root" --size "$size" --regions "$regions" --iters "$iters" \
	--tiers local_mem,local_disk --startup-ms "$startup_ms" $compress $json 2>"$dir/bench.err"
rc=$?
set -e
grep -v "^ckpt INFO" "$dir/bench.err" >&2 || true
[ "$rc" = 0 ] || { tail -n 20 "$dir/ckptd.log" >&2; die "ckpt-bench failed ($rc)"; }
from_mem=$(grep -c "restored from LOCAL_MEM" "$dir/bench.err" || true)
[ "$from_mem" = "$iters" ] || die "only $from_mem of $iters restores came from LOCAL_MEM"
if grep -q "LOCAL_MEM skipped" "$dir/bench.err"; then
	die "a save did not go into node DRAM (see above)"
fi
log "all $iters saves went into node DRAM and all restores came from there"
log "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
