#!/usr/bin/env bash
# tools/bench-preempt.sh — preemption notices and recovery, in one run: a
# coordinator and four node agents (nK on 127.0.0.K, in two racks: n1 n2,
# n3 n4; node and peer pools) with one libckpt rank per node
# (ckpt-rank-bench train: a step of --step-ms, a barrier that keeps the
# ranks in lockstep as an all-reduce would, then ckpt_step; a regular
# checkpoint at step --save-at, or later once every agent's pool is ready),
# tiers local_mem,peer_mem,local_disk, --size of state per rank.
# Per iteration (a new job each time), once the regular checkpoint is in
# every node's DRAM and on disk: `ckpt preempt --node n2 --deadline 60s`,
# timed from the command to the coordinator's "emergency version S is safe
# off the noticed nodes" and to every rank's EXIT; then n2 is replaced (its
# agent restarted with empty roots). After the last iteration, restarted
# ranks restore the emergency version from each tier, a new process each
# time: LOCAL_MEM (rank 0 on n1, agent alive), PEER_MEM (n2's rank 1 on a
# new node n5 with empty roots), LOCAL_DISK (rank 2 on n3, its agent
# restarted: its DRAM is gone). Baseline: torch.save + fsync and
# torch.load (page cache dropped) of one tensor of the same size (Debian's
# python3-torch), on the same disk.
#
# usage: tools/bench-preempt.sh [--size 1G] [--iters 3] [--step-ms 20] [--save-at 50]
#                               [--deadline 60s] [--pool-size M] [--peer-pool-size M]
#                               [--torch-iters 3] [--no-torch] [--dir DIR] [--keep] [--json]
#                               [--out FILE]
# --no-torch leaves the torch baseline out (it is not a target).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

size=1G
iters=3
step_ms=20
save_at=50
deadline=60s
pool=""
peer_pool=""
torch_iters=3
torch=1
dir=""
json=""
keep=""
out=""
py=/usr/bin/python3   # Debian's python3-torch; a pyenv python3 on PATH lacks torch

usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

while [ $# -gt 0 ]; do
	case "$1" in
	--size) size=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	--step-ms) step_ms=$2; shift 2 ;;
	--save-at) save_at=$2; shift 2 ;;
	--deadline) deadline=$2; shift 2 ;;
	--pool-size) pool=$2; shift 2 ;;
	--peer-pool-size) peer_pool=$2; shift 2 ;;
	--torch-iters) torch_iters=$2; shift 2 ;;
	--no-torch) torch=""; shift ;;
	--dir) dir=$2; shift 2 ;;
	--json) json=1; shift ;;
	--keep) keep=1; shift ;;
	--out) out=$2; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "bench-preempt.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
	esac
done

bench_name=bench-preempt.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench/lib.sh"

