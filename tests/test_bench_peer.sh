#!/usr/bin/env bash
# A small run of tools/bench-peer.sh: the PEER_MEM benchmark works end to end
# (a coordinator and two agents on loopback, saves copied to the partner,
# restores from partner DRAM, local disk and node DRAM, each verified and
# read from where it should be). No figure is asserted: timings belong to
# docs/benchmarks.md, not to CTest.
set -euo pipefail
for exe in ckptd ckpt ckpt-rank-bench ckpt-fabric-bench; do
	[ -x "${CKPT_BIN:?}/$exe" ] || exit 77
done
FI_TCP_IFACE=lo fi_info -p 'tcp;ofi_rxm' >/dev/null 2>&1 || exit 77
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-bench-peer-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
bash "$here/../tools/bench-peer.sh" --size 16M --iters 1 --dir "$tmp" --json >"$tmp/out.json"
python3 - "$tmp/out.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for k in ("fabric_write_gbps", "copy_gbps", "stall_peer_s", "restore_peer_s", "restore_disk_s", "restore_mem_s"):
    assert r[k] and r[k] > 0, k
print("bench-peer.sh: copy %.2f GB/s, fabric %.2f GB/s (16 MiB, not a figure)" % (r["copy_gbps"], r["fabric_write_gbps"]))
PY
