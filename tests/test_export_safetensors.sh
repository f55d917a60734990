#!/bin/bash
# ckpt export's safetensors file read by Hugging Face's own safetensors
# package (safe_open, numpy): names, dtypes, shapes and every value of a
# version saved by 3 ranks (rows and columns split). The package comes from
# the project's Python environment (tools/deps.sh: .venv, or CKPT_PY); exit
# 77 when no interpreter with safetensors and numpy is found.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
bin=${CKPT_BIN:-$repo/build/bin}
fail() { echo "FAIL: $*"; exit 1; }

py=""
for p in ${CKPT_PY:-} "$repo/.venv/bin/python" python3; do
	if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import safetensors, numpy' 2>/dev/null; then
		py=$p
		break
	fi
done
[ -n "$py" ] || { echo "SKIP: no python with safetensors and numpy (tools/deps.sh makes .venv; or set CKPT_PY)"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-st.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
"$bin/ckpt-reshard-bench" save --root "$tmp/root" --job m --ranks 3 --bytes 24M --chunk-bytes 256K >/dev/null ||
	fail "saving the model"
"$bin/ckpt" export --root "$tmp/root" --job m --format safetensors --out "$tmp/out" >/dev/null || fail "export"
"$py" - "$tmp/out/model.safetensors" <<'PY' || fail "safetensors does not read the export back"
import sys
import numpy as np
from safetensors import safe_open
with safe_open(sys.argv[1], framework="numpy") as f:
    assert sorted(f.keys()) == ["emb", "rng", "step", "w"], list(f.keys())
    meta = f.metadata()
    assert meta.get("format") == "pt", meta
    w = f.get_tensor("w")
    assert w.dtype == np.float32 and w.shape[1] == 1024, (w.dtype, w.shape)
    i = np.arange(w.size, dtype=np.int64).reshape(w.shape)
    assert np.array_equal(w, ((i % 65521) * 0.25).astype(np.float32)), "w differs"
    e = f.get_tensor("emb")
    assert e.dtype == np.float16 and e.shape[1] == 512, (e.dtype, e.shape)
    j = np.arange(e.size, dtype=np.int64).reshape(e.shape)
    assert np.array_equal(e, (j % 2039).astype(np.float16)), "emb differs"
    s = f.get_tensor("step")
    assert s.dtype == np.int64 and s.shape == () and int(s) == 1234, (s.dtype, s.shape, s)
    r = f.get_tensor("rng")
    assert r.dtype == np.uint8 and r.shape == (64,) and list(r) == list(range(64)), r
print("safetensors read %d tensors" % 4)
PY
echo "export_safetensors: ok"
