#!/usr/bin/env bash
# tools/bench/ckpt-s3.sh — ckpt's row of tools/bench-s3.sh: its flush of a
# version to the SHARED tier on S3 and its restore from there, on the
# benchmark's gateway, moving the given files.
#
# A real ckptd coordinator and agent (tools/bench/cluster.sh; the agent with
# --shared-dir URL, --shared-rate 0) and one rank per FILE on the agent's
# node (ckpt-rank-bench save --state-file: the file's bytes are the rank's
# state; tier local_disk, so that the agent's memory is its flush's own)
# saving version 1. Upload: from the saves being durable (the last rank's
# ckpt_handle_wait(LOCAL_DISK)) to the version's commit marker in the bucket
# (the coordinator committed it at SHARED and the agent wrote the marker:
# from then on a job restores from the bucket alone); the agent's CPU (user
# + system, /proc/PID/stat, from before the saves to then) and its peak RSS
# (VmHWM). The daemons are then stopped. Restore: one ckpt-restore-bench per
# rank, all at once, with an empty root, no daemon and
# CKPT_RESTORE_ORDER=shared (the object store is the only copy), version 1
# named (an empty root with CKPT_LATEST would LIST the bucket to find it);
# every chunk's checksum checked by the library, every byte compared with
# the file; the span from the first start to the last end, their CPU
# summed, the largest peak RSS. LIST requests of each phase from the
# gateway's access log (tests/s3/s3gw.sh requests).
#
# usage: ckpt-s3.sh --bin DIR --endpoint URL --url s3://BUCKET/PREFIX
#                   --gw-dir GATEWAY_STATE_DIR --work DIR FILE...
# The S3 credentials come from the environment (AWS_ACCESS_KEY_ID, ...), and
# CKPT_S3_* settings are passed on to the agent and the restoring ranks.
# Prints two JSON lines on stdout, {"op": "upload", ...} and
# {"op": "restore", ...}; progress and errors on stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin="" ep="" url="" gwdir="" work=""
while [ $# -gt 0 ]; do
	case "$1" in
	--bin) bin=$2; shift 2 ;;
	--endpoint) ep=$2; shift 2 ;;
	--url) url=$2; shift 2 ;;
	--gw-dir) gwdir=$2; shift 2 ;;
	--work) work=$2; shift 2 ;;
	-h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	--) shift; break ;;
	-*) echo "ckpt-s3.sh: unknown argument '$1'" >&2; exit 2 ;;
	*) break ;;
	esac
