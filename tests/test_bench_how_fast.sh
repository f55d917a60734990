#!/usr/bin/env bash
# tools/bench/how-fast.py, which writes README.md's "How fast" section and
# its plot from tools/bench/torch-vs-ckpt.py's figures: on figures of that
# script's shape it replaces only the marked part of a document, the table
# holds every method with its ratios to memcpy and fio, the plot is a PNG,
# and every method name and field it reads is still one torch-vs-ckpt.py
# writes (a rename there would otherwise leave the README stale unnoticed).
# The benchmark itself (minutes, torch) is run by hand:
# tools/bench-how-fast.sh (docs/benchmarks.md).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tools=$here/../tools
py=/usr/bin/python3
"$py" -c 'import matplotlib' 2>/dev/null || { echo "SKIP: Debian's python3 has no matplotlib (tools/deps.sh installs it)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-test-how-fast-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Every method and field how-fast.py reads appears in torch-vs-ckpt.py.
"$py" - "$tools/bench/how-fast.py" "$tools/bench/torch-vs-ckpt.py" <<'PY' || fail "how-fast.py reads what torch-vs-ckpt.py no longer writes"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("hf", sys.argv[1])
hf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hf)
src = open(sys.argv[2]).read()
bad = [k for k, _ in hf.METHODS if '"%s"' % k not in src]
bad += [f for f in ("modify_s", "durable_s", "restore_s", "fio_write_s", "fio_read_s", "memcpy_s", "methods",
                    "tensors", "iters", "bytes", "failed") if '"%s"' % f not in src]
if bad:
    sys.exit("not in torch-vs-ckpt.py: %s" % bad)
PY

"$py" - "$tmp/r.json" <<'PY'
import json, sys
m = lambda s, mo, d, r: {"stall_s": s, "modify_s": mo, "durable_s": d, "restore_s": r}
json.dump({"bytes": 1 << 30, "tensors": 64, "iters": 3, "memcpy_s": 0.08, "fio_write_s": [0.7, 0.8],
           "fio_read_s": [0.9, 1.0], "failed": {"dcp-process": "RuntimeError: no"}, "run_s": 120, "torch": "2.x",
           "methods": {
               "ckpt (Python, Checkpointer.save / restore in place)": m(0.1, 0.1, 0.6, 0.5),
               "torch.save + fsync / torch.load": m(1.1, 1.1, 1.1, 0.7),
               "safetensors save_file + fsync / load_file": m(0.9, 0.9, 0.9, 0.6),
               "dcp.save (FileSystemWriter) / dcp.load": m(1.2, 1.2, 1.2, 1.3),
               "dcp.async_save, thread executor, DefaultStager": m(0.01, 0.5, 2.4, 1.2)}},
          open(sys.argv[1], "w"))
PY
printf '# x\n\n## How fast\n\n<!-- how-fast:begin -->\nold figures\n<!-- how-fast:end -->\n\n## Next\n' >"$tmp/README.md"
mkdir "$tmp/docs"
"$py" "$tools/bench/how-fast.py" "$tmp/r.json" --readme "$tmp/README.md" --plot "$tmp/docs/how-fast.png" \
	--commit abc1234 --date 2026-01-01 --machine "a test" --load "1.0" --command "tools/bench-how-fast.sh --size 1G"
doc=$(cat "$tmp/README.md")
[ "$(head -5 "$tmp/README.md")" = "$(printf '# x\n\n## How fast\n\n<!-- how-fast:begin -->')" ] || fail "what comes before the section changed"
[ "$(tail -3 "$tmp/README.md")" = "$(printf '<!-- how-fast:end -->\n\n## Next')" ] || fail "what comes after the section changed"
! grep -q "old figures" <<<"$doc" || fail "the old section stayed"
grep -qF '| **ckpt** | 0.100 s (1.2x memcpy) | 0.600 s (1.25 of fio write) | 0.500 s (1.90 of fio read) |' <<<"$doc" ||
	fail "ckpt's row is not there, or its ratios are wrong: $doc"
for m in 'torch.save / torch.load' safetensors 'DCP save / load' 'DCP async_save (thread)'; do
	grep -qF "| $m |" <<<"$doc" || fail "no row for $m"
done
grep -qF 'dcp-process did not run: RuntimeError: no' <<<"$doc" || fail "a method that did not run is not said"
grep -qF 'training goes on 5.0x sooner than DCP async_save (thread)' <<<"$doc" || fail "the comparison is wrong"
grep -qF '![ckpt against torch.save, safetensors and DCP](docs/how-fast.png)' <<<"$doc" || fail "no link to the plot"
grep -qF 'tools/bench-how-fast.sh --size 1G' <<<"$doc" && grep -qF 'abc1234' <<<"$doc" || fail "no command or commit"
[ "$(head -c 8 "$tmp/docs/how-fast.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "the plot is not a PNG"
# A document without the markers is refused, and left alone.
printf 'no markers\n' >"$tmp/bare.md"
! "$py" "$tools/bench/how-fast.py" "$tmp/r.json" --readme "$tmp/bare.md" 2>/dev/null || fail "a document without markers was taken"
[ "$(cat "$tmp/bare.md")" = "no markers" ] || fail "a document without markers was changed"
echo "ok: how-fast.py writes the section and the plot"
