#!/usr/bin/env bash
# tools/bench-how-fast.sh — regenerates README.md's "How fast" section and its
# plot (docs/how-fast.png) in one command: runs tools/bench/torch-vs-ckpt.py
# (ckpt against torch.save, safetensors and DCP on one state, one disk, one
# run, beside memcpy and fio), then tools/bench/how-fast.py, which writes the
# section between the README's "how-fast" marker lines and draws the plot.
#
# usage: tools/bench-how-fast.sh [--size 1G] [--tensors 64] [--iters 3]
#            [--dir DIR] [--readme FILE] [--plot FILE] [--json FILE]
#   --dir     where the checkpoints and fio's file go (default: a folder
#             under build/, on the repository's disk; not a tmpfs)
#   --readme  the file whose section is rewritten (default README.md)
#   --plot    the plot (default docs/how-fast.png)
#   --json    also keep torch-vs-ckpt.py's figures there
# Needs the test environment (tools/deps.sh: .venv with torch and the ckpt
# package installed: `.venv/bin/python -m pip install .`), fio, and Debian's
# python3 with matplotlib; ckpt-bench from build/bin for the library's own
# figures. Run on a machine as quiet as you can find (see docs/benchmarks.md).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
bench_name=bench-how-fast.sh
. "$here/bench/lib.sh"
size=1G tensors=64 iters=3 dir="" readme=$repo/README.md plot=$repo/docs/how-fast.png json=""
while [ $# -gt 0 ]; do
	case "$1" in
	--size) size=$2; shift 2 ;;
	--tensors) tensors=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--readme) readme=$2; shift 2 ;;
	--plot) plot=$2; shift 2 ;;
	--json) json=$2; shift 2 ;;
	-h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$1' (--help)" ;;
	esac
done
py=${CKPT_PY:-$repo/.venv/bin/python}
[ -x "$py" ] || die "no $py: tools/deps.sh's ckpt_python_env makes it (or set CKPT_PY)"
"$py" -c 'import ckpt, torch' 2>/dev/null || die "$py cannot import ckpt and torch: $py -m pip install $repo"
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || die "Debian's python3 has no matplotlib (apt-get install python3-matplotlib)"
command -v fio >/dev/null || die "no fio"
grep -qx '<!-- how-fast:begin -->' "$readme" && grep -qx '<!-- how-fast:end -->' "$readme" ||
	die "$readme has no '<!-- how-fast:begin -->' / '<!-- how-fast:end -->' lines"
made=""
out=$(mktemp "${TMPDIR:-/tmp}/ckpt-how-fast-XXXXXX.json")
trap 'rm -f "$out"; [ -z "$made" ] || rm -rf "$made"' EXIT
if [ -z "$dir" ]; then
	mkdir -p "$repo/build"
	dir=$(mktemp -d "$repo/build/how-fast-XXXXXX")
	made=$dir
fi

commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null | head -1)" ] || commit="$commit (with uncommitted changes)"
load0=$(cut -d' ' -f1 /proc/loadavg)
shown="tools/bench-how-fast.sh --size $size --tensors $tensors --iters $iters"
log "running: $py tools/bench/torch-vs-ckpt.py --size $size --tensors $tensors --iters $iters"
"$py" "$here/bench/torch-vs-ckpt.py" --dir "$dir" --size "$size" --tensors "$tensors" --iters "$iters" \
	--ckpt-bench "$repo/build/bin/ckpt-bench" --json "$out" >&2
load1=$(cut -d' ' -f1 /proc/loadavg)
[ -z "$json" ] || cp "$out" "$json"
cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
fs=$(df -T "$dir" | awk 'NR == 2 { print $2 }')
mkdir -p "$(dirname "$plot")"
/usr/bin/python3 "$here/bench/how-fast.py" "$out" --readme "$readme" --plot "$plot" --commit "$commit" \
	--date "$(date -u '+%Y-%m-%d')" --machine "$(nproc) vCPUs ($cpu), $mem RAM, $fs" \
	--load "$load0 at the start, $load1 at the end" --command "$shown"
log "wrote the section of $readme and $plot"
