#!/usr/bin/env bash
# tools/bench-peer.sh — the peer-DRAM tier (PEER_MEM) against this machine's
# own limits, in one run: the raw fabric (ckpt-fabric-bench, tcp;ofi_rxm on
# loopback, before and after the rest), then a coordinator and two agents
# (n1 on 127.0.0.1, n2 on 127.0.0.2, node and peer pools of two images
# each) and one libckpt rank on n1 (ckpt-rank-bench). Reports:
#  - the replication throughput of each partner copy, from libckpt's
#    "PEER_MEM copy on n2 (N bytes in T ms); lease, fi_write, PEER_COMMIT"
#    (PEER_COMMIT: the partner's check of every chunk, and its record),
#    against the raw fabric's write;
#  - the save's stall with tiers local_mem,local_disk and with
#    local_mem,peer_mem,local_disk, each against a memcpy taken just before;
#  - a restore of the shard (a new process each time) on a replacement node
#    n3 (agent just started, empty roots, default restore order: it reads
#    the partner copy on n2), from partner DRAM alone (a rank on n2,
#    CKPT_RESTORE_ORDER=peer_mem), from n1's local disk and from n1's DRAM,
#    with a memcpy of the same bytes.
#
# --startup-ms MS: each restoring rank waits this long between opening its
# context and restoring (a trainer building its model; the library opens
# its fabric meanwhile). Default 0: the restore right after the open.
#
# usage: tools/bench-peer.sh [--size 1G] [--iters 5] [--startup-ms 0] [--dir DIR] [--keep] [--json] [--out FILE]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

size=1G
iters=5
startup_ms=0
dir=""
json=""
keep=""
out=""
py=/usr/bin/python3

usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

while [ $# -gt 0 ]; do
	case "$1" in
	--size) size=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	--startup-ms) startup_ms=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--json) json=1; shift ;;
	--keep) keep=1; shift ;;
	--out) out=$2; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "bench-peer.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
	esac
done

bench_name=bench-peer.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench/lib.sh"

[[ $size =~ ^[0-9]+[KkMmGg]?$ ]] || die "--size '$size' is not a number with an optional K/M/G suffix"
[[ $iters =~ ^[1-9][0-9]*$ ]] || die "--iters '$iters' is not a positive number"
[[ $startup_ms =~ ^[0-9]+$ ]] || die "--startup-ms '$startup_ms' is not a number of milliseconds"
bytes=$(to_bytes "$size")
[ "$bytes" -ge $((1 << 20)) ] || die "--size: at least 1M"

bin=${CKPT_BIN:-$repo/build/bin}
for exe in ckptd ckpt ckpt-rank-bench ckpt-fabric-bench; do
	[ -x "$bin/$exe" ] || die "no $bin/$exe: build the project first (cmake --build build)"
done
[ -x "$py" ] || py=$(command -v python3) || die "python3 is missing"
{ command -v fi_info >/dev/null && fi_info -p 'tcp;ofi_rxm' >/dev/null 2>&1; } ||
	die "libfabric's tcp;ofi_rxm provider is not available (fi_info -p 'tcp;ofi_rxm')"

# Two images side by side in each pool (the newest committed one is never
# evicted while the next is written), with room for headers and footers.
mib=$(( (bytes + (1 << 20) - 1) >> 20 ))
pool=$(( 2 * mib + 64 ))M
# Two agents' node and peer pools, the rank's state and its memcpy target.
need_kib=$(( (4 * (2 * mib + 64) + 2 * mib + 1024) << 10 ))
avail_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
[ "$avail_kib" -gt "$need_kib" ] ||
	die "needs about $((need_kib >> 20)) GiB of memory, $((avail_kib >> 20)) GiB available; try a smaller --size"

if [ -z "$dir" ]; then
	mkdir -p "$repo/build"
	work=$(mktemp -d "$repo/build/bench-peer-XXXXXX")