[[ $size =~ ^[0-9]+[KkMmGg]?$ ]] || die "--size '$size' is not a number with an optional K/M/G suffix"
[[ $deadline =~ ^[0-9]+(ms|s|m)$ ]] || die "--deadline '$deadline' is not a duration (60s, 1500ms, 2m)"
for v in iters step_ms save_at torch_iters; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--${v//_/-} '${!v}' is not a positive number"
done
bytes=$(to_bytes "$size")
[ "$bytes" -ge $((1 << 20)) ] || die "--size: at least 1M"
mib=$(( (bytes + (1 << 20) - 1) >> 20 ))
# Node pools: two images (the regular checkpoint and the emergency one).
# Peer pools: three. The job's restore point in a peer pool (the regular
# checkpoint, newest committed at PEER_MEM) is never evicted, and once n2
# leaves placement three nodes take four ranks' emergency copies, so one of
# them holds its restore-point copy and two emergency copies. With two
# images that node refuses the second lease everywhere and the notice is
# not safe (seen in about one run in three at 16 MiB). Four nodes' pools at
# 1 GiB a rank need about 26 GiB; --size 512M fits a machine with 16 GiB free.
[ -n "$pool" ] || pool=$(( mib * 2200 / 1024 ))M
[ -n "$peer_pool" ] || peer_pool=$(( mib * 3300 / 1024 ))M
for v in "$pool" "$peer_pool"; do
	[[ $v =~ ^[0-9]+[KkMmGg]?$ ]] || die "pool size '$v' is not a number with an optional K/M/G suffix"
done

bin=${CKPT_BIN:-$repo/build/bin}
for exe in ckptd ckpt ckpt-rank-bench; do
	[ -x "$bin/$exe" ] || die "no $bin/$exe: build the project first (cmake --build build)"
done
{ command -v fi_info >/dev/null && fi_info -p 'tcp;ofi_rxm' >/dev/null 2>&1; } ||
	die "libfabric's tcp;ofi_rxm provider is not available (fi_info -p 'tcp;ofi_rxm')"

apt_install() {
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		log "installing $1 with apt-get"
		DEBIAN_FRONTEND=noninteractive apt-get install -y "$1" >/dev/null ||
			{ apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y "$1" >/dev/null; }
	else
		return 1
	fi
}
if [ -n "$torch" ]; then
	[ -x "$py" ] || die "$py not found (apt-get install python3-torch)"
	"$py" -c 'import torch' 2>/dev/null || apt_install python3-torch ||
		die "$py cannot import torch (apt-get install python3-torch)"
	"$py" -c 'import torch' 2>/dev/null || die "$py still cannot import torch"
else
	[ -x "$py" ] || py=python3
fi

# Four ranks' state, four agents' node and peer pools, and a margin.
need_kib=$(( ( (4 * bytes + 4 * ($(to_bytes "$pool") + $(to_bytes "$peer_pool"))) >> 10) + (3 << 19) ))
avail_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
[ "$avail_kib" -gt "$need_kib" ] ||
	die "needs about $((need_kib >> 20)) GiB of memory, $((avail_kib >> 20)) GiB available; try --size 512M"

if [ -z "$dir" ]; then
	mkdir -p "$repo/build"
	work=$(mktemp -d "$repo/build/bench-preempt-XXXXXX")
else
	mkdir -p "$dir"
	work=$(mktemp -d "$dir/bench-preempt-XXXXXX")
fi
# shellcheck source=tools/bench/cluster.sh
. "$here/bench/cluster.sh"
rank_pids=()
cleanup() {
	local p
	for p in "${rank_pids[@]}"; do cl_kill "$p"; done
	cl_stop_all
	if [ -n "$keep" ]; then log "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
raw=$work/results.jsonl
: >"$raw"

drop_caches() {
	sync
	echo 3 2>/dev/null >/proc/sys/vm/drop_caches || return 1
}

t_start=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# ------------------------------------------------------------ the daemons

cl_token
cl_coord_start --peer-replicas 1
# Two racks (failure domains), n1 and n2 in one, n3 and n4 in the other:
# partner placement deals the racks out in turn, which also gives every
# node exactly one other node's copies (with all four in one domain, the
# placement gives n1 three nodes' copies: see docs/benchmarks-history.md).
for k in 1 2 3 4; do
	cl_agent_start "$k" --pool-size "$pool" --peer-pool-size "$peer_pool" --domain "rack$(( (k + 1) / 2 ))"
done
cl_wait_up n1 n2 n3 n4
log "coordinator $cl_coord_addr, agents n1..n4 (pools $pool, peer pools $peer_pool), $size per rank, in $work"

# Waits until file has a line of kind, or pid has exited (then fails).
wait_kind() { # file kind pid timeout_s what
	local _
	for _ in $(seq $(($4 * 10))); do
		grep -q "\"kind\": \"$2\"" "$1" 2>/dev/null && return 0
		cl_alive "$3" || { tail -n 20 "${1%.json}.log" >&2; die "$5: the rank exited (log: ${1%.json}.log)"; }
		sleep 0.1
	done
	die "$5: no '$2' after $4 s (log: ${1%.json}.log)"
}

# ------------------------------------------------------------ notices

for ((i = 1; i <= iters; i++)); do
	job=pre$i
	log "iteration $i/$iters: job $job, 4 ranks training ($step_ms ms steps), a regular checkpoint at step $save_at"
	rank_pids=()
	# The ranks step in lockstep, as a data-parallel job's all-reduce keeps
	# them: a barrier through this file (64 bytes a rank).
	head -c 256 /dev/zero >"$work/$job.sync"
	for r in 0 1 2 3; do
		cl_rank_env "$job" "$r" 4 $((r + 1))
		"${cl_env[@]}" "$bin/ckpt-rank-bench" train --size "$bytes" --step-ms "$step_ms" --save-at "$save_at" \
			--sync "$work/$job.sync" --save-when "$work/$job.go" --timeout 600 \
			>"$work/$job.r$r.json" 2>"$work/$job.r$r.log" &
		rank_pids+=($!)
	done
	# Each agent prepares the job's DRAM pool (mapped, pre-faulted, locked)
	# when its rank registers; a save before that waits up to --segment-wait.
	# Four agents doing it at once on this machine take seconds: the regular
	# checkpoint waits until every pool is ready.
	# A pool the agent made ahead (--pools-ahead) is taken ready, or becomes
	# ready once taken: either line says so.
	ready="job=$job\]: (DRAM pool ready|this job takes a [0-9]+-byte DRAM pool made ahead \(ready\))"
	for k in 1 2 3 4; do
		for _ in $(seq 600); do
			grep -qE "$ready" "$work/n$k.log" && break
			sleep 0.1
		done
		grep -qE "$ready" "$work/n$k.log" || die "$job: n$k's DRAM pool is not ready after 60 s"
	done
	touch "$work/$job.go"
	for r in 0 1 2 3; do
		wait_kind "$work/$job.r$r.json" ready "${rank_pids[$r]}" 180 "$job rank $r"
	done
	sleep 1 # the regular checkpoint's last writes settle
	log "iteration $i: regular checkpoint at every tier; ckpt preempt --node n2 --deadline $deadline"
	cli_ns=$(date +%s%N)
	"$bin/ckpt" preempt --daemon "$cl_coord_addr" --token-file "$work/token" --job "$job" --node n2 \
		--deadline "$deadline" >"$work/$job.preempt.out" 2>&1 ||
		{ cat "$work/$job.preempt.out" >&2; die "ckpt preempt failed"; }
	cli_end_ns=$(date +%s%N)
	for r in 0 1 2 3; do
		wait_kind "$work/$job.r$r.json" exit "${rank_pids[$r]}" 120 "$job rank $r"
	done
	for r in 0 1 2 3; do
		wait "${rank_pids[$r]}" || die "$job rank $r exited $? (log: $work/$job.r$r.log)"
	done
	rank_pids=()
	# The coordinator's log lines of this job, with their times.
	grep "job=$job\]" "$work/coord.log" >"$work/$job.coord.log" || true
	"$py" - "$work" "$job" "$i" "$cli_ns" "$cli_end_ns" >>"$raw" <<'EOF' || die "iteration $i: the notice's record is incomplete"
import calendar, json, re, sys, time
work, job, it, cli_ns, cli_end_ns = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])

