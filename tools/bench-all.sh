#!/usr/bin/env bash
# tools/bench-all.sh — every figure of docs/benchmarks.md that has a target,
# from one run of the benchmark scripts and programs, each beside its target
# with a met / not-met column, and the commit, date and machine it was
# measured at. The table at the top of docs/benchmarks.md is this script's
# output (--doc), never edited by hand.
#
# usage: tools/bench-all.sh [--smoke] [--out FILE] [--doc FILE] [--only LIST]
#   --smoke      tiny sizes: checks that every benchmark still runs and
#                reports its figures (a CI test); nothing is judged
#   --out FILE   also write the report to FILE
#   --doc FILE   update the table between the lines "<!-- bench-all:begin -->"
#                and "<!-- bench-all:end -->" of FILE: the rows of the steps
#                this run measured replace theirs, the other rows stay (with
#                the commit, date and machine they were measured at)
#   --only LIST  run only these steps (comma-separated): roles, ls, disk,
#                daemon, peer, preempt, step, and those of tools/bench/all.d/
#   --steps DIR  the contributed steps' folder (default tools/bench/all.d)
# Programs come from $CKPT_BIN (default build/bin) and $CKPT_TESTS_BIN
# (default build/tests). Exits 1 if a benchmark failed or a figure is
# missing; a target not met is reported, not an error.
#
# Adding a benchmark: put a file tools/bench/all.d/NAME.sh (NAME: the step's
# name in the table) that sets two arrays, the command at full size and at
# smoke size, from the repository root:
#     full=("$here/bench-foo.sh" --dir "$dir" --size 1G)
#     smoke=("$here/bench-foo.sh" --dir "$dir" --size 16M)
# ($here: tools/; $dir: an empty folder on the repository's disk (in TMPDIR
# at smoke size), emptied after each step; $tests_bin: build/tests; $torch: --no-torch where Debian's
# python3 has no torch). The command prints on stdout one line per figure:
#     BENCH-ROW {"figure": "what, at which size", "value": 0.93,
#                "format": "%.2f", "target": ">= 0.80"}
# (tools/bench/all-report.py says the fields: "ok" true/false where the
# target is not "OP NUMBER"; "value" null for a figure it could not get).
# Steps run in the order of the built-in ones, then all.d's by name. Then
# `tools/bench-all.sh --only NAME --doc docs/benchmarks.md` puts its rows in
# the table, and test_bench_all runs it at smoke size.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
builtin_steps="roles ls disk daemon peer preempt step"
is_smoke=0
out=""
doc=""
only=""
steps_dir=$here/bench/all.d
while [ $# -gt 0 ]; do
	case "$1" in
	--smoke) is_smoke=1; shift ;;
	--out) out=$2; shift 2 ;;
	--doc) doc=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	--steps) steps_dir=$2; shift 2 ;;
	-h|--help) sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
if [ "$is_smoke" = 0 ] && mkdir -p "$repo/build" 2>/dev/null && [ -w "$repo/build" ]; then
	work=$(mktemp -d "$repo/build/bench-all-XXXXXX")
else
	work=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-bench-all-XXXXXX")
fi
# Kept when a step failed, for its logs.
trap '[ -e "$work/keep" ] && log "logs kept in $work" || rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
dir=$work/data
mkdir "$dir"

# The torch baseline is not a target: run only where torch is there already
# (the scripts would otherwise try to install it).
torch=--no-torch
/usr/bin/python3 -c 'import torch' 2>/dev/null && torch=""

# Each step: its command (an array), at full or smoke size.
if [ "$is_smoke" = 1 ]; then
	roles=("$tests_bin/ckptd-roles-bench" 4 1 64 256)
	ls_=("$here/bench-ls.sh" --versions 20 --ranks 50 --runs 2 --json)
	disk=("$here/bench.sh" --dir "$dir" --sizes 16M --iters 1 --fio-reps 2 --torch-iters 1 --no-drop-caches
		--no-dram --json $torch)
	daemon=("$here/bench-daemon.sh" --dir "$dir" --size 32M --regions 4 --iters 2 --json)
	peer=("$here/bench-peer.sh" --dir "$dir" --size 16M --iters 1 --json)
	preempt=("$here/bench-preempt.sh" --dir "$dir" --size 16M --iters 1 --step-ms 10 --save-at 10
		--deadline 30s --torch-iters 1 --json $torch)
	step=("$here/bench-step.sh" --dir "$dir" --calls 10000 --runs 1 --cpu-seconds 0.2)
