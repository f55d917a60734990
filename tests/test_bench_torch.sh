#!/usr/bin/env bash
# tools/bench/torch-baseline.py at 1 MiB: the torch.save/torch.load baseline
# of bench.sh and bench-preempt.sh still runs and checks what it loads.
# Runs with the project's Python environment (tools/deps.sh: .venv, or
# CKPT_PY), else a system python3 with torch; skipped where none has torch
# (the benchmarks' targets do not need it).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
py=
for p in ${CKPT_PY:-} "$here/../.venv/bin/python" /usr/bin/python3; do
	[ -x "$p" ] && "$p" -c 'import torch' 2>/dev/null && { py=$p; break; }
done
[ -n "$py" ] || { echo "SKIP: no python that can import torch (tools/deps.sh makes .venv; or set CKPT_PY)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-test-torch-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
out=$("$py" "$here/../tools/bench/torch-baseline.py" --path "$tmp/t.pt" --size 1M --tensors 2 --iters 1)
echo "$out"
echo "$out" | "$py" -c 'import json, sys; r = json.load(sys.stdin); assert r["save_fsync_s"] > 0 and r["load_s"] > 0, r'