def ts(line):  # 2026-11-29T13:53:57.067Z
    t = line.split()[0]
    return calendar.timegm(time.strptime(t[:19], "%Y-%m-%dT%H:%M:%S")) * 10**9 + int(t[20:23]) * 10**6

notice = decided = safe = None
step = None
for line in open("%s/%s.coord.log" % (work, job)):
    if "preemption notice (cli)" in line and notice is None:
        notice = ts(line)
    elif "emergency checkpoint at step" in line and decided is None:
        decided = ts(line)
        step = int(re.search(r"at step (\d+)", line).group(1))
        tier = re.search(r": (\w+), expected", line).group(1)
    elif "is safe off the noticed nodes" in line:
        safe = ts(line)
ranks = []
for r in range(4):
    ev = [json.loads(l) for l in open("%s/%s.r%d.json" % (work, job, r)) if l.strip()]
    em = [e for e in ev if e["kind"] == "save" and e["emergency"]]
    ex = [e for e in ev if e["kind"] == "exit"][0]
    ready = [e for e in ev if e["kind"] == "ready"][0]
    # Its partner copies of the emergency version: where, and whether each
    # went in ("n3" made, "n1!" refused or failed).
    tries = []
    for line in open("%s/%s.r%d.log" % (work, job, r)):
        m = re.search(r" v=%d: PEER_MEM copy on (\S+) (\(|failed)" % (step or 0), line)
        if m:
            tries.append(m.group(1) + ("" if m.group(2) == "(" else "!"))
    ranks.append({"rank": r, "save_ns": em[0]["wall_ns"] if em else None, "stall_s": em[0]["stall_s"] if em else None,
                  "step": em[0]["step"] if em else None, "exit_ns": ex["wall_ns"], "regular_peer": ready["peer"],
                  "emergency_copies": tries})
if None in (notice, decided) or any(r["step"] != step for r in ranks):
    sys.exit("notice %s, decision %s, safe %s; ranks %s" % (notice, decided, safe, ranks))
