#!/usr/bin/env bash
# tools/bench-save.sh — `ckpt save FILE` against this disk's own limit, in one
# run, on one filesystem: the whole command (open, stream the file through
# the staging pool, write, fdatasync, commit), timed from the outside, against
# fio overwriting an allocated file of the same size (O_DIRECT, io_uring, 8 MiB
# blocks, QD 8, end fsync: what writing into a recycled shard file costs the
# disk), and the command's peak RSS against its staging pool.
#
# usage: tools/bench-save.sh [--size 1G] [--iters 5] [--fio-reps 4] [--dir DIR]
#                            [--no-cold] [--no-gc] [--json]
# Per round, each a new version of one job, the modes in turn:
#   keep      `ckpt save --keep 1 FILE`: the defaults, retention in the command,
#             so shard files are recycled (the first three saves fill the
#             pool and are not counted)
#   gc        `ckpt save FILE` then `ckpt gc --keep 1`: retention by a
#             separate command, new shard files (recycling off by default)
#   gc+recycle the same with `ckpt save --recycle` (--no-gc leaves both out)
#   cold      as keep, the page cache dropped before each save (the input is
#             read from the same disk the shard is written to); --no-cold
#             leaves it out (it needs /proc/sys/vm/drop_caches)
# The input stays in the page cache for the others (written just before).
# fio: a new file's write once, then --fio-reps overwrites of it, half before
# the saves and half after, and one at the start of each round (each save
# is also set against its round's: the paired ratio, the target's figure);
# medians everywhere. Prints a markdown report, then
# one BENCH-ROW line per figure (tools/bench-all.sh's table); --json prints
# one JSON object instead of the report.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
bench_name=bench-save.sh
. "$here/bench/lib.sh"
size=1G iters=5 fio_reps=4 dir="" cold=1 gc=1 json=0
while [ $# -gt 0 ]; do
	case "$1" in
	--size) size=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	--fio-reps) fio_reps=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--no-cold) cold=0; shift ;;
	--no-gc) gc=0; shift ;;
	--json) json=1; shift ;;
	-h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$1' (--help)" ;;
	esac
done
bin=${CKPT_BIN:-$repo/build/bin}
[ -x "$bin/ckpt" ] || die "no $bin/ckpt (build first, or set CKPT_BIN)"
command -v fio >/dev/null || die "no fio"
bytes=$(to_bytes "$size")
[ -n "$bytes" ] && [ "$bytes" -gt 0 ] || die "--size: not a size: $size"
[ -w /proc/sys/vm/drop_caches ] || cold=0
made=""
trap '[ -z "$made" ] || rm -rf "$made"' EXIT
if [ -z "$dir" ]; then
	mkdir -p "$repo/build"
	dir=$(mktemp -d "$repo/build/bench-save-XXXXXX")
	made=$dir
else
	dir=$(mktemp -d "$dir/bench-save-XXXXXX")
	made=$dir
fi
work=$dir
unset CKPT_STAGING_BYTES CKPT_RECYCLE CKPT_KEEP_VERSIONS CKPT_SNAPSHOT_OVERLAP CKPT_DAEMON CKPT_FAULT

# The input: pseudo-random (incompressible, not that it matters: no
# compression by default), fsynced, in the page cache.
log "input: $size"
python3 - "$work/in.bin" "$bytes" <<'EOF'
import os, sys
path, n = sys.argv[1], int(sys.argv[2])
block = os.urandom(1 << 20)
with open(path, "wb") as f:
    i = 0
    while n > 0:
        k = min(n, len(block))
        f.write((block[i % 997:] + block[:i % 997])[:k])
        n -= k
        i += 1
    f.flush()
    os.fsync(f.fileno())
EOF