done
# shellcheck disable=SC2034 # lib.sh's log and die use it
bench_name=ckpt-s3.sh
# shellcheck source=tools/bench/lib.sh
. "$here/lib.sh"
if [ -z "$bin" ] || [ -z "$ep" ] || [ -z "$url" ] || [ -z "$gwdir" ] || [ -z "$work" ] || [ $# -eq 0 ]; then
	die "usage: ckpt-s3.sh --bin DIR --endpoint URL --url s3://BUCKET/PREFIX --gw-dir DIR --work DIR FILE..."
fi
[[ $url =~ ^s3://([a-z0-9][a-z0-9.-]*)(/.*)?$ ]] || die "--url '$url': s3://BUCKET/PREFIX"
bucket=${BASH_REMATCH[1]}
prefix=${BASH_REMATCH[2]#/}
[ -z "$prefix" ] || prefix=${prefix%/}/
for exe in ckptd ckpt ckpt-rank-bench ckpt-restore-bench; do
	[ -x "$bin/$exe" ] || die "no $bin/$exe: build the project first"
done
files=("$@")
world=${#files[@]}
total=0
for f in "${files[@]}"; do
	[ -f "$f" ] || die "$f: not a file"
	total=$((total + $(stat -c %s "$f")))
done
py=python3
mkdir -p "$work"
work=$(cd "$work" && pwd)
job=s3bench
version=1

# shellcheck source=tools/bench/cluster.sh
. "$here/cluster.sh"
# The caller's S3 settings reach the agent (cluster.sh drops every CKPT_*).
s3env=("CKPT_S3_ENDPOINT=$ep")
for v in $(compgen -e); do
	case "$v" in CKPT_S3_ENDPOINT) ;; CKPT_S3_*) s3env+=("$v=${!v}") ;; esac
done
cl_ckptd+=("${s3env[@]}")
trap 'cl_stop_all' EXIT
gw() { bash "$repo/tests/s3/s3gw.sh" "$@"; }
now_ns() { date +%s%N; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
lists_since() { # mark: LIST requests on the bucket since then
	sleep 0.5 # the gateway writes its access log after the answer
	gw requests "$gwdir" --since "$1" --bucket "$bucket" | "$py" -c 'import json, sys; print(json.load(sys.stdin)["lists"])'
}

cl_token
cl_coord_start
# No pool to speak of: the ranks save at local_disk, and the peak is the flush's.
cl_agent_start 1 --shared-dir "$url" --shared-rate 0 --pool-size 16M
cl_wait_up n1
agent=${cl_pid[1]}

# --- the flush -------------------------------------------------------------
m0=$(gw mark "$gwdir")
c0=$(cpu_ticks "$agent")
pids=()
for r in $(seq 0 $((world - 1))); do
	cl_rank_env "$job" "$r" "$world" 1
	"${cl_env[@]}" CKPT_TIERS=local_disk "$bin/ckpt-rank-bench" save --state-file "${files[$r]}" --iters 1 \
		--warmup 0 --first-version "$version" >"$work/save.$r.json" 2>"$work/save.$r.err" &
	pids+=($!)
done
for r in "${!pids[@]}"; do
	wait "${pids[$r]}" || { tail -n 20 "$work/save.$r.err" >&2; tail -n 20 "$work/n1.log" >&2; die "rank $r's save failed"; }
done
durable=$("$py" -c 'import json, sys
print(max(json.loads(open(f).readline())["durable_wall_ns"] for f in sys.argv[1:]))' "$work"/save.*.json)

# Committed at SHARED (the coordinator), then the marker (the agent).
shared_ns="" marker_ns=""
marker=$ep/$bucket/${prefix}jobs/$job/v$(printf %020d "$version")/COMMITTED
deadline=$(($(date +%s) + 1800))
while [ -z "$marker_ns" ]; do
	[ "$(date +%s)" -lt "$deadline" ] || { tail -n 30 "$work/n1.log" >&2; die "version $version not committed at SHARED in 30 min"; }
	cl_alive "$agent" || { tail -n 30 "$work/n1.log" >&2; die "the agent exited"; }
	if [ -z "$shared_ns" ]; then
		if "$bin/ckpt" ls --daemon "$cl_coord_addr" --token-file "$work/token" --job "$job" --json 2>/dev/null |
			"$py" -c 'import json, sys
sys.exit(0 if any(v["version"] == int(sys.argv[1]) and "shared" in v["tiers"] for v in json.load(sys.stdin)) else 1)' "$version"; then
			shared_ns=$(now_ns)
		fi
	fi
	if [ -n "$shared_ns" ] && [ "$(gw curl "$gwdir" -s -o /dev/null -w '%{http_code}' -I "$marker")" = 200 ]; then
		marker_ns=$(now_ns)
	fi
	[ -n "$marker_ns" ] || sleep 0.05
done
c1=$(cpu_ticks "$agent")
hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$agent/status")
lu=$(lists_since "$m0")
cl_stop_all
grep -E "SHARED.*(fail|error)|ERROR" "$work/n1.log" >&2 || true

# --- the restore -------------------------------------------------------------
m1=$(gw mark "$gwdir")
mkdir -p "$work/restore.root"
rm -f "$work/go" "$work"/ready.*
pids=()
for r in $(seq 0 $((world - 1))); do
	env "${cl_unset[@]}" "${s3env[@]}" CKPT_JOB="$job" CKPT_RANK="$r" CKPT_WORLD_SIZE="$world" \
		CKPT_ROOT="$work/restore.root" CKPT_SHARED_DIR="$url" CKPT_RESTORE_ORDER=shared CKPT_DEBUG=INFO \
		"$bin/ckpt-restore-bench" --state-file "${files[$r]}" --version "$version" --ready "$work/ready.$r" \
		--go "$work/go" >"$work/restore.$r.json" 2>"$work/restore.$r.err" &
	pids+=($!)
done
for _ in $(seq 6000); do
	n=$(find "$work" -maxdepth 1 -name 'ready.*' | wc -l)
	[ "$n" -ge "$world" ] && break
	sleep 0.05
done
[ "$n" -ge "$world" ] || die "the restoring ranks did not get ready"
touch "$work/go"
for r in "${!pids[@]}"; do
	wait "${pids[$r]}" || { tail -n 20 "$work/restore.$r.err" >&2; die "rank $r's restore failed"; }
	grep -q "restored from SHARED" "$work/restore.$r.err" ||
		{ tail -n 20 "$work/restore.$r.err" >&2; die "rank $r did not restore from SHARED"; }
done
ld=$(lists_since "$m1")

"$py" - "$total" "$durable" "$shared_ns" "$marker_ns" "$c0" "$c1" "$(getconf CLK_TCK)" "$hwm" "$lu" "$ld" \
	"$work"/restore.*.json <<'EOF'
import json, sys
a = sys.argv[1:]
total, durable, shared, marker = (int(x) for x in a[0:4])
cpu = (int(a[5]) - int(a[4])) / int(a[6])
hwm, lu, ld = int(a[7]), int(a[8]), int(a[9])
ranks = [json.loads(open(f).readline()) for f in a[10:]]
gib, mib = total / 2**30, total / 2**20
up_s = (marker - durable) / 1e9
print(json.dumps({"op": "upload", "bytes": total, "seconds": round(up_s, 3), "mib_s": round(mib / up_s, 1),
                  "commit_s": round((shared - durable) / 1e9, 3), "cpu_s": round(cpu, 2),
                  "cpu_s_per_gib": round(cpu / gib, 3), "peak_rss_kb": hwm, "lists": lu}))
span = (max(r["end_wall_ns"] for r in ranks) - min(r["start_wall_ns"] for r in ranks)) / 1e9
rcpu = sum(r["cpu_s"] for r in ranks)
print(json.dumps({"op": "restore", "bytes": sum(r["bytes"] for r in ranks), "seconds": round(span, 3),
                  "mib_s": round(mib / span, 1), "cpu_s": round(rcpu, 2), "cpu_s_per_gib": round(rcpu / gib, 3),
                  "peak_rss_kb": max(r["peak_rss_kb"] for r in ranks),
                  "rss_over_state_kb": max(r["peak_rss_kb"] - r["state_kb"] for r in ranks),
                  "lists": ld, "ranks": len(ranks), "exact": all(r["exact"] is True for r in ranks)}))
EOF
