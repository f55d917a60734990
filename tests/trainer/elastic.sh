#!/usr/bin/env bash
# Elastic resume: a job saved by 4 ranks comes back on 3 ranks and on 2
# (fewer nodes after a preemption). libckpt repartitions the ZeRO-1
# optimizer shards (adam_m, adam_v) over the new ranks; the test proves
#  - the state each new rank holds right after the restore (--dump-restored)
#    is the saved global state, element for element: the weights, and the
#    new shards of adam_m and adam_v laid side by side, against the version
#    `ckpt export` reassembles from the 4 saved ranks;
#  - training goes on along the same loss curve: the mean loss over the
#    steps after the resume is close to an uninterrupted 4-rank run's (the
#    data order differs, so the single losses do), and well below where it
#    started.
set -euo pipefail
BIN=${CKPT_BIN:?}
work=$(mktemp -d "${TMPDIR:-/tmp}/trainer-elastic-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
args=(--steps 80 --ckpt-every 20 --log-every 5 --seed 3)

"$BIN/trainer" --ranks 4 "${args[@]}" --root "$work/ref" >"$work/ref.out" 2>"$work/ref.err" ||
	{ cat "$work/ref.err" >&2; fail "the uninterrupted run failed"; }
"$BIN/trainer" --ranks 4 "${args[@]}" --steps 40 --root "$work/saved" >"$work/saved.out" 2>"$work/saved.err" ||
	{ cat "$work/saved.err" >&2; fail "the 4-rank run to step 40 failed"; }
"$BIN/ckpt" export --root "$work/saved" --job trainer --version 40 --format raw --out "$work/global" >/dev/null ||
	fail "ckpt export of the saved version"

losses() { grep '^step ' "$1" | awk '$2 > 40 { s += $4; n++ } END { printf "%.4f\n", s / n }'; }
ref=$(losses "$work/ref.out")

for m in 3 2; do
	cp -a "$work/saved" "$work/r$m"
	mkdir "$work/dump$m"
	"$BIN/trainer" --ranks "$m" "${args[@]}" --root "$work/r$m" --dump-restored "$work/dump$m" \
		>"$work/r$m.out" 2>"$work/r$m.err" || { cat "$work/r$m.err" >&2; fail "the $m-rank resume failed"; }
	grep -q "^resharded step 40 from 4 ranks to $m$" "$work/r$m.out" ||
		{ cat "$work/r$m.out" >&2; fail "$m ranks: no resharded resume from step 40"; }
	[ "$(ls "$work/dump$m"/adam_m.*.f32 | wc -l)" -eq "$m" ] || fail "$m ranks: not $m shards of adam_m"
	python3 - "$work/dump$m" "$work/global" "$m" <<'EOF' || fail "$m ranks: the restored state is not the saved one"
import glob, os, sys
dump, glob_dir, m = sys.argv[1], sys.argv[2], int(sys.argv[3])
for name in ("adam_m", "adam_v", "weights"):
    want = open(os.path.join(glob_dir, name + ".bin"), "rb").read()
    pieces = []
    for p in glob.glob(os.path.join(dump, name + ".*.f32")):
        _, off, n, _ = os.path.basename(p).rsplit(".", 3)
        pieces.append((int(off), int(n), open(p, "rb").read()))
    pieces.sort()
    at = 0
    for off, n, data in pieces:
        if n == 0:
            continue
        if off != at or len(data) != 4 * n:
            sys.exit("%s: a piece at %d of %d elements does not follow %d" % (name, off, n, at))
        if data != want[4 * off:4 * (off + n)]:
            sys.exit("%s: elements %d..%d differ from the saved state" % (name, off, off + n))
        at += n
    if 4 * at != len(want):
        sys.exit("%s: %d of %d elements restored" % (name, at, len(want) // 4))
    print("%d ranks: %s equal to the saved state (%d elements)" % (m, name, at))
EOF
	got=$(losses "$work/r$m.out")
	first=$(grep '^step 1 ' "$work/ref.out" | awk '{ print $4 }')
	echo "$m ranks: mean loss over steps 45..80 $got, uninterrupted 4 ranks $ref, step 1 $first"
	awk -v g="$got" -v r="$ref" -v f="$first" 'BEGIN {
		if (g - r > 0.25 || r - g > 0.25) { print "FAIL: the loss left the curve"; exit 1 }
		if (g > 0.7 * f) { print "FAIL: the loss went back up"; exit 1 }
	}' || exit 1
done
echo "elastic: ok"
