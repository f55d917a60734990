#!/usr/bin/env bash
# tools/bench.sh — ckpt against this machine's own limits, in one run, on one
# filesystem: fio (O_DIRECT, io_uring) for the disk, memcpy for the snapshot,
# torch.save/torch.load as the everyday baseline. Prints a markdown report;
# the ratios are the figures of merit (absolute times on a shared VM are noise).
#
# usage: tools/bench.sh [--sizes "1G 4G"] [--dir DIR] [--out FILE]
#                       [--iters K] [--fio-reps R] [--torch-iters T]
#                       [--no-torch] [--no-drop-caches] [--json] [--no-dram]
# Each size runs ckpt-bench twice: shard files new per version, then with
# recycled shard files (--recycle --keep-versions 1: its durable time is set
# against fio's overwrite); and, unless --no-dram, restore from node DRAM
# through a ckptd agent (tools/bench-daemon.sh) against memcpy.
# --no-torch: leave the torch baseline out (it is not a target);
# --no-drop-caches: do not drop the page cache (every ckpt and fio read is
# O_DIRECT anyway); --json: one JSON object (ratios and targets per size)
# instead of the markdown report.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

sizes="1G 4G"
dir=""
out=""
iters=7        # ckpt-bench iterations per size (median reported)
fio_reps=6     # fio rounds per size, half before and half after ckpt
torch_iters=3
regions=64
chunk=8M       # ckpt's default chunk; fio's block size matches it
iodepth=8      # ckpt's default io_depth; fio's matches it
deep_depth=32  # and fio's reads again at this depth: the faster is the limit
py=/usr/bin/python3   # Debian's python3-torch; a pyenv python3 on PATH lacks torch
torch=1
drop=1
json=0
dram=1

usage() {
	sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
	case "$1" in
	--sizes) sizes=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	--fio-reps) fio_reps=$2; shift 2 ;;
	--torch-iters) torch_iters=$2; shift 2 ;;
	--no-torch) torch=0; shift ;;
	--no-drop-caches) drop=0; shift ;;
	--json) json=1; shift ;;
	--no-dram) dram=0; shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "bench.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
	esac
done

bench_name=bench.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench/lib.sh"

for s in $sizes; do
	[[ $s =~ ^[0-9]+[KkMmGg]?$ ]] || die "size '$s' is not a number with an optional K/M/G suffix"
done

# ------------------------------------------------------------ prerequisites

bench=${CKPT_BENCH:-${CKPT_BIN:-$repo/build/bin}/ckpt-bench}
if [ ! -x "$bench" ]; then
	log "building ckpt-bench"
	if ! { cmake -S "$repo" -B "$repo/build" >/dev/null && cmake --build "$repo/build" --target ckpt-bench -j2 >/dev/null; }; then
		die "cannot build ckpt-bench; build the project first (cmake -S . -B build && cmake --build build)"
	fi
fi

apt_install() {
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		log "installing $1 with apt-get"
		DEBIAN_FRONTEND=noninteractive apt-get install -y "$1" >/dev/null ||
			{ apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y "$1" >/dev/null; }
	else
		return 1
	fi
}

command -v fio >/dev/null || apt_install fio || die "fio is missing (apt-get install fio)"
if [ "$torch" = 1 ]; then
	[ -x "$py" ] || die "$py not found (apt-get install python3-torch)"
	"$py" -c 'import torch' 2>/dev/null || apt_install python3-torch ||
		die "$py cannot import torch (apt-get install python3-torch)"
	"$py" -c 'import torch' 2>/dev/null || die "$py still cannot import torch"
else
	[ -x "$py" ] || py=python3
fi

# ------------------------------------------------------------ work directory

# Everything (checkpoint root, fio file, torch file) lives in one directory,
# so all three meet the same filesystem and the same disk.
if [ -n "$dir" ]; then
	mkdir -p "$dir"
	work=$(mktemp -d "$dir/ckpt-bench.XXXXXX")
elif [ -d "$repo/build" ] && [ -w "$repo/build" ]; then
	work=$(mktemp -d "$repo/build/bench.XXXXXX")
else
	work=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-bench.XXXXXX")
fi
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
raw="$work/results.jsonl"
: >"$raw"

max=0
for s in $sizes; do
	b=$(to_bytes "$s")
	[ "$b" -gt "$max" ] && max=$b