print(json.dumps({"kind": "notice", "iter": it, "job": job, "step": step, "tier": tier, "cli_ns": cli_ns,
                  "cli_end_ns": cli_end_ns,
                  "notice_ns": notice, "decided_ns": decided, "safe_ns": safe, "missed": safe is None,
                  "ranks": ranks}))
EOF
	if ((i < iters)); then
		# The job is over: its versions are deleted everywhere, as an operator
		# would. Each partner keeps a job's restore point (its newest committed
		# version) in its peer pool for good, so without this the next job's
		# copies would find the pools full of this one's and be refused.
		vers=$("$bin/ckpt" ls --daemon "$cl_coord_addr" --token-file "$work/token" --job "$job" --json |
			"$py" -c 'import json, sys; print(" ".join(str(v["version"]) for v in json.load(sys.stdin)))') ||
			die "$job: ckpt ls --daemon failed"
		for v in $vers; do
			"$bin/ckpt" rm --daemon "$cl_coord_addr" --token-file "$work/token" --job "$job" --version "$v" \
				>>"$work/$job.rm.out" 2>&1 || { cat "$work/$job.rm.out" >&2; die "$job: ckpt rm --version $v failed"; }
		done
		for _ in $(seq 300); do
			left=$("$bin/ckpt" ls --daemon "$cl_coord_addr" --token-file "$work/token" --job "$job" --json |
				"$py" -c 'import json, sys; print(len(json.load(sys.stdin)))')
			[ "$left" = 0 ] && break
			sleep 0.1
		done
		[ "$left" = 0 ] || die "$job: $left versions still listed 30 s after ckpt rm"
		# n2 was preempted: a replacement with the same name and empty roots.
		# The job's disk copies on the other nodes are not needed again.
		cl_agent_stop 2
		rm -rf "$work/n2.root" "$work/n2.ckpt"
		rm -rf "$work"/n[134].ckpt/jobs/"$job"
		cl_agent_start 2
		cl_wait_up n2
	fi
done

# ------------------------------------------------------------ restarts

# The last iteration's emergency version, restored by a restarted rank from
# each tier (a new process each time; --iters contexts one after the other).
ver=$(tail -n 1 "$raw" | "$py" -c 'import json, sys; n = json.load(sys.stdin); print(0 if n["missed"] else n["step"])')
# A new process each time, as a restarted trainer: its launch time is
# recorded, to show what exec and the libraries' start cost before main().
# Before each: `prepare` (a function name, or true).
restore() { # tag rank node tier prepare
	local tag=$1 t launch
	log "restart: rank $2 on n$3 restores version $ver from $4 ($iters times)"
	for ((t = 1; t <= iters; t++)); do
		$5
		cl_rank_env "$job" "$2" 4 "$3"
		launch=$(date +%s%N)
		# The newest committed version, as a restarted trainer asks: with an
		# explicit version, libckpt does not ask the coordinator whether a
		# version this root holds as PENDING was committed after the rank
		# left (see docs/benchmarks-history.md).
		"${cl_env[@]}" "$bin/ckpt-rank-bench" restore --size "$bytes" --iters 1 \
			>"$work/$tag-$t.json" 2>"$work/$tag-$t.log" ||
			{ grep -v "^ckpt INFO" "$work/$tag-$t.log" | tail -n 20 >&2; die "$tag-$t failed (log: $work/$tag-$t.log)"; }
		# A restarted or new node's agent fetches the copy (from the
		# partner, or its own disk) into its DRAM and the rank's read waits
		# for it (0e7c601): that tier's bytes then arrive through LOCAL_MEM.
		grep -q "restored from $4" "$work/$tag-$t.log" ||
			{ [ "$4" != LOCAL_MEM ] && grep -q "restored from LOCAL_MEM" "$work/$tag-$t.log"; } ||
			die "$tag-$t: not restored from $4 (log: $work/$tag-$t.log)"
		grep -q "\"version\": $ver," "$work/$tag-$t.json" || die "$tag-$t: did not restore version $ver"
		sed "s/^{/{\"tier\": \"$4\", \"launch_ns\": $launch, /" "$work/$tag-$t.json" >>"$raw"
	done
}
# A replacement node for n2, started afresh for each restart: its agent
# would otherwise prefetch the shard from partner DRAM into its own pool
# after the first restart, and the next would read node DRAM.
new_node() {
	cl_agent_stop 5
	rm -rf "$work/n5.root" "$work/n5.ckpt"
	cl_agent_start 5 --pool-size "$pool" --peer-pool-size "$peer_pool" --domain rack1
	cl_wait_up n5
}
# n3's agent restarted: its DRAM copies are gone, its disk is not.
restart_n3() {
	cl_agent_stop 3
	cl_agent_start 3
	cl_wait_up n3
}
if [ "$ver" = 0 ]; then
	log "the last emergency version was not safe before the deadline: no restarts to time"
