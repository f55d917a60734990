#!/usr/bin/env bash
# tools/bench-recovery.sh — how fast a failure is recovered from, phase by
# phase (issue 24). Its first phase, detection, is here: from a failure to
# the coordinator's decision (the EVENT's time), with the default settings,
# for each failure class, ROUNDS times on a fresh cluster each (a
# coordinator, agents n1-n3 on loopback, 5 idle libckpt ranks of one job:
# tests/ckptd_roles/test_roles_failures.c with a round count):
#  - a rank killed -9 (rank-died: its agent's pidfd);
#  - a rank stopped, SIGSTOP (rank-hung: --hang-timeout 5 s of silence);
#  - an agent stopped, SIGSTOP (node-lost: --failure-timeout 1.5 s of silence);
#  - an agent killed -9 (node-lost: its connection closed).
# Prints p50 and max of each, its bound (2 s for a death or loss, 10 s for a
# hang), and for the classes judged by silence the ratio of p50 to the
# timeout they wait out (the floor of any detector that uses it: 1.0 less
# the last heartbeat's age). --load: as many spinning processes as CPUs run
# throughout (the daemons and ranks compete with them).
#
# Then the node-kill rounds (--spare-rounds, 3 by default; 0: none), each on
# a fresh loopback cluster (tools/bench/cluster.sh): a coordinator, agents
# n1 (rack ra), n2 (rb) with peer pools and a spare n3 (rc, --spare). The
# reference trainer (build/bin/trainer, --ranks 2, --hidden H: its state is
# printed) trains on n1, saving every 2 steps to local_mem, peer_mem and
# local_disk; at a random step after a PEER_MEM commit node n1 is killed
# (its agent and the trainer -9, its roots deleted). The coordinator
# decides n1 lost and tells n3 to take its ranks; n3 pulls their state from
# n2's DRAM. The trainer is relaunched on n3 as soon as the pull is done
# and must resume and end with the digest of an uninterrupted run. Reported
# per round from `ckpt recoveries --json`: every phase (detect, spare,
# pull, register, restore, first_step, total: from the failure as the
# coordinator saw it, the lost agent's last frame), the kill to the decision
# and to the first step (the kill's own time), the bytes pulled, the raw
# fabric's read bandwidth between n2 and n3 in the same round
# (ckpt-fabric-bench, 127.0.0.2 -> 127.0.0.3) and the issue's target for
# the pull: state / that bandwidth + 1 s; then p50 and max of each.
#
# usage: tools/bench-recovery.sh [--rounds 10] [--load] [--spare-rounds 3]
#                                [--hidden 2048] [--out FILE]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

rounds=10
out=""
load=""
spare_rounds=3
hidden=2048

usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--load) load=1; shift ;;
	--spare-rounds) spare_rounds=$2; shift 2 ;;
	--hidden) hidden=$2; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "bench-recovery.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
	esac
done

bench_name=bench-recovery.sh
. "$here/bench/lib.sh"

[[ $rounds =~ ^[0-9]+$ ]] || die "--rounds '$rounds' is not a number"
[[ $spare_rounds =~ ^[0-9]+$ ]] || die "--spare-rounds '$spare_rounds' is not a number"
[[ $hidden =~ ^[1-9][0-9]*$ ]] || die "--hidden '$hidden' is not a positive number"
bin=${CKPT_BIN:-$repo/build/bin}
tests=${CKPT_TESTS:-$(dirname "$bin")/tests}
for exe in "$bin/ckptd" "$bin/ckpt" "$tests/test_roles_failures"; do
	[ -x "$exe" ] || die "no $exe: build the project first (cmake --build build)"
done