fio_run() { # new|over: seconds of one sequential write of the file (end fsync included)
	local extra=()
	[ "$1" = new ] && { rm -f "$work/fio.dat"; extra=(--fallocate=none); }
	fio --name=w --filename="$work/fio.dat" --rw=write --bs=8M --iodepth=8 --ioengine=io_uring --direct=1 \
		--size="$bytes" --end_fsync=1 "${extra[@]}" --output-format=json |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["jobs"][0]["job_runtime"] / 1000.0)'
}
# timed OUT CMD...: runs CMD; "seconds peak_rss_kib" to OUT; its status.
timed() {
	local out=$1
	shift
	python3 - "$out" "$@" <<'EOF'
import os, sys, time
t = time.perf_counter()
pid = os.fork()
if pid == 0:
    fd = os.open(sys.argv[1] + ".log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.execv(sys.argv[2], sys.argv[2:])
_, status, ru = os.wait4(pid, 0)
open(sys.argv[1], "a").write("%.6f %d\n" % (time.perf_counter() - t, ru.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
EOF
}
drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
warm() { cat "$work/in.bin" >/dev/null; }

load0=$(cut -d' ' -f1-3 /proc/loadavg)
log "fio: a new file, then overwrites; $((iters + 3)) rounds of saves"
fio_new=$(fio_run new)
: >"$work/fio.over"
for _ in $(seq $((fio_reps / 2))); do fio_run over >>"$work/fio.over"; done

# The modes take turns, round by round, so that a shared machine's drift
# reaches each alike; the first three rounds fill the recycling pools and
# are not counted. Disk: about 7 times the size (the input, fio's file, each
# root's newest version and pooled file).
modes="keep"
[ "$gc" = 1 ] && modes+=" gc gcr"
[ "$cold" = 1 ] && modes+=" cold"
save_mode() { # mode version
	local m=$1 v=$2 flag=()
	local root=$work/r$m
	case "$m" in keep|cold) flag=(--keep 1) ;; gcr) flag=(--recycle) ;; esac
	# cold saves into keep's root, version numbers interleaved: one pool
	# less on the disk.
	case "$m" in keep) v=$((2 * v - 1)) ;; cold) v=$((2 * v)); root=$work/rkeep ;; esac
	[ "$m" = cold ] && drop
	timed "$work/$m.raw" "$bin/ckpt" save --root "$root" --job s --version "$v" "${flag[@]}" "$work/in.bin" ||
		die "ckpt save ($m) failed: $(tail -3 "$work/$m.raw.log")"
	case "$m" in gc|gcr) "$bin/ckpt" gc --root "$work/r$m" --job s --keep 1 >/dev/null ;; cold) warm ;; esac
}
# Each round starts with a fio overwrite: the saves of the round are set
# against it too (paired), which cancels most of the drift between rounds.
warm
: >"$work/fio.round.raw"
for v in $(seq $((iters + 3))); do
	log "round $v: fio $modes"
	fio_run over >>"$work/fio.round.raw"
	for m in $modes; do save_mode "$m" "$v"; done
done
for m in $modes; do tail -n "$iters" "$work/$m.raw" >"$work/$m"; done
tail -n "$iters" "$work/fio.round.raw" >"$work/fio.round"
cat "$work/fio.round" >>"$work/fio.over"
for _ in $(seq $((fio_reps - fio_reps / 2))); do fio_run over >>"$work/fio.over"; done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
# The command's staging pool: 16 chunks of the default 8 MiB, or the file.
pool=$(( 16 * 8 * 1048576 ))
[ "$bytes" -lt "$pool" ] && pool=$(( (bytes + 8388607) / 8388608 * 8388608 ))

python3 - "$work" "$bytes" "$fio_new" "$pool" "$json" "$load0" "$load1" "$size" "$iters" <<'EOF'
import json, os, statistics, sys
work, n, fio_new, pool, as_json, load0, load1, size, iters = sys.argv[1:]
n, fio_new, pool = int(n), float(fio_new), int(pool)
gib = n / 2.0**30
med = statistics.median
def runs(name):
    p = os.path.join(work, name)
    if not os.path.exists(p):
        return None
    rows = [l.split() for l in open(p) if l.strip()]
    return [float(r[0]) for r in rows], [int(r[1]) for r in rows]
