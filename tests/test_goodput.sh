#!/usr/bin/env bash
# Goodput accounting from real step reports: a rank (ckpt-example, calling
# ckpt_step every step and saving every 40 steps through a ckptd agent) is
# killed with SIGKILL mid-run, stays down 4 s, and resumes from its last
# checkpoint. `ckpt goodput` must then show every kind of loss, in amounts
# that match what happened, and add up to the wall time; --plot draws it.
set -euo pipefail
BIN=${CKPT_BIN:?}
command -v python3 >/dev/null || exit 77
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-goodput-XXXXXX")
pid=
rank=
cleanup() {
	for p in $rank $pid; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	[ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$tmp/ckptd.log" ] && tail -n 20 "$tmp/ckptd.log" >&2; exit 1; }
j() { python3 -c 'import json,sys; d=json.load(sys.stdin); exec(sys.argv[1])' "$1"; }

umask 077
head -c 48 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token"
sock=$tmp/ckptd.sock
mkdir "$tmp/droot"
export CKPT_TOKEN_FILE=$tmp/token CKPT_DAEMON=unix:$sock CKPT_TIERS=local_mem,local_disk
unset CKPT_TOKEN
mport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN/ckptd" --role both --socket "$sock" --root "$tmp/droot" --node n0 --pool-size 64M \
	--retention-interval 0 --metrics-listen "127.0.0.1:$mport" >"$tmp/ckptd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || fail "ckptd did not come up"

args=(--root "$tmp/root" --job gp --rank 0 --world-size 1 --steps 400 --ckpt-every 150 --step-ms 10 --state-bytes 8M)
"$BIN/ckpt-example" "${args[@]}" >"$tmp/a.out" 2>&1 &
rank=$!
# Killed a little over a second after its first save: at least one step
# report went past the saved step, so the resumed run does some steps again.
for _ in $(seq 300); do grep "step 150 saved" "$tmp/a.out" >/dev/null && break; sleep 0.05; done
grep "step 150 saved" "$tmp/a.out" >/dev/null || fail "the first run saved nothing: $(cat "$tmp/a.out")"
sleep 1.3
kill -9 "$rank"
wait "$rank" 2>/dev/null || true
rank=
grep "final-digest" "$tmp/a.out" >/dev/null && fail "the first run finished before it was killed"
sleep 4
"$BIN/ckpt-example" "${args[@]}" >"$tmp/b.out" 2>&1 || fail "the second run: $(cat "$tmp/b.out")"
grep "^resumed from step\|restored" "$tmp/b.out" >/dev/null || grep -i "resum\|restor" "$tmp/b.out" >/dev/null ||
	fail "the second run did not resume: $(cat "$tmp/b.out")"
sleep 1.5 # the last report, and the judge

"$BIN/ckpt" goodput --daemon "unix:$sock" --job gp --json >"$tmp/g.json" || fail "goodput"
cat "$tmp/g.json" | j '
parts = ["useful_s", "stall_s", "restore_s", "recompute_s", "down_s", "other_s"]
# The parts come from the clocks of the ranks, the wall from the clock of
# the coordinator: they agree to within the jitter of the arrivals.
assert abs(sum(d[k] for k in parts) - d["wall_s"]) < 0.02 * d["wall_s"], d
assert d["failures"] >= 1, d
assert 3.5 < d["down_s"] < 8, d            # 4 s down, plus the relaunch
assert d["recompute_s"] > 0.05, d         # steps after the last save, done again
assert d["stall_s"] > 0, d
assert d["step"] == 400, d
# 400 steps of 10 ms sleep are useful: their time, not much more, not less.
assert 3.8 < d["useful_s"] < 9, d
assert d["recompute_s"] + d["useful_s"] > 4.0, d
assert 0.2 < d["goodput"] < 0.9, d
assert d["other_s"] < 0.25 * d["wall_s"], d
assert d["timeline"] and abs(sum(s["down_s"] for s in d["timeline"]) - d["down_s"]) < 0.01, d
' || fail "goodput accounting: $(cat "$tmp/g.json")"
"$BIN/ckpt" goodput --daemon "unix:$sock" --job gp | grep "goodput .*% over" >/dev/null || fail "text output"
# The same figures in the metrics, and the relaunched rank's restore by tier.
python3 - "$mport" "$tmp/g.json" <<'PY' || fail "metrics: see above"
import json, sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10).read().decode()
g = json.load(open(sys.argv[2]))
def val(prefix):
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    raise SystemExit(f"no series {prefix} in /metrics")
ratio = val('ckpt_goodput_ratio{ckpt_job="gp"}')
assert abs(ratio - g["goodput"]) < 0.02, (ratio, g["goodput"])
assert abs(val('ckpt_time_seconds_total{ckpt_job="gp",kind="down"}') - g["down_s"]) < 0.05
restores = sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
               if l.startswith('ckpt_restore_seconds_count{ckpt_job="gp"'))
assert restores >= 1, "no restore observed"
PY
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null || python3 -c 'import matplotlib' 2>/dev/null; then
	"$BIN/ckpt" goodput --daemon "unix:$sock" --job gp --plot "$tmp/g.png" >/dev/null || fail "--plot"
	[ "$(head -c 4 "$tmp/g.png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "--plot wrote no PNG"
fi
echo "goodput: ok"
