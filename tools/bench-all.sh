#!/usr/bin/env bash
# tools/bench-all.sh — every figure of docs/benchmarks.md that has a target,
# from one run of the benchmark scripts and programs, each beside its target
# with a met / not-met column, and the commit and machine they were measured
# at. The table in docs/benchmarks.md is this script's output (--doc).
#
# usage: tools/bench-all.sh [--smoke] [--out FILE] [--doc FILE] [--only LIST]
#   --smoke      tiny sizes: checks that every benchmark still runs and
#                reports its figures (a CI test); nothing is judged
#   --out FILE   also write the report to FILE
#   --doc FILE   replace the part of FILE between the lines
#                "<!-- bench-all:begin -->" and "<!-- bench-all:end -->"
#                with the report
#   --only LIST  run only these steps (comma-separated): roles, ls, disk,
#                daemon, peer, preempt, step
# Programs come from $CKPT_BIN (default build/bin) and $CKPT_TESTS_BIN
# (default build/tests). Exits 1 if a benchmark failed or a figure is
# missing; a target not met is reported, not an error.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
smoke=0
out=""
doc=""
only="roles,ls,disk,daemon,peer,preempt,step"
while [ $# -gt 0 ]; do
	case "$1" in
	--smoke) smoke=1; shift ;;
	--out) out=$2; shift 2 ;;
	--doc) doc=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	-h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench-all.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
bench_name=bench-all.sh
. "$here/bench/lib.sh"
if [ -n "$doc" ]; then
	[ -f "$doc" ] || die "--doc: no file $doc"
	grep -qx '<!-- bench-all:begin -->' "$doc" && grep -qx '<!-- bench-all:end -->' "$doc" ||
		die "--doc: $doc has no '<!-- bench-all:begin -->' / '<!-- bench-all:end -->' lines"
fi

export CKPT_BIN=${CKPT_BIN:-$repo/build/bin}
tests_bin=${CKPT_TESTS_BIN:-$repo/build/tests}
# The full run works on the repository's disk (build/, as the scripts do by
# default: TMPDIR may be a tmpfs, where O_DIRECT fails); smoke runs in TMPDIR.
if [ "$smoke" = 0 ] && mkdir -p "$repo/build" 2>/dev/null && [ -w "$repo/build" ]; then
	work=$(mktemp -d "$repo/build/bench-all-XXXXXX")
else
	work=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-bench-all-XXXXXX")
fi
# Kept when a step failed, for its logs.
trap '[ -e "$work/keep" ] && log "logs kept in $work" || rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# The torch baseline is not a target: run only where torch is there already
# (the scripts would otherwise try to install it).
torch=--no-torch
/usr/bin/python3 -c 'import torch' 2>/dev/null && torch=""

# Each step: name, then the command (an array), at full or smoke size.
if [ "$smoke" = 1 ]; then
	roles=("$tests_bin/ckptd-roles-bench" 4 1 64 256)
	ls_=("$here/bench-ls.sh" --versions 20 --ranks 50 --runs 2 --json)
	disk=("$here/bench.sh" --dir "$work" --sizes 16M --iters 1 --fio-reps 2 --torch-iters 1 --no-drop-caches --no-dram --json $torch)
	daemon=("$here/bench-daemon.sh" --dir "$work" --size 32M --regions 4 --iters 2 --json)
	peer=("$here/bench-peer.sh" --dir "$work" --size 16M --iters 1 --json)
	preempt=("$here/bench-preempt.sh" --dir "$work" --size 16M --iters 1 --step-ms 10 --save-at 10 --deadline 30s
		--torch-iters 1 --json $torch)
	step=("$here/bench-step.sh" --dir "$work" --calls 10000 --runs 1 --cpu-seconds 0.2)
else
	roles=("$tests_bin/ckptd-roles-bench" 64 5)
	ls_=("$here/bench-ls.sh" --json)
	disk=("$here/bench.sh" --dir "$work" --sizes "1G 4G" --no-dram --json $torch)
	daemon=("$here/bench-daemon.sh" --dir "$work" --size 1G --iters 7 --json)
	peer=("$here/bench-peer.sh" --dir "$work" --size 1G --iters 5 --json)
	# 1 GiB a rank needs about 22 GiB for the four nodes' pools.
	preempt=("$here/bench-preempt.sh" --dir "$work" --size 512M --iters 3 --json $torch)
	step=("$here/bench-step.sh" --dir "$work" --calls 1000000 --runs 7 --cpu-seconds 3)
fi

# What is measured: the tree as it is when the run starts.
commit=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
dirty=""
[ -n "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null | head -1)" ] &&
	dirty=" (with uncommitted changes)"
