#!/usr/bin/env bash
# tools/bench-all.sh --smoke: every benchmark behind docs/benchmarks.md's
# targets (ckptd-roles-bench, bench-ls.sh with ckptd-coord-bench, bench.sh
# with ckpt-bench and fio, bench-daemon.sh, bench-peer.sh with
# ckpt-rank-bench and ckpt-fabric-bench, bench-preempt.sh, bench-step.sh with
# ckpt-step-bench) still runs at a tiny size and reports every figure, and
# --doc replaces only the marked part of a document. Nothing is timed or
# judged: the figures at these sizes mean nothing. Then a contributed step
# (a file of tools/bench/all.d/, BENCH-ROW lines): its rows are judged
# against their targets, and --only STEP --doc replaces that step's rows
# alone, keeping the others with their commit and machine.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for exe in "${CKPT_BIN:?}/ckptd" "$CKPT_BIN/ckpt" "$CKPT_BIN/ckpt-bench" "$CKPT_BIN/ckpt-rank-bench" \
	"$CKPT_BIN/ckpt-step-bench" "$CKPT_BIN/ckptd-coord-bench" "$CKPT_BIN/ckpt-restore-bench" "${CKPT_TESTS_BIN:?}/ckptd-roles-bench"; do
	[ -x "$exe" ] || { echo "SKIP: no $exe"; exit 77; }
done
command -v fio >/dev/null || { echo "SKIP: no fio"; exit 77; }
FI_TCP_IFACE=lo fi_info -p 'tcp;ofi_rxm' >/dev/null 2>&1 || { echo "SKIP: no tcp;ofi_rxm provider"; exit 77; }
# the s3 step (tools/bench/all.d/s3.sh) starts a Ceph gateway (77 without Ceph, 1 with CKPT_REQUIRE_S3=1)
bash "$here/s3/s3gw.sh" check || exit $?
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-test-bench-all-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
printf 'before\n<!-- bench-all:begin -->\nold table\n<!-- bench-all:end -->\nafter\n' >"$tmp/doc.md"
bash "$here/../tools/bench-all.sh" --smoke --out "$tmp/report.md" --doc "$tmp/doc.md"
fail() { echo "FAIL: $*" >&2; exit 1; }
grep -q "smoke sizes" "$tmp/report.md" || fail "the report does not say it is a smoke run"
for step in roles ls disk daemon peer preempt step; do
	grep -qE "^\| $step \| .* \| [0-9.]+( ms| s| %)? \|" "$tmp/report.md" || fail "no figure of step $step"
	grep -qE "^- $step \([0-9]+ s\): \`" "$tmp/report.md" || fail "no command of step $step"
done
! grep -q -- "--dir" "$tmp/report.md" || fail "a temporary path leaked into the commands"
# the s3 step measured ckpt itself (tools/bench/ckpt-s3.sh: a real agent's
# flush, a restore compared bit for bit), not "not yet measured"
grep -qE "^\| s3 \| S3 [^|]*: ckpt flush / best other client's upload \| [0-9.]+ \|" "$tmp/report.md" ||
	fail "no ckpt flush figure in the s3 step"
grep -qE "^\| s3 \| S3 [^|]*: LIST requests of ckpt's save and restore \| 0 \|" "$tmp/report.md" ||
	fail "ckpt's save or restore sent a LIST, or its figure is missing"
commit=$(git -C "$here/.." rev-parse HEAD 2>/dev/null || true)
[ -z "$commit" ] || grep -q "$commit" "$tmp/report.md" || fail "the report does not name commit $commit"
[ "$(head -2 "$tmp/doc.md")" = "$(printf 'before\n<!-- bench-all:begin -->')" ] || fail "--doc changed what comes before"
[ "$(tail -2 "$tmp/doc.md")" = "$(printf '<!-- bench-all:end -->\nafter')" ] || fail "--doc changed what comes after"
! grep -q "old table" "$tmp/doc.md" || fail "--doc left the old table"
grep -q "^| roles |" "$tmp/doc.md" || fail "--doc did not put the table in"
for step in $(ls "$here/../tools/bench/all.d" 2>/dev/null | sed -n 's/\.sh$//p'); do
	grep -qE "^\| $step \| " "$tmp/report.md" || fail "no figure of the contributed step $step"
done

mkdir "$tmp/steps"
demo() { # value target
	printf 'full=(printf "%%s\\n" %q %q)\nsmoke=("${full[@]}")\n' \
		"BENCH-ROW {\"figure\": \"a demo ratio\", \"value\": $1, \"format\": \"%.2f\", \"target\": \"$2\"}" \
		'a line that is not a row' >"$tmp/steps/demo.sh"
}
demo 0.93 ">= 0.80"
bash "$here/../tools/bench-all.sh" --steps "$tmp/steps" --only demo --doc "$tmp/doc.md" >"$tmp/demo.md" 2>"$tmp/demo.err" ||
	fail "a contributed step's run failed: $(cat "$tmp/demo.err")"
grep -qE '^\| demo \| a demo ratio \| 0.93 \| >= 0.80 \| yes \| `[0-9a-f]{7}\+?` \| [0-9-]{10} \| A \|$' "$tmp/doc.md" ||
	fail "the contributed row is not in the document, judged: $(grep demo "$tmp/doc.md")"
grep -q "^| roles |" "$tmp/doc.md" || fail "--only demo --doc dropped the other steps' rows"
demo 0.5 ">= 0.80"
bash "$here/../tools/bench-all.sh" --steps "$tmp/steps" --only demo --doc "$tmp/doc.md" >/dev/null 2>&1 ||
	fail "a target not met made the run fail"
[ "$(grep -c '^| demo |' "$tmp/doc.md")" = 1 ] || fail "the rerun's row did not replace the old one"
grep -qE '^\| demo \| a demo ratio \| 0.50 \| >= 0.80 \| \*\*no\*\* \|' "$tmp/doc.md" || fail "a target not met is not said"
grep -q "^| roles |" "$tmp/doc.md" || fail "the rerun dropped the other steps' rows"
demo null ">= 0.80"
! bash "$here/../tools/bench-all.sh" --steps "$tmp/steps" --only demo >"$tmp/demo.md" 2>"$tmp/demo.err" ||
	fail "a missing figure did not fail the run"
# The failed run keeps its folder for its logs, and says where: not here.
kept=$(sed -n 's/^bench-all.sh: logs kept in //p' "$tmp/demo.err")
[ -n "$kept" ] && [ -d "$kept" ] || fail "the failed run does not say where it kept its logs"
case "$kept" in */bench-all-*) rm -rf "$kept" ;; esac
grep -qF '| demo | a demo ratio | **missing** |' "$tmp/demo.md" || fail "a missing figure is not reported"
echo "bench-all.sh --smoke: every step ran and reported its figures; contributed steps' rows merge"