done
gib=$((1 << 30))
# Disk: ckpt keeps every iteration's version until the end, plus fio's file.
need_disk=$(( (iters + 1) * max + gib ))
avail_disk=$(( $(df -Pk "$work" | awk 'NR == 2 { print $4 }') * 1024 ))
[ "$avail_disk" -ge "$need_disk" ] ||
	die "$work: $((avail_disk / gib)) GiB free, need $((need_disk / gib)) GiB for sizes '$sizes'"
# Memory: ckpt-bench holds the regions, the staging pool and the memcpy target.
need_mem=$(( 3 * max + gib ))
avail_mem=$(( $(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo) * 1024 ))
[ "$avail_mem" -ge "$need_mem" ] ||
	die "$((avail_mem / gib)) GiB memory available, need $((need_mem / gib)) GiB for sizes '$sizes'"

# Reads should come from the disk. Every reader here uses O_DIRECT except
# torch.load, which drops the cache itself; dropping it here as well keeps
# earlier steps' pages from skewing later ones.
cache_note="dropped before each read (/proc/sys/vm/drop_caches)"
drop_caches() {
	[ "$drop" = 1 ] || return 1
	sync
	echo 3 2>/dev/null >/proc/sys/vm/drop_caches || return 1
}
drop_caches || cache_note="not dropped (--no-drop-caches or no permission); reads use O_DIRECT, torch.load uses posix_fadvise(DONTNEED)"

# ------------------------------------------------------------ measurements

fio_one() { # rw size file [depth]
	local rw=$1 size=$2 f=$3 depth=${4:-$iodepth}
	fio --name="seq$rw" --filename="$f" --rw="$rw" --bs="$chunk" --iodepth="$depth" \
		--ioengine=io_uring --direct=1 --size="$size" --fallocate=none --end_fsync="$([ "$rw" = write ] && echo 1 || echo 0)" \
		--output-format=json 2>/dev/null |
		"$py" -c 'import json, sys
j = json.load(sys.stdin)["jobs"][0]
rw = sys.argv[1]
if j["error"]:
    sys.exit("fio %s failed: error %d" % (rw, j["error"]))
d = j[rw]
# Bytes over the job time, which includes the end fsync of a write.
print(json.dumps({"kind": "fio", "rw": rw, "bytes": d["io_bytes"], "s": j["job_runtime"] / 1000.0}))' "$rw"
}

# A fresh file each time, as ckpt writes a new shard file per version; then a
# second write over the same, now allocated, file: the ceiling when no block
# allocation is left to do.
fio_pair() { # size
	local f="$work/fio.dat" b
	b=$(to_bytes "$1")
	rm -f "$f"
	fio_one write "$b" "$f" >>"$raw"
	drop_caches || true
	fio_one read "$b" "$f" >>"$raw"
	# A virtual disk may read much faster at a deeper queue than ckpt's
	# default depth (0.83 against 1.47 GiB/s at 8 and 32 on one): the read
	# limit is the faster of the two.
	drop_caches || true
	fio_one read "$b" "$f" "$deep_depth" | sed 's/"rw": "read"/"rw": "read_deep"/' >>"$raw"
	fio_one write "$b" "$f" | sed 's/"rw": "write"/"rw": "overwrite"/' >>"$raw"
	rm -f "$f"
}