over = [float(l) for l in open(os.path.join(work, "fio.over")) if l.strip()]
fo = med(over)
res = {"bytes": n, "iters": int(iters), "fio_write_new_s": fio_new, "fio_overwrite_s": over, "pool_bytes": pool,
       "load_start": load0, "load_end": load1}
names = {"keep": "`ckpt save --keep 1` (recycled shard files: the default with --keep)",
         "gc": "`ckpt save` + `ckpt gc --keep 1` (new shard files)",
         "gcr": "`ckpt save --recycle` + `ckpt gc --keep 1`",
         "cold": "`ckpt save --keep 1`, input not in the page cache"}
rounds = [float(l) for l in open(os.path.join(work, "fio.round")) if l.strip()]
for k in names:
    r = runs(k)
    if r:
        res[k] = {"seconds": r[0], "median_s": med(r[0]), "peak_rss_kib": max(r[1]),
                  "vs_fio_overwrite": fo / med(r[0]), "vs_fio_new_write": fio_new / med(r[0]),
                  "vs_fio_overwrite_paired": med([f / t for f, t in zip(rounds, r[0])])}
if as_json == "1":
    print(json.dumps(res))
else:
    print("# ckpt save FILE, %s, against fio on the same disk\n" % size)
    print("load average %s at the start, %s at the end; medians of %s (fio overwrite: %d runs)\n"
          % (load0, load1, iters, len(over)))
    print("| what | time (s, median) | GiB/s | / fio overwrite | / fio overwrite of its round (median) "
          "| / fio new-file write | peak RSS MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print("| fio write, new file (once) | %.3f | %.2f | | | | |" % (fio_new, gib / fio_new))
    print("| fio overwrite of the allocated file | %.3f | %.2f | | | | |" % (fo, gib / fo))
    for k, label in names.items():
        if k in res:
            x = res[k]
            print("| %s | %.3f | %.2f | %.2f | %.2f | %.2f | %.0f |" % (
                label, x["median_s"], gib / x["median_s"], x["vs_fio_overwrite"], x["vs_fio_overwrite_paired"],
                x["vs_fio_new_write"], x["peak_rss_kib"] / 1024.0))
    print("\nper round (s): fio overwrite " + " ".join("%.2f" % f for f in rounds) + "; " +
          "; ".join("%s %s" % (k, " ".join("%.2f" % t for t in res[k]["seconds"])) for k in names if k in res))
    print("\nstaging pool: %d MiB" % (pool >> 20))
h = "%g GiB" % gib if n >= 2**30 else "%g MiB" % (n / 2.0**20)
def row(fig, v, fmt, target="", ok=None):
    r = {"figure": fig, "value": v, "format": fmt, "target": target}
    if ok is not None:
        r["ok"] = ok
    print("BENCH-ROW " + json.dumps(r))
k = res.get("keep")
row("%s: `ckpt save --keep 1` GiB/s (recycled shard files) / fio overwrite GiB/s, each save against "
    "the fio overwrite just before it (median of pairs)" % h, k and k["vs_fio_overwrite_paired"], "%.2f", ">= 0.80")
row("%s: the same, median save against median fio overwrite" % h, k and k["vs_fio_overwrite"], "%.2f")
rss = k and k["peak_rss_kib"] / 1024.0
row("%s: peak RSS of `ckpt save` (staging pool %d MiB), MiB" % (h, pool >> 20), rss, "%.0f MiB",
    "<= pool + 64 MiB", None if rss is None else rss <= (pool >> 20) + 64)
for key, fig in (("gc", "`ckpt save` + `ckpt gc --keep 1` (new files) / fio overwrite"),
                 ("gcr", "`ckpt save --recycle` + `ckpt gc --keep 1` / fio overwrite"),
                 ("cold", "`ckpt save --keep 1`, input not cached / fio overwrite")):
    if key in res:
        row("%s: %s" % (h, fig), res.get(key, {}).get("vs_fio_overwrite"), "%.2f")
EOF
