#!/usr/bin/env bash
# tools/bench-ec.sh — the peer tier's rs:K+M scheme against this machine's
# own limits, in one run between the same two nodes (ckpt-ec-bench:
# processes on 127.0.0.1 and 127.0.0.2, tcp;ofi_rxm on loopback): DRAM per
# node, ISA-L encode against memcpy, one node's protect with the parity
# arithmetic against the same transfers without it, wire bytes per node, a
# lost node's shard rebuilt from K survivors against raw fi_read, and its
# re-protection against what partner copies need; then ckpt-sim's loss
# probability per version, partner copies against rs:K+M, under the
# simulator's failure model (docs/goodput.md, "Peer schemes").
#
# usage: tools/bench-ec.sh [--size 256M] [--k 8] [--m 2] [--iters 3] [--gpus 10240] [--dir DIR]
# Prints each figure, then BENCH-ROW lines for tools/bench-all.sh.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
size=256M
k=8
m=2
iters=3
gpus=10240
while [ $# -gt 0 ]; do
	case "$1" in
	--size) size=$2; shift 2 ;;
	--k) k=$2; shift 2 ;;
	--m) m=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	--gpus) gpus=$2; shift 2 ;;
	--dir) shift 2 ;; # bench-all's work folder: nothing is written to disk
	-h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench-ec.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
tests_bin=${CKPT_TESTS_BIN:-$repo/build/tests}
bin=${CKPT_BIN:-$repo/build/bin}
for p in "$tests_bin/bench_ec" "$bin/ckpt-sim"; do
	[ -x "$p" ] || { echo "bench-ec.sh: $p not built (cmake --build build)" >&2; exit 1; }
done
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
FI_TCP_IFACE=lo "$tests_bin/bench_ec" --size "$size" --k "$k" --m "$m" --iters "$iters" --rows
sim=$("$bin/ckpt-sim" --runs 1 --hours 1 --gpus "$gpus" --peer-scheme "partner,rs:$k+$m")
echo "$sim" | sed -n '/^peer schemes/,$p'
row() { # scheme label
	echo "$sim" | awk -v s="$1" -v l="$2" -v g="$gpus" '$1 == g && $2 == s {
		v = $6; if (v !~ /^[0-9.e+-]+$/) v = "null"
		printf "BENCH-ROW {\"figure\": \"%s GPUs: P(version lost from peer DRAM), %s (ckpt-sim model)\", \"value\": %s, \"format\": \"%%.2e\", \"target\": \"\"}\n", g, l, v }'
}
row partner "partner copies"
row "rs:$k+$m" "rs:$k+$m"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