else
	restore restart-mem 0 1 LOCAL_MEM true
	cl_agent_stop 2 # n2 is gone; its rank comes back on a new node
	restore restart-peer 1 5 PEER_MEM new_node
	cl_agent_stop 5
	restore restart-disk 2 3 LOCAL_DISK restart_n3
fi
cl_stop_all

# ------------------------------------------------------------ torch

if [ -n "$torch" ]; then
	log "torch.save + fsync / torch.load of one $size tensor ($torch_iters iterations)"
	drop_caches || true
	"$py" "$here/bench/torch-baseline.py" --path "$work/torch.pt" --size "$bytes" --tensors 1 \
		--iters "$torch_iters" | sed 's/^{/{"kind": "torch", /' >>"$raw"
	# What a restarted python trainer pays before torch.load can run.
	t0=$(date +%s%N)
	"$py" -c 'import torch' || die "$py cannot import torch"
	echo "{\"kind\": \"torch_import\", \"s\": $(( $(date +%s%N) - t0 ))e-9}" >>"$raw"
fi
t_total=$(( $(date +%s) - t_start ))
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# ------------------------------------------------------------ report

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
fs=$(df -T "$work" | awk 'NR == 2 { print $2 " on " $1 }')
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git -C "$repo" status --porcelain 2>/dev/null | head -1)" ] && commit="$commit (with uncommitted changes)"

