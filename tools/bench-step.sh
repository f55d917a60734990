#!/usr/bin/env bash
# tools/bench-step.sh — what ckpt_step costs the training loop: starts a
# ckptd (--role both) on a Unix socket in a temporary directory with a fresh
# 0600 token, and runs ckpt-step-bench embedded and joined to it (the joined
# context must reach the agent: daemon_required). Afterwards `ckpt
# stragglers` shows the coordinator received the bench's step reports.
#
# usage: tools/bench-step.sh [--dir DIR] [ckpt-step-bench options: --calls N
#                             --runs R --cpu-seconds S --period-us U --step-ms MS]
# --dir: where the temporary directory goes (default: build/ of the repository).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
bin=${CKPT_BIN:-$repo/build/bin}
bench_name=bench-step.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench/lib.sh"
for exe in ckptd ckpt ckpt-step-bench; do
	[ -x "$bin/$exe" ] || die "no $bin/$exe: build the project first (cmake --build build)"
done

parent=$repo/build
args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--dir) parent=$2; shift 2 ;;
	*) args+=("$1"); shift ;;
	esac
done
mkdir -p "$parent"
dir=$(mktemp -d "$parent/bench-step-XXXXXX")
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
	--token-file "$dir/token" --pool-size 64M --node bench --log-level warn >"$dir/ckptd.log" 2>&1 &
pid=$!
for _ in $(seq 300); do
	[ -S "$sock" ] && break
	kill -0 "$pid" 2>/dev/null || { cat "$dir/ckptd.log" >&2; die "ckptd exited"; }
	sleep 0.1
done
[ -S "$sock" ] || die "ckptd did not come up"

set +e
env -u CKPT_TOKEN -u CKPT_CONFIG CKPT_DAEMON="unix:$sock" CKPT_TOKEN_FILE="$dir/token" \
	"$bin/ckpt-step-bench" --root "$dir/root" ${args[@]+"${args[@]}"}
rc=$?
set -e
[ "$rc" = 0 ] || { tail -n 20 "$dir/ckptd.log" >&2; die "ckpt-step-bench failed ($rc)"; }
echo "coordinator's view of the bench's steps (ckpt stragglers):"
CKPT_TOKEN_FILE="$dir/token" "$bin/ckpt" stragglers --daemon "unix:$sock" --job stepbench ||
	die "ckpt stragglers failed"
log "ckptd's CPU time over the run: $(awk '{printf "%.2f s", ($14 + $15) / '"$(getconf CLK_TCK)"'}' /proc/$pid/stat)"
log "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
