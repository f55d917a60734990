#!/usr/bin/env bash
# libfabric is loaded when the first fabric opens (storage/fabric_lib.h),
# never linked: linked, its dependencies' constructors cost every process
# ~0.2 s before main() (`ckpt ls --daemon` took 208 ms instead of a few).
# Checks that no program or library we build names it as NEEDED, and that
# the peer tier's transport still finds it (ckpt-fabric-bench, tiny).
set -euo pipefail
bin=${CKPT_BIN:?}
lib=$(cd "$bin/../lib" && pwd)
command -v readelf >/dev/null || exit 77
fail=0
checked=0
for f in "$bin"/* "$lib"/libckpt.so; do
	[ -f "$f" ] && [ -x "$f" ] || [ "${f##*.}" = so ] || continue
	readelf -h "$f" >/dev/null 2>&1 || continue # scripts
	checked=$((checked + 1))
	if readelf -d "$f" | grep -q 'NEEDED.*libfabric'; then
		echo "FAIL: $f links libfabric (NEEDED); it must be loaded on first use" >&2
		fail=1
	fi
done
[ "$checked" -ge 3 ] || { echo "FAIL: only $checked ELF files under $bin and $lib" >&2; exit 1; }
echo "$checked programs and libraries: none links libfabric"
[ "$fail" = 0 ] || exit 1
# The lazy load itself: a fabric opens and moves data (loopback tcp;ofi_rxm).
FI_TCP_IFACE=lo fi_info -p 'tcp;ofi_rxm' >/dev/null 2>&1 || { echo "no tcp;ofi_rxm provider: load not exercised"; exit 0; }
FI_TCP_IFACE=lo "$bin/ckpt-fabric-bench" --size 4M --iters 1 >/dev/null
echo "ckpt-fabric-bench opened a fabric through the loaded libfabric"
