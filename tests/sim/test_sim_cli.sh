#!/usr/bin/env bash
# ckpt-sim's command line: bad input exits 2 naming the option; the tables,
# --json, the seed, --from-bench and --plot do what docs/goodput.md says.
set -euo pipefail
BIN=${CKPT_BIN:?}
sim="$BIN/ckpt-sim"
here=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null || { echo "SKIP: no python3 to read the JSON"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-sim-test-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# Exit 2, nothing on stdout, and stderr naming the option (and maybe more).
bad() {
	local want=$1; shift
	local rc=0
	"$sim" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
	if [ "$rc" -ne 2 ]; then
		fail "ckpt-sim $*: exit $rc, expected 2"
	elif ! grep -qF -- "$want" "$tmp/err"; then
		fail "ckpt-sim $*: message does not name '$want': $(cat "$tmp/err")"
	elif [ -s "$tmp/out" ]; then
		fail "ckpt-sim $*: wrote to stdout on bad input"
	fi
}

printf '{"bytes": 1048576, "stall_s": ' >"$tmp/truncated.json"
printf '{"bytes": 1048576, "durable_s": 1, "restore_s": 1}' >"$tmp/nostall.json"
printf '{"bytes": 1048576, "stall_s": -1, "durable_s": 1, "restore_s": 1}' >"$tmp/negative.json"
printf '[1, 2, 3]' >"$tmp/array.json"
printf '{"bytes": 0, "stall_s": 1, "durable_s": 1, "restore_s": 1}' >"$tmp/zerobytes.json"
printf '{"bytes": 1048576, "stall_s": 1, "stall_s": 2, "durable_s": 3, "restore_s": 1}' >"$tmp/dup.json"

bad --state-per-gpu --state-per-gpu -5
bad --state-per-gpu --state-per-gpu 0
bad --state-per-gpu --state-per-gpu 4X
bad --gpus --gpus 0
bad --gpus --gpus 1024,0
bad --gpus --gpus -8
bad --gpus --gpus abc
bad --gpus --gpus ''
bad --gpus-per-node --gpus-per-node 0
bad --strategy --strategy foo
bad "unknown strategy 'foo'" --strategy remote,foo:5
bad --strategy --strategy ckpt:0
bad --hours --hours -1
bad --hours --hours 0
bad --runs --runs 0
bad --restart-s --restart-s -1
bad --node-loss-frac --node-loss-frac 1.5
bad --partner-loss-frac --partner-loss-frac -0.1
bad --remote-write-bw --remote-write-bw 0
bad --remote-total-bw --remote-total-bw -1
bad --peer-bw --peer-bw 5furlongs
bad --interval --interval 0
bad --interval --interval sometimes
bad --mtbf-gpu-hours --mtbf-gpu-hours 0
bad --mtbf-gpu-hours --mtbf-gpu-hours nan
bad --interval --mtbf-gpu-hours inf
bad --seed --seed -3
bad --frobnicate --frobnicate
bad --gpus --gpus
bad --from-bench --from-bench "$tmp/does-not-exist.json"
bad --from-bench --from-bench "$tmp"
bad "not valid JSON" --from-bench "$tmp/truncated.json"
bad '"stall_s" missing' --from-bench "$tmp/nostall.json"
bad '"stall_s" out of range' --from-bench "$tmp/negative.json"
bad "not a JSON object" --from-bench "$tmp/array.json"
bad '"bytes"' --from-bench "$tmp/zerobytes.json"
bad "duplicate" --from-bench "$tmp/dup.json"

"$sim" --help >"$tmp/help" || fail "--help failed"
grep -q -- '--from-bench' "$tmp/help" || fail "--help does not list --from-bench"

# The restart, phase by phase (JSON): per failure, the phases and the
# restore add up to the restart and restore lost; ckpt's spares hold the
# lost state for nearly every node loss; with no spares none does and the
# wait for a new node shows; --restart-s is the one constant of before.
"$sim" --runs 3 --gpus 16384 --strategy remote,ckpt --json >"$tmp/ph.json" || fail "phased run failed"
"$sim" --runs 3 --gpus 16384 --strategy ckpt --spares 0 --json >"$tmp/ph0.json" || fail "--spares 0 failed"
"$sim" --runs 3 --gpus 16384 --strategy ckpt --restart-s 120 --json >"$tmp/flat.json" || fail "--restart-s failed"
python3 - "$tmp/ph.json" "$tmp/ph0.json" "$tmp/flat.json" <<'PY' || fail "restart phases do not add up"
import json, sys
ph, ph0, flat = (json.load(open(f)) for f in sys.argv[1:4])
wall = ph["model"]["hours"] * 3600
for x in ph["results"]:
    p = x["restart_per_failure_s"]
    n = x["failures_per_run"]
    parts = sum(p[k] for k in ("detect", "spare", "sched", "start", "comm", "warmup"))
    assert abs(parts * n - x["lost"]["restart"] * wall) < 1e-6 * wall, (parts * n, x["lost"]["restart"] * wall)
    assert abs(p["restore"] * n - x["lost"]["restore"] * wall) < 1e-6 * wall
    assert abs(p["comm"] - 265 * 16384 / 98304) < 1.0, p["comm"]  # auto, rarely cut short
    if x["kind"] == "ckpt":
        assert p["detect"] < 3 and p["staged_per_run"] > 0.9 * x["failures_by_class_per_run"]["node"], p
    else:
        assert p["detect"] > 10 and p["staged_per_run"] == 0, p
z = ph0["results"][0]["restart_per_failure_s"]
assert z["spares"] == 0 and z["staged_per_run"] == 0 and z["spare"] > 300, z
assert "restart_phases" not in flat["model"] and flat["model"]["restart_s"] == 120
f = flat["results"][0]["restart_per_failure_s"]
assert f["sched"] > 100 and f["detect"] == 0 and f["comm"] == 0, f
PY
bad "spares" --spares -1
bad "spares" --spares many
bad "comm-s" --comm-s -3

# The tables: every strategy at every count, the failure source named.
"$sim" --runs 3 >"$tmp/table"
grep -q 'Llama 3' "$tmp/table" || fail "the table does not say where the MTBF comes from"
for s in 'remote every 30 min' 'remote, Young/Daly' 'ckpt tiers, Young/Daly'; do
	[ "$(grep -c "^$s " "$tmp/table")" -eq 9 ] || fail "'$s' not in the three tables at 3 GPU counts"
done

# --json: one row per strategy and count; goodput and the losses add up.
"$sim" --runs 3 --gpus 1024,16384 --json >"$tmp/a.json"
python3 - "$tmp/a.json" <<'PY' || fail "--json report inconsistent"
import json, sys
r = json.load(open(sys.argv[1]))
rows = r["results"]
assert len(rows) == 6, len(rows)
assert {x["gpus"] for x in rows} == {1024, 16384}
for x in rows:
    g = x["goodput"]
    assert 0 < g["min"] <= g["mean"] <= g["max"] <= 1, g
    total = g["mean"] + sum(x["lost"].values())
    assert abs(total - 1) < 1e-9, (x["strategy"], total)
    assert x["interval_s"] > 0 and x["stall_s"] > 0
    # Young/Daly: between 0.9 and 1 times sqrt(2 C M) for C << M.
    if x["interval_auto"] and x["kind"] == "remote":
        young = (2 * x["stall_s"] * x["job_mtbf_s"]) ** 0.5
        assert 0.9 * young < x["interval_s"] < young, (x["interval_s"], young)
assert abs(r["model"]["mtbf_gpu_hours"] - 54 * 24 * 16384 / 419) < 1e-3
PY

# The seed: same seed, same output; another seed, another.
"$sim" --runs 3 --gpus 1024,16384 --json >"$tmp/b.json"
cmp -s "$tmp/a.json" "$tmp/b.json" || fail "same seed, different output"
"$sim" --runs 3 --gpus 1024,16384 --json --seed 2 >"$tmp/c.json"
cmp -s "$tmp/a.json" "$tmp/c.json" && fail "--seed 2 gave the output of seed 1"

# No failures: goodput is exactly 1 - stall * saves / T.
"$sim" --mtbf-gpu-hours inf --interval 30 --strategy remote,ckpt --gpus 4096 --hours 24 --runs 1 --json \
	>"$tmp/nofail.json"
python3 - "$tmp/nofail.json" <<'PY' || fail "goodput without failures"
import json, math, sys
r = json.load(open(sys.argv[1]))
T = r["model"]["hours"] * 3600
for x in r["results"]:
    S, I = x["stall_s"], x["interval_s"]
    n = math.floor(T / (S + I))
    cut = max(0.0, T - n * (S + I) - I)
    want = 1 - (n * S + cut) / T
    assert abs(x["goodput"]["mean"] - want) < 1e-9 * want, (x["strategy"], x["goodput"]["mean"], want)
    assert x["failures_per_run"] == 0
PY

# --from-bench: the ckpt stall is ckpt-bench's, scaled to the state size.
"$sim" --from-bench "$here/bench-sample.json" --state-per-gpu 1G --strategy ckpt --gpus 1024 --runs 2 --json \
	>"$tmp/bench.json"
python3 - "$tmp/bench.json" "$here/bench-sample.json" <<'PY' || fail "--from-bench costs"
import json, sys
r = json.load(open(sys.argv[1]))
b = json.load(open(sys.argv[2]))
x = r["results"][0]
k = 2**30 / b["bytes"]
assert abs(x["stall_s"] - b["stall_s"] * k) < 1e-9 * x["stall_s"], (x["stall_s"], b["stall_s"] * k)
assert r["model"]["from_bench"]["bytes"] == b["bytes"]
PY
"$sim" --from-bench "$here/bench-sample.json" --runs 2 >"$tmp/fb.txt" || fail "--from-bench run failed"
grep -q 'ckpt-bench' "$tmp/fb.txt" || fail "--from-bench not reported"

# --plot: a PNG where python3 has matplotlib, else a clear refusal.
have_mpl=0
for py in ${CKPT_PYTHON:-python3 /usr/bin/python3}; do
	"$py" -c 'import matplotlib' >/dev/null 2>&1 && have_mpl=1
done
rc=0
"$sim" --runs 2 --plot "$tmp/g.png" >/dev/null 2>"$tmp/err" || rc=$?
if [ $have_mpl -eq 1 ]; then
	[ $rc -eq 0 ] || fail "--plot exited $rc: $(cat "$tmp/err")"
	[ "$(head -c 8 "$tmp/g.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "--plot wrote no PNG"
else
	echo "note: no matplotlib here; checking the refusal only"
	if [ $rc -ne 1 ] || ! grep -q matplotlib "$tmp/err"; then
		fail "--plot without matplotlib: exit $rc, $(cat "$tmp/err")"
	fi
fi

if [ $fails -ne 0 ]; then
	echo "test_sim_cli: $fails checks failed"
	exit 1
fi
echo "test_sim_cli: ok"
