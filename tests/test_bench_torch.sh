#!/usr/bin/env bash
# tools/bench/torch-baseline.py at 1 MiB: the torch.save/torch.load baseline
# of bench.sh and bench-preempt.sh still runs and checks what it loads.
# Skipped where Debian's python3-torch is not installed (the benchmarks'
# targets do not need it; tools/bench-all.sh leaves it out there too).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
py=/usr/bin/python3
"$py" -c 'import torch' 2>/dev/null || { echo "SKIP: $py cannot import torch"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-test-torch-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
out=$("$py" "$here/../tools/bench/torch-baseline.py" --path "$tmp/t.pt" --size 1M --tensors 2 --iters 1)
echo "$out"
echo "$out" | "$py" -c 'import json, sys; r = json.load(sys.stdin); assert r["save_fsync_s"] > 0 and r["load_s"] > 0, r'