t_start=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for s in $sizes; do
	bytes=$(to_bytes "$s")
	log "size $s: fio write/read/overwrite (x$((fio_reps / 2)))"
	for ((r = 0; r < fio_reps / 2; r++)); do fio_pair "$s"; done

	log "size $s: ckpt-bench ($iters iterations, $regions regions)"
	drop_caches || true
	"$bench" --root "$work/ckpt" --size "$bytes" --regions "$regions" --chunk-bytes "$chunk" \
		--io-depth "$iodepth" --iters "$iters" --json 2>"$work/ckpt-bench.log" |
		sed 's/^{/{"kind": "ckpt", /' >>"$raw" ||
		{ cat "$work/ckpt-bench.log" >&2; die "ckpt-bench failed"; }

	log "size $s: ckpt-bench with recycled shard files ($iters iterations, keeping 1 version)"
	drop_caches || true
	"$bench" --root "$work/ckpt-rec" --size "$bytes" --regions "$regions" --chunk-bytes "$chunk" \
		--io-depth "$iodepth" --iters "$iters" --recycle --keep-versions 1 --json 2>"$work/ckpt-bench.log" |
		sed 's/^{/{"kind": "ckpt_recycle", /' >>"$raw" ||
		{ cat "$work/ckpt-bench.log" >&2; die "ckpt-bench --recycle failed"; }

	if [ "$dram" = 1 ]; then
		log "size $s: restore from node DRAM (ckptd agent, $iters iterations)"
		CKPT_BIN=$(dirname "$bench") "$here/bench-daemon.sh" --size "$s" --regions "$regions" --iters "$iters" \
			--dir "$work" --json 2>"$work/bench-daemon.log" | sed 's/^{/{"kind": "dram", /' >>"$raw" ||
			{ cat "$work/bench-daemon.log" >&2; die "bench-daemon.sh failed"; }
	fi

	if [ "$torch" = 1 ]; then
		log "size $s: torch.save + fsync / torch.load ($torch_iters iterations)"
		drop_caches || true
		"$py" "$here/bench/torch-baseline.py" --path "$work/torch.pt" --size "$bytes" --tensors "$regions" \
			--iters "$torch_iters" | sed 's/^{/{"kind": "torch", /' >>"$raw"
	fi

	log "size $s: fio write/read/overwrite again (x$((fio_reps - fio_reps / 2)))"
	for ((r = fio_reps / 2; r < fio_reps; r++)); do fio_pair "$s"; done
done
t_total=$(( $(date +%s) - t_start ))
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# ------------------------------------------------------------ report

fs=$(df -T "$work" | awk 'NR == 2 { print $2 " on " $1 }')
cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$repo" status --porcelain 2>/dev/null | head -1)
[ -n "$dirty" ] && commit="$commit (with uncommitted changes)"

