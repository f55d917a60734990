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
# throughout (the daemons and ranks compete with them). The later phases (a
# spare pulling the lost state, the relaunch) are not measured yet.
#
# usage: tools/bench-recovery.sh [--rounds 10] [--load] [--out FILE]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

rounds=10
out=""
load=""

usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--load) load=1; shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "bench-recovery.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
	esac
done

bench_name=bench-recovery.sh
. "$here/bench/lib.sh"

[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds '$rounds' is not a positive number"
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
log "detection: $rounds rounds of 4 failures (about $((rounds * 10)) s)${load:+, with $(nproc) spinning processes}"
report=$(CKPT_BIN=$bin "$tests/test_roles_failures" "$rounds" 2>"${TMPDIR:-/tmp}/bench-recovery.$$.err") || {
	tail -n 30 "${TMPDIR:-/tmp}/bench-recovery.$$.err" >&2
	rm -f "${TMPDIR:-/tmp}/bench-recovery.$$.err"
	die "a round had a decision out of its bound, or a stray one (above)"
}
rm -f "${TMPDIR:-/tmp}/bench-recovery.$$.err"
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
load_text=none
[ -z "$load" ] || load_text="$(nproc) spinning processes"
emit_report "$report
load: $load_text; commit $commit, $(date -u +%Y-%m-%d), $(nproc) CPUs" "$out"