report=$("$py" - "$raw" "$json" <<EOF
import json, statistics, sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
want_json = sys.argv[2] == "1"
med = statistics.median
allnotices = [r for r in rows if r["kind"] == "notice"]
notices = [r for r in allnotices if not r["missed"]]
regular_peer = sum(all(x["regular_peer"] == "committed" for x in n["ranks"]) for n in allnotices)
restores = [r for r in rows if r["kind"] == "restore"]
torch = next((r for r in rows if r["kind"] == "torch"), None)  # None: --no-torch
torch_import = next((r["s"] for r in rows if r["kind"] == "torch_import"), None)
size = $bytes
gib = size / float(1 << 30)

def s(a, b):
    return (b - a) / 1e9

fig = {
    "notice_to_safe_s": [s(n["cli_ns"], n["safe_ns"]) for n in notices],
    "notice_to_decided_s": [s(n["cli_ns"], n["decided_ns"]) for n in allnotices],
    "notice_to_step_s": [s(n["cli_ns"], max(r["save_ns"] for r in n["ranks"])) for n in allnotices],
    "step_to_safe_s": [s(max(r["save_ns"] for r in n["ranks"]), n["safe_ns"]) for n in notices],
    "notice_to_exit_s": [s(n["cli_ns"], max(r["exit_ns"] for r in n["ranks"])) for n in allnotices],
    "emergency_stall_s": [max(r["stall_s"] for r in n["ranks"]) for n in allnotices],
}
tiers = {}
for t in ("LOCAL_MEM", "PEER_MEM", "LOCAL_DISK"):
    rs = [r for r in restores if r["tier"] == t]
    tiers[t] = {"restore_s": [r["restore_s"] for r in rs], "resumed_s": [r["resumed_s"] for r in rs],
                "exec_s": [(r["main_wall_ns"] - r["launch_ns"]) / 1e9 for r in rs]}
mc = [r["memcpy_s"] for r in restores]
res = {"bytes": size, "ranks": 4, "iters": len(allnotices), "safe_in_time": len(notices),
       "regular_committed_at_peer": regular_peer,
       "n2_copies": [n["ranks"][1]["emergency_copies"] for n in allnotices],
       "step_ms": $step_ms, "deadline": "$deadline", "tier": sorted({n["tier"] for n in allnotices}),
       "torch_save_fsync_s": torch and torch["save_fsync_s"], "torch_load_s": torch and torch["load_s"],
       "torch_save_fsync_s_all": torch and torch["save_fsync_s_all"], "torch_load_s_all": torch and torch["load_s_all"],
       "torch_import_s": torch_import, "memcpy_s": min(mc) if mc else None}
for k, v in fig.items():
    res[k] = med(v) if v else None
    res[k + "_all"] = v
for t, d in tiers.items():
    for k, v in d.items():
        res[t.lower() + "_" + k] = med(v) if v else None
        res[t.lower() + "_" + k + "_all"] = v
if want_json:
    print(json.dumps(res))
    sys.exit(0)

def rng(v):
    return "%.3f - %.3f" % (min(v), max(v)) if v else "-"

def m(v):
    return "%.3f" % med(v) if v else "-"

print("Machine: $(nproc) vCPUs ($cpu), $mem RAM, filesystem $fs, kernel $(uname -r); 4 agents and 4 ranks on it,")
print("libfabric tcp;ofi_rxm on lo; pools $pool, peer pools $peer_pool. torch %s via $py. Commit $commit.  "
      % (torch["torch"] if torch else "(not run)"))
print("Run took ${t_total} s. Load average (1, 5, 15 min) at start: $load_start; at end: $load_end.")
print()
print("Emergency versions safe off n2 before the deadline: %d of %d notices. Regular checkpoints committed at "
      "PEER_MEM before the notice: %d of %d. Where n2's rank's emergency copy went (\"!\": refused, or failed): %s."
      % (len(notices), len(allnotices), regular_peer, len(allnotices),
         "; ".join(" ".join(c) or "nowhere" for c in res["n2_copies"])))
print()
print("| %g GiB per rank, 4 ranks, %d ms steps, deadline $deadline | median (s) | range (s) |" % (gib, $step_ms))
print("|---|---:|---:|")
print("| notice (\`ckpt preempt\` run) to the coordinator's decision | %s | %s |" % (m(fig["notice_to_decided_s"]), rng(fig["notice_to_decided_s"])))
print("| notice to the last rank at the emergency step (its save starts) | %s | %s |" % (m(fig["notice_to_step_s"]), rng(fig["notice_to_step_s"])))
print("| emergency save's stall (slowest rank) | %s | %s |" % (m(fig["emergency_stall_s"]), rng(fig["emergency_stall_s"])))
print("| emergency step to \"safe off the noticed nodes\" (n2's shard in partner DRAM, the others' in their node's DRAM) | %s | %s |"
      % (m(fig["step_to_safe_s"]), rng(fig["step_to_safe_s"])))
print("| **notice to emergency version safe** (%d of %d) | **%s** | %s |" % (len(notices), len(allnotices), m(fig["notice_to_safe_s"]), rng(fig["notice_to_safe_s"])))
print("| notice to every rank's EXIT | %s | %s |" % (m(fig["notice_to_exit_s"]), rng(fig["notice_to_exit_s"])))
if torch:
    print("| torch.save + flush + fsync of one %g GiB tensor (one process; %d runs) | %.3f | %s |"
          % (gib, len(torch["save_fsync_s_all"]), torch["save_fsync_s"], rng(torch["save_fsync_s_all"])))
print()
print("| restart of one rank, %g GiB, from | ckpt_restore (s, median) | open + restore (s) | range of restore (s) | GiB/s | exec to main() (s) |" % gib)
print("|---|---:|---:|---:|---:|---:|")
names = {"LOCAL_MEM": "LOCAL_MEM (same node, agent alive)", "LOCAL_DISK": "LOCAL_DISK (agent restarted: DRAM gone)",
         "PEER_MEM": "PEER_MEM (new node n5, empty roots: n2 gone)"}
for t in ("LOCAL_MEM", "PEER_MEM", "LOCAL_DISK"):
    d = tiers[t]
    print("| %s | %s | %s | %s | %s | %s |" % (names[t], m(d["restore_s"]), m(d["resumed_s"]), rng(d["restore_s"]),
                                             "%.2f" % (gib / med(d["restore_s"])) if d["restore_s"] else "-",
                                             m(d["exec_s"])))
if torch:
    print("| torch.load, page cache dropped (%d runs) | %.3f | | %s | %.2f | %.3f (python3 -c 'import torch') |"
          % (len(torch["load_s_all"]), torch["load_s"], rng(torch["load_s_all"]), gib / torch["load_s"], torch_import))
if mc:
    print("| memcpy of the same bytes (best of %d) | %.3f | | | %.2f | |" % (len(mc), min(mc), gib / min(mc)))
print()
print("<details><summary>raw results (JSON lines)</summary>")
print()
print("\`\`\`")
for r in rows:
    print(json.dumps(r))
print("\`\`\`")
print("</details>")
EOF
)

emit_report "$report" "$out"
