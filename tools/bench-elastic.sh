#!/usr/bin/env bash
# tools/bench-elastic.sh — elastic restore and export against this machine's
# own disk, in one run, on one filesystem: a model of SIZE bytes saved by 4
# ranks (ckpt-reshard-bench), restored by 3 ranks at once from local disk,
# compared with fio reading the same number of bytes with three jobs (O_DIRECT,
# io_uring, the chunk size as block size, a third of the bytes each); then `ckpt export --format safetensors` of
# the version, compared with fio writing the same bytes (new file, end
# fsync), and with fio copying (a read and a write job at once, the limit of
# anything that reads and writes one disk). Rounds alternate fio and ckpt;
# medians are reported.
#
# usage: tools/bench-elastic.sh [--size 4G] [--dir DIR] [--rounds R] [--out FILE]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
size=4G
dir=""
rounds=3
out=""
chunk=8M
iodepth=8
while [ $# -gt 0 ]; do
	case "$1" in
	--size) size=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench-elastic.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
bench_name=bench-elastic.sh
. "$here/bench/lib.sh"

bin=${CKPT_BIN:-$repo/build/bin}
[ -x "$bin/ckpt-reshard-bench" ] && [ -x "$bin/ckpt" ] || die "build first: no ckpt-reshard-bench or ckpt in $bin"
command -v fio >/dev/null || die "fio is missing (apt-get install fio)"
bytes=$(to_bytes "$size")
[ -n "$dir" ] || dir=$repo/build
work=$(mktemp -d "$dir/ckpt-elastic.XXXXXX")
trap 'rm -rf "$work"' EXIT
avail=$(( $(df -Pk "$work" | awk 'NR == 2 { print $4 }') * 1024 ))
[ "$avail" -ge $((3 * bytes + (1 << 30))) ] || die "$work: not enough free disk for 3 x $size"
mem=$(( $(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo) * 1024 ))
[ "$mem" -ge $((bytes + bytes / 2)) ] || die "not enough memory: the 3 ranks hold $size between them"

fio_s() { # rw file [jobs] -> seconds for $bytes at the jobs' aggregate bandwidth
	local jobs=${3:-1} per
	per=$(( bytes / jobs / (8 << 20) * (8 << 20) )) # whole blocks: O_DIRECT offsets
	fio --name=e --filename="$2" --rw="$1" --bs=$chunk --iodepth=$iodepth --ioengine=io_uring --direct=1 \
		--size=$per --fallocate=none --end_fsync="$([ "$1" = write ] && echo 1 || echo 0)" \
		--numjobs="$jobs" --offset_increment=$per --group_reporting \
		--output-format=json 2>/dev/null |
		python3 -c 'import json, sys
j = json.load(sys.stdin)["jobs"][0]
print(int(sys.argv[1]) / j[sys.argv[2]]["bw_bytes"])' "$bytes" "$1"
}
# A copy's limit: fio reading one file and writing another at once, as an
# export does (seconds until both are done).
fio_copy_s() { # src dst
	fio --output-format=json --bs=$chunk --iodepth=$iodepth --ioengine=io_uring --direct=1 --size="$bytes" \
		--name=r --filename="$1" --rw=read --name=w --filename="$2" --rw=write --fallocate=none --end_fsync=1 \
		2>/dev/null | python3 -c 'import json, sys
print(max(j["job_runtime"] for j in json.load(sys.stdin)["jobs"]) / 1000.0)'
}
now() { date +%s.%N; }

log "saving a $size model with 4 ranks"
"$bin/ckpt-reshard-bench" save --root "$work/root" --job m --ranks 4 --bytes "$bytes" --chunk-bytes $chunk \
	>/dev/null
load0=$(cut -d' ' -f1-3 /proc/loadavg)
fr=() rs=() fw=() ex=() cp=()
for ((i = 0; i < rounds; i++)); do
	log "round $((i + 1))/$rounds: fio read, restore into 3 ranks, fio write, export"
	rm -f "$work/fio.dat"
	fio_s write "$work/fio.dat" >/dev/null # the file fio reads
	fr+=("$(fio_s read "$work/fio.dat" 3)") # three readers, as the three ranks
	rm -f "$work/fio.dat"
	r=$("$bin/ckpt-reshard-bench" restore --root "$work/root" --job m --ranks 3 --chunk-bytes $chunk)
	rs+=("$(echo "$r" | python3 -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')")
	fw+=("$(fio_s write "$work/fio.dat")")
	cp+=("$(fio_copy_s "$work/fio.dat" "$work/fio2.dat")")
	rm -f "$work/fio.dat" "$work/fio2.dat"
	rm -rf "$work/exp"
	t0=$(now)
	"$bin/ckpt" export --root "$work/root" --job m --format safetensors --out "$work/exp" >/dev/null
	t1=$(now)
	ex+=("$(echo "$t1 - $t0" | bc)")
done
rm -rf "$work/exp"
load1=$(cut -d' ' -f1-3 /proc/loadavg)
report=$(python3 - "$bytes" "${fr[*]}" "${rs[*]}" "${fw[*]}" "${ex[*]}" "$load0" "$load1" "$size" "${cp[*]}" <<'EOF'
import statistics as st, sys
b = int(sys.argv[1]); g = b / 2**30
fr, rs, fw, ex = ([float(x) for x in a.split()] for a in sys.argv[2:6])
cp = [float(x) for x in sys.argv[9].split()]
m = st.median
rows = [
    ("fio read (3 jobs as the 3 ranks; O_DIRECT, io_uring, 8M x 8 each)", g / m(fr), None),
    ("restore 4 saved ranks -> 3 ranks, local disk", g / m(rs), (g / m(rs)) / (g / m(fr))),
    ("fio write (new file, O_DIRECT, end fsync)", g / m(fw), None),
    ("ckpt export --format safetensors (read + write + fsync)", g / m(ex), (g / m(ex)) / (g / m(fw))),
    ("fio copy (one read job and one write job at once: an export's limit)", g / m(cp), (g / m(cp)) / (g / m(fw))),
    ("ckpt export / fio copy", g / m(ex), (g / m(ex)) / (g / m(cp))),
]
print("### Elastic restore and export, %s (%d rounds, medians)\n" % (sys.argv[8], len(fr)))
print("| what | GiB/s | ratio | target |")
print("|---|---:|---:|---|")
for (name, gs, r), tgt in zip(rows, ["", ">= 0.7 of fio read", "", ">= 0.7 of fio write", "(ceiling of the above)", ""]):
    print("| %s | %.2f | %s | %s |" % (name, gs, "%.2f" % r if r is not None else "", tgt))
print("\nseconds: fio read %s; restore %s; fio write %s; export %s; fio copy %s" % (fr, rs, fw, ex, cp))
print("load average before %s, after %s" % (sys.argv[6], sys.argv[7]))
EOF
)
emit_report "$report" "$out"