spinners=()
stop_load() {
	for p in "${spinners[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap stop_load EXIT
if [ -n "$load" ]; then
	for _ in $(seq "$(nproc)"); do
		(while :; do :; done) &
		spinners+=($!)
	done
fi
report=""
if [ "$rounds" -gt 0 ]; then
	log "detection: $rounds rounds of 4 failures (about $((rounds * 10)) s)${load:+, with $(nproc) spinning processes}"
	report=$(CKPT_BIN=$bin "$tests/test_roles_failures" "$rounds" 2>"${TMPDIR:-/tmp}/bench-recovery.$$.err") || {
		tail -n 30 "${TMPDIR:-/tmp}/bench-recovery.$$.err" >&2
		rm -f "${TMPDIR:-/tmp}/bench-recovery.$$.err"
		die "a round had a decision out of its bound, or a stray one (above)"
	}
	rm -f "${TMPDIR:-/tmp}/bench-recovery.$$.err"
fi

# ---------------------------------------------------------------- node-kill rounds

if [ "$spare_rounds" -gt 0 ] && ! [ -x "$bin/trainer" ]; then
	log "no $bin/trainer (the reference trainer needs ZeroMQ, libzmq3-dev): the node-kill rounds are skipped"
	spare_rounds=0
fi
if [ "$spare_rounds" -gt 0 ]; then
	[ -x "$bin/ckpt-fabric-bench" ] || die "no $bin/ckpt-fabric-bench: build the project first (cmake --build build)"
	py=$(command -v python3) || die "python3 is needed to read ckpt's JSON"
	base=$(mktemp -d "${TMPDIR:-/tmp}/bench-recovery.XXXXXX") # XXXXXX: mktemp's template
	work=$base
	# shellcheck source=tools/bench/cluster.sh
	. "$here/bench/cluster.sh"
	# Checkpoints go (hundreds of MB a round); the logs stay on a failure.
	drop_data() { find "$base" -maxdepth 2 \( -name '*.ckpt' -o -name '*.root' \) -exec rm -rf {} + 2>/dev/null || true; }
	trap 'cl_stop_all; stop_load; drop_data' EXIT
	steps=40
	targs=(--ranks 2 --steps "$steps" --hidden "$hidden" --ckpt-every 2 --log-every 1 --step-ms 100 --job trainer)
	log "node-kill: the uninterrupted run's digest (${targs[*]})"
	env "${cl_unset[@]}" "$bin/trainer" "${targs[@]}" --root "$base/ref.ckpt" >"$base/ref.log" 2>&1 ||
		{ tail -n 20 "$base/ref.log" >&2; die "the reference run failed"; }
	ref=$(awk '/^final-digest/ { print $2 }' "$base/ref.log")
	rm -rf "$base/ref.ckpt"
	rows=()
	for i in $(seq "$spare_rounds"); do
		work=$base/round$i
		mkdir -p "$work"
		cl_token
		cl_coord_start
		cl_agent_start 1 --pool-size 2G --peer-pool-size 2G --domain ra
		cl_agent_start 2 --pool-size 2G --peer-pool-size 2G --domain rb
		cl_agent_start 3 --pool-size 2G --peer-pool-size 2G --domain rc --spare
		cl_wait_up n1 n2 n3
		tenv=(env "${cl_unset[@]}" "CKPT_TOKEN_FILE=$work/token" "CKPT_TIERS=local_mem,peer_mem,local_disk" "CKPT_DEBUG=INFO")
		"${tenv[@]}" "CKPT_DAEMON=unix:$work/n1.sock" "$bin/trainer" "${targs[@]}" --root "$work/n1.ckpt" \
			>"$work/train1.log" 2>&1 &
		tpid=$!
		# a random step after the first PEER_MEM commit (tiers mask bit 0x2)
		kill_at=$((6 + RANDOM % 12))
		for _ in $(seq 1200); do
			grep -q "^step $kill_at loss" "$work/train1.log" 2>/dev/null &&
				grep -Eq 'committed at tiers 0x[0-9a-f]*[2367abef] ' "$work/coord.log" && break
			cl_alive "$tpid" || { tail -n 20 "$work/train1.log" >&2; die "round $i: the trainer exited early"; }
			sleep 0.05
		done
		kill_ns=$(date +%s%N)
		kill -9 "${cl_pid[1]}" "$tpid" 2>/dev/null || true
		wait "$tpid" 2>/dev/null || true
		wait "${cl_pid[1]}" 2>/dev/null || true
		unset "cl_pid[1]"
		rm -rf "$work/n1.ckpt" "$work/n1.root"
		# the spare's pull, then the relaunch on it
		rec=""
		for _ in $(seq 600); do
			rec=$("$bin/ckpt" recoveries --daemon "$cl_coord_addr" --token-file "$work/token" --job trainer --json 2>/dev/null || true)
			"$py" -c 'import json, sys
r = [x for x in json.loads(sys.argv[1])["recoveries"] if x["failure"] == "node-lost" and x["node"] == "n1"]
sys.exit(0 if r and (any(p["phase"] == "pull" for p in r[0]["phases"]) or r[0]["code"]) else 1)' "$rec" 2>/dev/null && break
			sleep 0.05
		done
		"${tenv[@]}" "CKPT_DAEMON=unix:$work/n3.sock" "$bin/trainer" "${targs[@]}" --root "$work/n3.ckpt" \
			>"$work/train3.log" 2>&1 || { tail -n 20 "$work/train3.log" >&2; die "round $i: the relaunched trainer failed"; }
		got=$(awk '/^final-digest/ { print $2 }' "$work/train3.log")
		resumed=$(awk '/^resumed from step/ { print $4 }' "$work/train3.log")
		[ "$got" = "$ref" ] || die "round $i: final digest $got, the uninterrupted run's $ref"
		[ -n "$resumed" ] || die "round $i: the relaunched trainer did not resume (fresh start)"
		grep -q "restored from LOCAL_MEM" "$work/train3.log" ||
			log "round $i: the relaunched ranks did not all say they restored from LOCAL_MEM (see $work/train3.log)"
		for _ in $(seq 200); do
			rec=$("$bin/ckpt" recoveries --daemon "$cl_coord_addr" --token-file "$work/token" --job trainer --json)
			"$py" -c 'import json, sys
r = [x for x in json.loads(sys.argv[1])["recoveries"] if x["failure"] == "node-lost" and x["node"] == "n1"]
sys.exit(0 if r and r[0]["total_seconds"] is not None else 1)' "$rec" && break
			sleep 0.1
		done
		bytes=$("$py" -c 'import json, sys
r = [x for x in json.loads(sys.argv[1])["recoveries"] if x["failure"] == "node-lost" and x["node"] == "n1"][0]
print(r["spare_bytes"])' "$rec")
		mib=$(((bytes + (1 << 20) - 1) >> 20))
		[ "$mib" -gt 0 ] || mib=$(($(du -sm "$work/n2.root" | cut -f1) + 1)) # nothing pulled: the fabric still measured
		fab=$(env "${cl_unset[@]}" "$bin/ckpt-fabric-bench" --size "${mib}M" --target 127.0.0.2 --initiator 127.0.0.3 \
			--iters 3 --json 2>/dev/null) || die "round $i: ckpt-fabric-bench failed"
		rows+=("$("$py" -c 'import json, sys
r = [x for x in json.loads(sys.argv[1])["recoveries"] if x["failure"] == "node-lost" and x["node"] == "n1"][0]
f = json.loads(sys.argv[2])
ph = {p["phase"]: p["seconds"] for p in r["phases"]}
ends = {p["phase"]: p["end_ns"] for p in r["phases"]}
target = r["spare_bytes"] / (f["read_gbps"] * 1e9) + 1
print(json.dumps({"kill_step": int(sys.argv[3]), "resumed": int(sys.argv[4]), "phases": ph, "total": r["total_seconds"],
                  "kill_to_decision": (ends["detect"] - int(sys.argv[5])) / 1e9,
                  "kill_to_first_step": (ends["first_step"] - int(sys.argv[5])) / 1e9,
                  "bytes": r["spare_bytes"], "read_gbps": f["read_gbps"], "target": target,
                  "spare": r["spare"], "code": r["code"], "why": r["why"]}))' "$rec" "$fab" "$kill_at" "$resumed" "$kill_ns")")
		log "round $i: ${rows[-1]}"
		cl_stop_all
		drop_data
	done
	trap stop_load EXIT
	rm -rf "$base"
	spare_report=$("$py" -c 'import json, statistics, sys
rows = [json.loads(x) for x in sys.argv[2:]]
def p50(v): return statistics.median(v)
out = ["node-kill rounds: %d (reference trainer --hidden %s: %.1f MiB of state pulled per round; spare n3)" %
       (len(rows), sys.argv[1], p50([r["bytes"] for r in rows]) / 2**20)]
out.append("%-28s %9s %9s" % ("phase (s)", "p50", "max"))
for ph in ["detect", "spare", "pull", "register", "restore", "first_step"]:
    v = [r["phases"].get(ph, 0.0) for r in rows]
    out.append("%-28s %9.3f %9.3f" % (ph, p50(v), max(v)))
v = [r["total"] for r in rows]
out.append("%-28s %9.3f %9.3f" % ("total (failure to 1st step)", p50(v), max(v)))
v = [r["kill_to_decision"] for r in rows]
out.append("%-28s %9.3f %9.3f" % ("kill -9 to the decision", p50(v), max(v)))
v = [r["kill_to_first_step"] for r in rows]
out.append("%-28s %9.3f %9.3f" % ("kill -9 to the first step", p50(v), max(v)))
v = [r["read_gbps"] for r in rows]
out.append("%-28s %9.3f %9.3f" % ("raw fi_read n2->n3 (GB/s)", p50(v), max(v)))
v = [r["target"] for r in rows]
out.append("%-28s %9.3f %9.3f" % ("target: state/bw + 1 s", p50(v), max(v)))
ok = sum(1 for r in rows if r["phases"].get("pull", 1e9) <= r["target"])
out.append("pull within its round'"'"'s target: %d of %d rounds; every round resumed with the uninterrupted digest" %
           (ok, len(rows)))
print("\n".join(out))' "$hidden" "${rows[@]}")
	report="${report:+$report
}$spare_report"
fi
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
load_text=none
[ -z "$load" ] || load_text="$(nproc) spinning processes"
emit_report "$report
load: $load_text; commit $commit, $(date -u +%Y-%m-%d), $(nproc) CPUs" "$out"