else
	mkdir -p "$dir"
	work=$(mktemp -d "$dir/bench-peer-XXXXXX")
fi
# shellcheck source=tools/bench/cluster.sh
. "$here/bench/cluster.sh"
cleanup() {
	cl_stop_all
	if [ -n "$keep" ]; then log "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
raw=$work/results.jsonl
: >"$raw"

t_start=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# ------------------------------------------------------------ the raw fabric

fabric() { # when
	log "raw fabric: ckpt-fabric-bench --size $size --iters $iters ($1)"
	"$bin/ckpt-fabric-bench" --size "$size" --iters "$iters" --json 2>"$work/fabric.err" |
		sed "s/^{/{\"kind\": \"fabric\", \"when\": \"$1\", /" >>"$raw" ||
		{ cat "$work/fabric.err" >&2; die "ckpt-fabric-bench failed"; }
}
fabric before

# ------------------------------------------------------------ the daemons

cl_token
cl_coord_start --peer-replicas 1
cl_agent_start 1 --pool-size "$pool" --peer-pool-size "$pool"
cl_agent_start 2 --pool-size "$pool" --peer-pool-size "$pool"
cl_wait_up n1 n2
log "coordinator $cl_coord_addr, agents n1 and n2 (pools $pool, peer pools $pool), in $work"

job=peerbench
rank_run() { # tag k [VAR=value...] mode args... ; appends its JSON lines to $raw
	local tag=$1 k=$2
	shift 2
	cl_rank_env "$job" 0 1 "$k"
	if ! "${cl_env[@]}" "$@" --size "$bytes" >"$work/$tag.json" 2>"$work/$tag.log"; then
		grep -v "^ckpt INFO" "$work/$tag.log" | tail -n 20 >&2
		die "$tag: ckpt-rank-bench failed (log: $work/$tag.log)"
	fi
	sed "s/^{/{\"run\": \"$tag\", /" "$work/$tag.json" >>"$raw"
}

# ------------------------------------------------------------ saves

# The same rank, the same state: first into node DRAM and disk, then with a
# partner copy as well. Each run's first save (it maps the pool, builds page
# tables, opens the fabric) is a warm-up, not reported.
log "saves: $iters x $size at local_mem,local_disk, then at local_mem,peer_mem,local_disk"
rank_run save-nopeer 1 CKPT_TIERS=local_mem,local_disk "$bin/ckpt-rank-bench" save \
	--iters "$iters" --warmup 1 --first-version 1
rank_run save-peer 1 "$bin/ckpt-rank-bench" save --iters "$iters" --warmup 1 --first-version $((iters + 2))
last=$((2 * iters + 2))
copies=$(grep -c "PEER_MEM copy on n2 (" "$work/save-peer.log" || true)
[ "$copies" = $((iters + 1)) ] || die "$copies of $((iters + 1)) saves were copied to n2 (log: $work/save-peer.log)"
# "... v=V: PEER_MEM copy on n2 (N bytes in T ms); lease L ms, fi_write W ms, PEER_COMMIT C ms ..."
sed -n 's/.* v=\([0-9]*\): PEER_MEM copy on \([^ ]*\) (\([0-9]*\) bytes in \([0-9.]*\) ms); lease \([0-9.]*\) ms, fi_write \([0-9.]*\) ms, PEER_COMMIT \([0-9.]*\) ms.*/{"kind": "copy", "version": \1, "node": "\2", "bytes": \3, "ms": \4, "lease_ms": \5, "write_ms": \6, "commit_ms": \7}/p' \
	"$work/save-peer.log" >>"$raw"
# The partner's own check of each image (its debug log).
sed -n 's/.*partner copy of version \([0-9]*\) rank 0 checked (\([0-9]*\) bytes in \([0-9.]*\) ms).*/{"kind": "check", "version": \1, "bytes": \2, "ms": \3}/p' \
	"$work/n2.log" >>"$raw"

# ------------------------------------------------------------ restores

# n2's agent prepares the job's DRAM pool when a rank of the job first
# registers there (and then prefetches the shard from partner DRAM into
# it): done once, before the rounds, so that it does not run under them.
log "restores of version $last: preparing n2's pool for the job (a restore there, not timed)"
rank_run restore-warmup 2 CKPT_RESTORE_ORDER=peer_mem "$bin/ckpt-rank-bench" restore --iters 1 --version "$last"
for _ in $(seq 300); do
	grep -q "job=$job\]: .*prefetch" "$work/n2.log" && break
	sleep 0.1
done
sed -i 's/^{"run": "restore-warmup", "kind": "restore"/{"run": "restore-warmup", "kind": "warmup"/' "$raw"

# "PEER_MEM copy on n2 read (N bytes in T ms); open O ms (fabric F ms), fi_read R ms"
peer_read() { # tag
	sed -n "s/.*PEER_MEM copy on \([^ ]*\) read (\([0-9]*\) bytes in \([0-9.]*\) ms); open \([0-9.]*\) ms (fabric \([0-9.]*\) ms), fi_read \([0-9.]*\) ms.*/{\"kind\": \"peer_read\", \"run\": \"$1\", \"node\": \"\1\", \"bytes\": \2, \"ms\": \3, \"open_ms\": \4, \"fabric_ms\": \5, \"read_ms\": \6}/p" \
		"$work/$1.log" >>"$raw"
}

# Round by round, so that the machine's drift meets every source alike:
#   new   node n1 is lost and its rank restarts on a replacement node n3
#         (its agent just started, empty roots; default restore order):
#         local_mem and local_disk have nothing, so it reads the partner
#         copy on n2 over the fabric, while n3's agent prepares the job's
#         pool (and then prefetches the shard: the next restart there would
#         read node DRAM; n3 is started afresh every round)
#   peer  the same read path alone: a rank on n2, whose pool is ready,
#         with CKPT_RESTORE_ORDER=peer_mem
#   disk  the rank on n1 with CKPT_RESTORE_ORDER=local_disk
#   mem   the rank on n1, default order: n1's DRAM copy
log "restores of version $last: on a new node n3, from partner DRAM, n1's disk, n1's DRAM ($iters rounds)"
for ((r = 1; r <= iters; r++)); do
	cl_agent_stop 3
	rm -rf "$work/n3.root" "$work/n3.ckpt"
	cl_agent_start 3 --pool-size "$pool"
	cl_wait_up n3
	rank_run "restore-new-$r" 3 "$bin/ckpt-rank-bench" restore --iters 1 --version "$last" --startup-ms "$startup_ms"
	# Since 0e7c601 the rank's read waits (8 s at most) for n3's agent to
	# finish fetching the partner's copy into its own DRAM, and is then
	# served from there: either way the bytes came from n2's DRAM.
	grep -q "restored from PEER_MEM on n2\|restored from LOCAL_MEM" "$work/restore-new-$r.log" ||
		die "restore-new-$r did not read the partner's copy (log: $work/restore-new-$r.log)"
	peer_read "restore-new-$r"
	cl_agent_stop 3 # its pool's preparation and prefetch are not to run under the next restores
	rank_run "restore-peer-$r" 2 CKPT_RESTORE_ORDER=peer_mem "$bin/ckpt-rank-bench" restore --iters 1 \
		--version "$last" --startup-ms "$startup_ms"
	grep -q "restored from PEER_MEM on n2" "$work/restore-peer-$r.log" ||
		die "restore-peer-$r did not read the partner's copy (log: $work/restore-peer-$r.log)"
	peer_read "restore-peer-$r"
	rank_run "restore-disk-$r" 1 CKPT_RESTORE_ORDER=local_disk "$bin/ckpt-rank-bench" restore --iters 1 \
		--version "$last"
	grep -q "restored from LOCAL_DISK" "$work/restore-disk-$r.log" || die "restore-disk-$r did not read the disk"
	rank_run "restore-mem-$r" 1 "$bin/ckpt-rank-bench" restore --iters 1 --version "$last"
	grep -q "restored from LOCAL_MEM" "$work/restore-mem-$r.log" || die "restore-mem-$r did not read n1's DRAM"
done

cl_stop_all
fabric after
t_total=$(( $(date +%s) - t_start ))
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# ------------------------------------------------------------ report

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git -C "$repo" status --porcelain 2>/dev/null | head -1)" ] && commit="$commit (with uncommitted changes)"
fiver=$(fi_info --version 2>/dev/null | awk '/^libfabric:/ { print $2 }')