report=$("$py" - "$raw" "$json" <<EOF
import json, statistics, sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
want_json = sys.argv[2] == "1"
if want_json:  # the same computation; only the JSON object is printed
    import io
    real_stdout, sys.stdout = sys.stdout, io.StringIO()
per_size = []
GIB = float(1 << 30)
med = statistics.median

def human(b):
    return "%g GiB" % (b / GIB) if b >= GIB else "%g MiB" % (b / (1 << 20))

print("Machine: $(nproc) vCPUs ($cpu), $mem RAM, filesystem $fs, kernel $(uname -r).  ")
print("fio $(fio --version), torch %s via $py. Commit $commit. Run took ${t_total} s.  " %
      next((r["torch"] for r in rows if r["kind"] == "torch"), "(not run)"))
print("Load average (1, 5, 15 min) at start: $load_start; at end: $load_end.  ")
print("Page cache: $cache_note.")
print()
print("| state | measurement | time (s, median) | GiB/s |")
print("|---|---|---:|---:|")
ratios = []
for size in sorted({r["bytes"] for r in rows if r["kind"] == "ckpt"}):
    fw = [r["s"] for r in rows if r["kind"] == "fio" and r["rw"] == "write" and r["bytes"] == size]
    fr = [r["s"] for r in rows if r["kind"] == "fio" and r["rw"] == "read" and r["bytes"] == size]
    fd = [r["s"] for r in rows if r["kind"] == "fio" and r["rw"] == "read_deep" and r["bytes"] == size]
    fo = [r["s"] for r in rows if r["kind"] == "fio" and r["rw"] == "overwrite" and r["bytes"] == size]
    ck = next(r for r in rows if r["kind"] == "ckpt" and r["bytes"] == size)
    tc = next((r for r in rows if r["kind"] == "torch" and r["bytes"] == size), None)
    rc = next((r for r in rows if r["kind"] == "ckpt_recycle" and r["bytes"] == size), None)
    dm = next((r for r in rows if r["kind"] == "dram" and r["bytes"] == size), None)
    g = size / GIB
    fw_s, fr_s = med(fw), min(med(fr), med(fd)) if fd else med(fr)
    h = human(size)
    def row(what, s):
        print("| %s | %s | %.3f | %.2f |" % (h, what, s, g / s))
    row("fio seq write of a new file, O_DIRECT, io_uring, bs $chunk, QD $iodepth, end fsync (%d runs)" % len(fw), fw_s)
    if fo:
        row("fio seq write over the same file, already allocated (%d runs)" % len(fo), med(fo))
    row("fio seq read, O_DIRECT, io_uring, bs $chunk, QD $iodepth (%d runs)" % len(fr), med(fr))
    if fd:
        row("fio seq read, the same at QD $deep_depth (%d runs); the read limit is the faster" % len(fd), med(fd))
    row("memcpy, best of %d" % (3 + ck["iters"]), ck["memcpy_s"])
    row("ckpt save stall (%d regions)" % ck["regions"], ck["stall_s"])
    row("ckpt save to durable (fdatasync + index commit)", ck["durable_s"])
    if rc:
        row("ckpt save to durable, recycled shard files (keep 1 version)", rc["durable_s"])
    row("ckpt restore, verified", ck["restore_s"])
    if dm:
        row("ckpt restore from node DRAM (ckptd agent), verified", dm["restore_s"])
    if tc:
        row("torch.save + flush + fsync", tc["save_fsync_s"])
        row("torch.load (cache dropped)", tc["load_s"])
    dur_r = (g / ck["durable_s"]) / (g / fw_s)
    res_r = (g / ck["restore_s"]) / (g / fr_s)
    per_size.append({"bytes": size, "stall_vs_memcpy": ck["stall_vs_memcpy"],
                     "stall_vs_memcpy_paired": ck["stall_vs_memcpy_paired"], "durable_vs_fio_write": dur_r,
                     "restore_vs_fio_read": res_r, "stall_s": ck["stall_s"], "memcpy_s": ck["memcpy_s"],
                     "durable_s": ck["durable_s"], "restore_s": ck["restore_s"], "fio_write_s": fw_s,
                     "fio_read_s": fr_s})
    ratios.append((h, "ckpt stall / memcpy (median stall / best memcpy)", ck["stall_vs_memcpy"], "<= 1.3",
                   ck["stall_vs_memcpy"] <= 1.3))
    ratios.append((h, "ckpt stall / memcpy taken just before each save (median of pairs)",
                   ck["stall_vs_memcpy_paired"], "(same, less drift)", None))
    ratios.append((h, "ckpt durable GiB/s / fio write (new file) GiB/s", dur_r, ">= 0.85", dur_r >= 0.85))
    if fo:
        ratios.append((h, "ckpt durable GiB/s / fio overwrite GiB/s (allocated file)", med(fo) / ck["durable_s"],
                       "(ceiling)", None))
    if fo and rc:
        rec_r = med(fo) / rc["durable_s"]
        per_size[-1]["durable_recycled_vs_fio_overwrite"] = rec_r
        ratios.append((h, "ckpt durable GiB/s, recycled shard files / fio overwrite GiB/s", rec_r, ">= 0.90",
                       rec_r >= 0.90))
        ratios.append((h, "ckpt durable GiB/s, recycled shard files / fio write (new file) GiB/s",
                       fw_s / rc["durable_s"], "(> 1: faster than new files)", None))
    ratios.append((h, "ckpt restore GiB/s / fio read GiB/s", res_r, ">= 0.95", res_r >= 0.95))
    if dm:
        per_size[-1]["dram_restore_vs_memcpy"] = dm["restore_vs_memcpy"]
        ratios.append((h, "ckpt restore from node DRAM / memcpy (best memcpy)", dm["restore_vs_memcpy"], ">= 0.80",
                       dm["restore_vs_memcpy"] >= 0.80))
        ratios.append((h, "ckpt restore from node DRAM / memcpy just before each restore (median of pairs)",
                       dm["restore_vs_memcpy_paired"], "(same, less drift)", None))
    if tc:
        ratios.append((h, "torch.save+fsync GiB/s / fio write GiB/s", (g / tc["save_fsync_s"]) / (g / fw_s),
                       "(baseline)", None))
        ratios.append((h, "torch.load GiB/s / fio read GiB/s", (g / tc["load_s"]) / (g / fr_s), "(baseline)", None))
        ratios.append((h, "ckpt durable speed-up over torch.save+fsync", tc["save_fsync_s"] / ck["durable_s"],
                       "(baseline)", None))
print()
print("| state | ratio | value | target | met |")
print("|---|---|---:|---|---|")
for h, name, v, tgt, ok in ratios:
    print("| %s | %s | %.2f | %s | %s |" % (h, name, v, tgt, "" if ok is None else ("yes" if ok else "**no**")))
print()
print("<details><summary>raw results (JSON lines)</summary>")
print()
print("\`\`\`")
for r in rows:
    print(json.dumps(r))
print("\`\`\`")
print("</details>")
if want_json:
    sys.stdout = real_stdout
    print(json.dumps({"sizes": per_size, "commit": "$commit", "seconds": $t_total}))
EOF
)

emit_report "$report" "$out"