t_start=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
failed=()
: >"$work/commands"
run_step() { # name command...
	local name=$1 t0 rc
	shift
	case ",$only," in *",$name,"*) ;; *) return 0 ;; esac
	log "$name: $*"
	local a shown=""
	for a in "$@"; do
		case "$a" in *" "*) a="\"$a\"" ;; esac
		shown+="$a "
	done
	printf '%s\t%s\n' "$name" "$(echo "${shown% }" | sed "s|--dir $work ||; s|$repo/||g")" >>"$work/commands"
	t0=$(date +%s)
	set +e
	"$@" >"$work/$name.out" 2>"$work/$name.err"
	rc=$?
	set -e
	echo "$(( $(date +%s) - t0 ))" >"$work/$name.seconds"
	if [ "$rc" != 0 ]; then
		tail -n 30 "$work/$name.err" >&2
		log "$name: FAILED (exit $rc)"
		failed+=("$name")
		touch "$work/keep"
	fi
}
run_step roles "${roles[@]}"
run_step ls "${ls_[@]}"
run_step disk "${disk[@]}"
run_step daemon "${daemon[@]}"
run_step peer "${peer[@]}"
run_step preempt "${preempt[@]}"
run_step step "${step[@]}"
t_total=$(( $(date +%s) - t_start ))
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
fs=$(df -T "${TMPDIR:-/tmp}" | awk 'NR == 2 { print $2 " on " $1 }')
virt=$(systemd-detect-virt 2>/dev/null || true)