else
	roles=("$tests_bin/ckptd-roles-bench" 64 5)
	ls_=("$here/bench-ls.sh" --json)
	disk=("$here/bench.sh" --dir "$dir" --sizes "1G 4G" --no-dram --json $torch)
	daemon=("$here/bench-daemon.sh" --dir "$dir" --size 1G --iters 7 --json)
	peer=("$here/bench-peer.sh" --dir "$dir" --size 1G --iters 5 --json)
	# 1 GiB a rank needs about 22 GiB for the four nodes' pools.
	preempt=("$here/bench-preempt.sh" --dir "$dir" --size 512M --iters 3 --json $torch)
	step=("$here/bench-step.sh" --dir "$dir" --calls 1000000 --runs 7 --cpu-seconds 3)
fi
# The contributed steps (see the header): their names, in order.
added_steps=""
for f in "$steps_dir"/*.sh; do
	[ -e "$f" ] || continue
	n=$(basename "$f" .sh)
	case "$n" in *[!a-z0-9_-]*|"") die "$steps_dir/$n.sh: a step's name is [a-z0-9_-]+" ;; esac
	case " $builtin_steps $added_steps " in *" $n "*) die "$steps_dir/$n.sh: step $n exists already" ;; esac
	added_steps+=" $n"
done
order="$builtin_steps$added_steps"
[ -n "$only" ] || only=${order// /,}
for n in ${only//,/ }; do
	case " $order " in *" $n "*) ;; *) die "--only: no step '$n' (steps: $order)" ;; esac
done
printf '%s\n' $order >"$work/order"

# What is measured: the tree as it is when the run starts.
commit=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
dirty=0
[ -n "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null | head -1)" ] && dirty=1
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
	printf '%s\t%s\n' "$name" "$(echo "${shown% }" | sed "s|--dir $dir ||; s|$dir|DIR|g; s|$repo/||g")" \
		>>"$work/commands"
	t0=$(date +%s)
	set +e
	"$@" >"$work/$name.out" 2>"$work/$name.err"
	rc=$?
	set -e
	rm -rf "${dir:?}" && mkdir "$dir"
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
for n in $added_steps; do
	full=() smoke=()
	# shellcheck disable=SC1090
	. "$steps_dir/$n.sh"
	if [ "$is_smoke" = 1 ]; then
		[ "${#smoke[@]}" -gt 0 ] || die "$steps_dir/$n.sh sets no smoke=(...)"
		run_step "$n" "${smoke[@]}"
	else
		[ "${#full[@]}" -gt 0 ] || die "$steps_dir/$n.sh sets no full=(...)"
		run_step "$n" "${full[@]}"
	fi
done
t_total=$(( $(date +%s) - t_start ))
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
fs=$(df -T "$work" | awk 'NR == 2 { print $2 " on " $1 }')
virt=$(systemd-detect-virt 2>/dev/null || true)

report=$(BA_SMOKE=$is_smoke BA_COMMIT=$commit BA_DIRTY=$dirty BA_DATE="$(date -u '+%Y-%m-%d %H:%M UTC')" \
	BA_SECONDS=$t_total BA_LOAD_START="$load_start" BA_LOAD_END="$load_end" BA_FAILED="${failed[*]:-}" \
	BA_MACHINE="$(nproc) vCPUs ($cpu${virt:+, $virt guest}), $mem RAM, $fs, kernel $(uname -r)" \
	python3 "$here/bench/all-report.py" "$work" ${doc:+--doc "$doc"})
emit_report "$report" "$out"
[ -z "$doc" ] || log "table in $doc updated: the rows of $(cut -f1 "$work/commands" | tr '\n' ' ')"
[ "${#failed[@]}" = 0 ] || die "failed: ${failed[*]}"
[ ! -s "$work/missing" ] || { touch "$work/keep"; die "figures missing (see the report)"; }
log "done in $t_total s"