report=$("$py" - "$raw" "$json" <<EOF
import json, statistics, sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
want_json = sys.argv[2] == "1"
def med(v):
    return statistics.median(v) if v else float("nan")
GB = 1e9

def of(kind, run=None, prefix=None):
    return [r for r in rows if r.get("kind") == kind and (run is None or r.get("run") == run)
            and (prefix is None or r.get("run", "").startswith(prefix))]

fab = of("fabric")
fw = [g for r in fab for g in r["write_gbps_all"]]
fr = [g for r in fab for g in r["read_gbps_all"]]
copies = sorted(of("copy"), key=lambda r: r["version"])
first, steady = copies[0], copies[1:]
gbps = lambda r: r["bytes"] / (r["ms"] / 1e3) / GB
cg = [gbps(r) for r in steady]
wg = [r["bytes"] / (r["write_ms"] / 1e3) / GB for r in steady]
checks = {r["version"]: r["ms"] for r in of("check")}
chk = [checks[r["version"]] for r in steady if r["version"] in checks]
nop, pee = of("save", "save-nopeer"), of("save", "save-peer")
st_n, st_p = [r["stall_s"] for r in nop], [r["stall_s"] for r in pee]
pr_n = [r["stall_s"] / r["memcpy_s"] for r in nop]
pr_p = [r["stall_s"] / r["memcpy_s"] for r in pee]
rp, rd, rm = of("restore", prefix="restore-peer"), of("restore", prefix="restore-disk"), of("restore", prefix="restore-mem")
rn = of("restore", prefix="restore-new")
rps, rds, rms = [r["restore_s"] for r in rp], [r["restore_s"] for r in rd], [r["restore_s"] for r in rm]
rns = [r["restore_s"] for r in rn]
prn = of("peer_read", prefix="restore-new")
prn_open = [r["open_ms"] for r in prn]
prn_read = [r["read_ms"] for r in prn]
prd = of("peer_read", prefix="restore-peer")
pr_open = [r["open_ms"] for r in prd]
pr_fab = [r["fabric_ms"] for r in prd]
pr_read = [r["read_ms"] for r in prd]
pr_rest = [r["ms"] - r["open_ms"] - r["read_ms"] for r in prd]
pr_gbps = [r["bytes"] / (r["read_ms"] / 1e3) / GB for r in prd]
mc = [r["memcpy_s"] for r in rows if r.get("kind") in ("save", "restore")]
size = nop[0]["bytes"]

def rng(v, f="%.2f"):
    # No figure (restores on the new node served from its node DRAM log no partner read).
    return (f + " - " + f) % (min(v), max(v)) if v else "n/a"

res = {
    "bytes": size, "iters": len(steady), "provider": "tcp;ofi_rxm", "startup_ms": $startup_ms,
    "fabric_write_gbps": med(fw), "fabric_write_gbps_all": fw,
    "fabric_read_gbps": med(fr), "fabric_read_gbps_all": fr,
    "copy_gbps": med(cg), "copy_gbps_all": cg, "copy_vs_fabric_write": med(cg) / med(fw),
    "copy_first_ms": first["ms"], "copy_first_lease_ms": first["lease_ms"],
    "copy_ms": med([r["ms"] for r in steady]), "lease_ms": med([r["lease_ms"] for r in steady]),
    "write_ms": med([r["write_ms"] for r in steady]), "commit_ms": med([r["commit_ms"] for r in steady]),
    "check_ms": med(chk) if chk else None, "write_gbps": med(wg), "write_vs_fabric_write": med(wg) / med(fw),
    "stall_nopeer_s": med(st_n), "stall_peer_s": med(st_p), "stall_peer_vs_nopeer": med(st_p) / med(st_n),
    "stall_vs_memcpy_paired_nopeer": med(pr_n), "stall_vs_memcpy_paired_peer": med(pr_p),
    "stall_paired_peer_vs_nopeer": med(pr_p) / med(pr_n),
    "peer_commit_s": med([r["peer_s"] for r in pee]), "durable_peer_s": med([r["durable_s"] for r in pee]),
    "durable_nopeer_s": med([r["durable_s"] for r in nop]),
    "restore_new_node_s": med(rns), "restore_new_node_s_all": rns,
    "restore_new_node_open_ms": med(prn_open), "restore_new_node_read_ms": med(prn_read),
    "restore_peer_s": med(rps), "restore_disk_s": med(rds), "restore_mem_s": med(rms),
    "restore_peer_s_all": rps, "restore_disk_s_all": rds, "restore_mem_s_all": rms,
    "restore_peer_vs_disk": med(rds) / med(rps),
    "restore_peer_open_ms": med(pr_open), "restore_peer_fabric_open_ms": med(pr_fab),
    "restore_peer_read_ms": med(pr_read), "restore_peer_read_gbps": med(pr_gbps),
    "restore_peer_checks_ms": med(pr_rest),
    "restore_peer_vs_fabric_read": (size / med(rps) / GB) / med(fr),
    "restore_new_node_vs_fabric_read": (size / med(rns) / GB) / med(fr),
    "memcpy_s": min(mc), "memcpy_s_median": med(mc),
}
if want_json:
    print(json.dumps(res))
    sys.exit(0)

g = size / GB
gib = size / float(1 << 30)
print("Machine: $(nproc) vCPUs ($cpu), $mem RAM, kernel $(uname -r), libfabric $fiver, provider tcp;ofi_rxm on lo.  ")
print("Commit $commit. Run took ${t_total} s. Load average (1, 5, 15 min) at start: $load_start; at end: $load_end. Restoring ranks wait ${startup_ms} ms between opening their context and restoring.")
print()
print("| %g GiB shard, %d iterations | median | range | GB/s (median) |" % (gib, len(steady)))
print("|---|---:|---:|---:|")
print("| raw fabric: fi_write, ckpt-fabric-bench (%d runs, before and after) | %.3f s | %s GB/s | %.2f |"
      % (len(fw), g / med(fw), rng(fw), med(fw)))
print("| raw fabric: fi_read (%d runs) | %.3f s | %s GB/s | %.2f |" % (len(fr), g / med(fr), rng(fr), med(fr)))
print("| memcpy (best of %d; median %.3f s) | %.3f s | | %.2f |" % (len(mc), med(mc), min(mc), g / min(mc)))
print("| PEER_MEM copy on n2 (lease + fi_writes + PEER_COMMIT) | %.3f s | %s GB/s | %.2f |"
      % (med([r["ms"] for r in steady]) / 1e3, rng(cg), med(cg)))
print("| of which the lease | %.1f ms | %s ms | |" % (res["lease_ms"], rng([r["lease_ms"] for r in steady], "%.1f")))
print("| of which the fi_writes | %.3f s | %s GB/s | %.2f |" % (res["write_ms"] / 1e3, rng(wg), med(wg)))
print("| of which PEER_COMMIT (the partner's check and record) | %.1f ms | %s ms | |"
      % (res["commit_ms"], rng([r["commit_ms"] for r in steady], "%.1f")))
if chk:
    print("| the partner's check of every chunk (its log) | %.1f ms | %s ms | %.2f |" % (med(chk), rng(chk, "%.1f"), size / (med(chk) / 1e3) / GB))
print("| first copy of the run (fabric opened, pool registered; not in the medians) | %.3f s | | %.2f |"
      % (first["ms"] / 1e3, gbps(first)))
print("| save stall, local_mem,local_disk | %.3f s | %s s | |" % (med(st_n), rng(st_n, "%.3f")))
print("| save stall, local_mem,peer_mem,local_disk | %.3f s | %s s | |" % (med(st_p), rng(st_p, "%.3f")))
print("| save to PEER_MEM committed (ckpt_handle_wait) | %.3f s | | |" % res["peer_commit_s"])
print("| restore on a new node (n3: agent just started, empty roots, default order): from partner DRAM | %.3f s | %s s | %.2f |" % (med(rns), rng(rns, "%.3f"), g / med(rns)))
print("| of which opening the copy | %.1f ms | %s ms | |" % (med(prn_open), rng(prn_open, "%.1f")))
print("| of which the chunks' fi_reads | %.3f s | %s s | |" % (med(prn_read) / 1e3, rng([x / 1e3 for x in prn_read], "%.3f")))
print("| restore from partner DRAM, pool ready (rank on n2, CKPT_RESTORE_ORDER=peer_mem) | %.3f s | %s s | %.2f |" % (med(rps), rng(rps, "%.3f"), g / med(rps)))
print("| of which opening the copy (connect, pin, fabric, header and footer) | %.1f ms | %s ms | |" % (med(pr_open), rng(pr_open, "%.1f")))
print("| of that, the fabric opened and buffers registered (a new process) | %.1f ms | %s ms | |" % (med(pr_fab), rng(pr_fab, "%.1f")))
print("| of which the chunks' fi_reads (many in flight, each checked as it lands) | %.3f s | %s GB/s | %.2f |" % (med(pr_read) / 1e3, rng(pr_gbps), med(pr_gbps)))
print("| of which the rest (the checks left after the last read, closing) | %.1f ms | %s ms | |" % (med(pr_rest), rng(pr_rest, "%.1f")))
print("| restore from n1's local disk | %.3f s | %s s | %.2f |" % (med(rds), rng(rds, "%.3f"), g / med(rds)))
print("| restore from n1's DRAM (LOCAL_MEM) | %.3f s | %s s | %.2f |" % (med(rms), rng(rms, "%.3f"), g / med(rms)))
print()
print("| ratio | value | target | met |")
print("|---|---:|---|---|")
ok = res["copy_vs_fabric_write"] >= 0.7
print("| PEER_MEM copy GB/s / raw fabric write GB/s | %.2f | >= 0.70 | %s |" % (res["copy_vs_fabric_write"], "yes" if ok else "**no**"))
print("| fi_writes alone / raw fabric write | %.2f | | |" % res["write_vs_fabric_write"])
print("| stall with PEER_MEM / without (medians) | %.2f | ~1.0 | |" % res["stall_peer_vs_nopeer"])
print("| stall / memcpy just before it (median of pairs): without; with PEER_MEM | %.2f; %.2f | | |"
      % (med(pr_n), med(pr_p)))
for key, what in (("restore_new_node_vs_fabric_read", "restore on a new node from partner DRAM"),
                  ("restore_peer_vs_fabric_read", "restore from partner DRAM, pool ready")):
    print("| %s: speed / raw fabric read | %.2f | >= 0.80 | %s |" % (what, res[key], "yes" if res[key] >= 0.8 else "**no**"))
print("| restore from partner: speed / local disk's | %.2f | | |" % res["restore_peer_vs_disk"])
print("| restore on a new node: speed / local disk's | %.2f | | |" % (med(rds) / med(rns)))
print("| restore from partner: speed / memcpy's (best) | %.2f | | |" % (min(mc) / med(rps)))
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