report=$(python3 - "$work" "$smoke" "$only" "${failed[*]:-}" <<EOF
import json, os, re, statistics, sys
work, smoke, only, failed = sys.argv[1], sys.argv[2] == "1", sys.argv[3].split(","), sys.argv[4].split()
med = statistics.median
cmds = dict(l.rstrip("\n").split("\t", 1) for l in open(os.path.join(work, "commands")) if "\t" in l)
rows, missing = [], []

def text(name):
    p = os.path.join(work, name + ".out")
    return open(p).read() if os.path.exists(p) else ""

def last_json(name):
    for line in reversed(text(name).splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None

def row(step, what, value, fmt, target, ok):
    """ok: a function of the value, or None for a figure shown without a target."""
    if value is None:
        missing.append("%s: %s" % (step, what))
        rows.append((step, what, "**missing**", target, "**no**" if target else ""))
        return
    met = "" if ok is None else ("yes" if ok(value) else "**no**")
    if smoke and ok is not None:
        met = "(smoke)"
    rows.append((step, what, fmt % value, target, met))

def seconds(d):  # "60s", "1500ms", "2m"
    m = re.match(r"^(\d+)(ms|s|m)$", d or "")
    return int(m.group(1)) * {"ms": 1e-3, "s": 1.0, "m": 60.0}[m.group(2)] if m else None

def step_ran(name):
    return name in only and name not in failed

if step_ran("roles"):
    lat = {int(m.group(1)): float(m.group(2)) for m in
           re.finditer(r"^\s*(\d+) ranks: median\s+([\d.]+) ms", text("roles"), re.M)}
    if lat:
        w = max(lat)
        row("roles", "commit of one version, %d ranks (64 simulated agents over TCP), median" % w
            if not smoke else "commit of one version, %d ranks, median" % w, lat[w], "%.1f ms", "< 1000 ms",
            lambda v: v < 1000)
    else:
        row("roles", "commit latency", None, "", "< 1000 ms", None)
if step_ran("ls"):
    j = last_json("ls") or {}
    recs = j.get("records", 0)
    row("ls", "\`ckpt ls --daemon\`, %d versions over %s shard records, whole process, median"
        % (j.get("versions", 0), "{:,}".format(recs)), j.get("ls_median_ms"), "%.1f ms", "< 100 ms",
        lambda v: v < 100)
    row("ls", "the coordinator's own listing of them", j.get("engine_list_ms"), "%.2f ms", "", None)
if step_ran("disk"):
    j = last_json("disk") or {}
    for s in j.get("sizes", []) or [{}]:
        b = s.get("bytes", 0)
        h = "%g GiB" % (b / 2.0**30) if b >= 2**30 else "%g MiB" % (b / 2.0**20)
        row("disk", "%s: save stall / memcpy (median / best)" % h, s.get("stall_vs_memcpy"), "%.2f", "<= 1.3",
            lambda v: v <= 1.3)
        row("disk", "%s: save stall / memcpy just before it (median of pairs)" % h,
            s.get("stall_vs_memcpy_paired"), "%.2f", "", None)
        row("disk", "%s: durable GiB/s / fio write GiB/s" % h, s.get("durable_vs_fio_write"), "%.2f", ">= 0.85",
            lambda v: v >= 0.85)
        row("disk", "%s: durable GiB/s, recycled shard files / fio overwrite GiB/s" % h,
            s.get("durable_recycled_vs_fio_overwrite"), "%.2f", ">= 0.90", lambda v: v >= 0.90)
        row("disk", "%s: restore GiB/s / fio read GiB/s" % h, s.get("restore_vs_fio_read"), "%.2f", ">= 0.95",
            lambda v: v >= 0.95)
if step_ran("daemon"):
    j = last_json("daemon") or {}
    row("daemon", "save into node DRAM: stall / memcpy (median / best)", j.get("stall_vs_memcpy"), "%.2f", "", None)
    row("daemon", "LOCAL_MEM commit / durable on disk", j.get("mem_commit_vs_durable"), "%.2f", "", None)
    row("daemon", "restore from LOCAL_MEM: speed / memcpy speed (best memcpy)", j.get("restore_vs_memcpy"), "%.2f",
        ">= 0.80", lambda v: v >= 0.8)
if step_ran("peer"):
    j = last_json("peer") or {}
    row("peer", "PEER_MEM copy GB/s / raw fabric write GB/s", j.get("copy_vs_fabric_write"), "%.2f", ">= 0.70",
        lambda v: v >= 0.70)
    row("peer", "save stall with PEER_MEM / without", j.get("stall_peer_vs_nopeer"), "%.2f", "~1.0", None)
if step_ran("preempt"):
    j = last_json("preempt") or {}
    it, safe = j.get("iters"), j.get("safe_in_time")
    dl = j.get("deadline", "?")
    row("preempt", "notices whose emergency version was safe before the deadline (%s)" % dl,
        None if it is None else safe / float(it) if it else 0.0, "%.2f", "1.00 (every one)", lambda v: v >= 1.0)
    row("preempt", "notice to emergency version safe, median (%s per rank, 4 ranks)"
        % ("%g MiB" % (j["bytes"] / 2.0**20) if j.get("bytes") else "?"), j.get("notice_to_safe_s"), "%.2f s",
        "< deadline (%s)" % dl, lambda v: seconds(dl) is not None and v < seconds(dl))
    row("preempt", "restart from partner DRAM on a new node, ckpt_restore, median", j.get("peer_mem_restore_s"),
        "%.3f s", "", None)
if step_ran("step"):
    res = {m.group(1): (float(m.group(2)), float(m.group(3))) for m in
           re.finditer(r"^RESULT mode=(\w+) ns_per_call=([\d.]+) .*overhead_pct=([\d.]+)", text("step"), re.M)}
    for mode in ("embedded", "joined"):
        ns, pct = res.get(mode, (None, None))
        row("step", "ckpt_step's cost on a 100 ms step, %s (%s ns a call)" % (mode, "%.1f" % ns if ns else "?"),
            pct, "%.5f %%", "< 0.5 %", lambda v: v < 0.5)

print("Measured at commit \`$commit\`$dirty, $(date -u '+%Y-%m-%d %H:%M UTC'), in $t_total s%s." %
      (" at **smoke sizes: the figures are not measurements**" if smoke else ""))
print("Machine: $(nproc) vCPUs ($cpu${virt:+, $virt guest}), $mem RAM, $fs, kernel $(uname -r).")
print("Load average (1, 5, 15 min) at the start: $load_start; at the end: $load_end.")
print()
print("| step | figure | value | target | met |")
print("|---|---|---:|---|---|")
for r in rows:
    print("| %s | %s | %s | %s | %s |" % r)
for f in failed:
    print("| %s | **the benchmark failed** | | | **no** |" % f)
print()
print("Commands (each step's, from the repository root):")
print()
for name in ["roles", "ls", "disk", "daemon", "peer", "preempt", "step"]:
    if name in cmds:
        secs = open(os.path.join(work, name + ".seconds")).read().strip() if os.path.exists(os.path.join(work, name + ".seconds")) else "?"
        print("- %s (%s s): \`%s\`" % (name, secs, cmds[name]))
if missing:
    sys.stderr.write("bench-all.sh: figures missing: %s\n" % "; ".join(missing))
    open(os.path.join(work, "missing"), "w").write("\n".join(missing))
EOF
)

emit_report "$report" "$out"
if [ -n "$doc" ]; then
	printf '%s\n' "$report" >"$work/report.md"
	python3 - "$doc" "$work/report.md" <<'EOF'
import sys
doc, rep = sys.argv[1], sys.argv[2]
lines = open(doc).read().split("\n")
b, e = lines.index("<!-- bench-all:begin -->"), lines.index("<!-- bench-all:end -->")
if e < b:
    sys.exit("bench-all.sh: --doc: the end marker comes before the begin marker")
new = lines[:b + 1] + open(rep).read().rstrip("\n").split("\n") + lines[e:]
open(doc, "w").write("\n".join(new))
EOF
	log "table in $doc replaced"
fi
[ "${#failed[@]}" = 0 ] || die "failed: ${failed[*]}"
[ ! -s "$work/missing" ] || { touch "$work/keep"; die "figures missing (see the report)"; }
log "done in $t_total s"
