#!/usr/bin/env bash
# A small run of tools/bench-daemon.sh: the LOCAL_MEM benchmark works end to
# end (every save into node DRAM, every restore from there, verified). No
# figure is asserted: timings belong to docs/benchmarks.md, not to CTest.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ -x "${CKPT_BIN:?}/ckptd" ] && [ -x "$CKPT_BIN/ckpt-bench" ] || exit 77
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-bench-daemon-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
bash "$here/../tools/bench-daemon.sh" --size 32M --regions 4 --iters 2 --dir "$tmp"
