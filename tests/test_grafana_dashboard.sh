#!/usr/bin/env bash
# tools/grafana/ckpt-dashboard.json: valid JSON, a Grafana dashboard with a
# Prometheus data source variable and a ckpt_job variable, and every PromQL
# expression in it names only metrics that docs/operations.md's metrics table
# lists (plus the goodput metrics), so that the dashboard cannot drift from
# the docs. A bad expression is fed to the checker too: it must fail it.
set -euo pipefail
command -v python3 >/dev/null || { echo "skip: no python3" >&2; exit 77; }
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

python3 - "$src/tools/grafana/ckpt-dashboard.json" "$src/docs/operations.md" <<'PY'
import json
import re
import sys

dash_path, ops_path = sys.argv[1], sys.argv[2]
# Metrics documented elsewhere or on their way (docs/goodput.md): per job.
EXTRA = {"ckpt_goodput_ratio": "gauge", "ckpt_time_seconds_total": "counter"}
failures = []

def fail(msg):
    failures.append(msg)

# --- the metrics table of docs/operations.md ("### Metrics")
text = open(ops_path, encoding="utf-8").read()
m = re.search(r"^### Metrics\n(.*?)(?=^#{1,3} )", text, re.S | re.M)
if not m:
    sys.exit("FAIL: no '### Metrics' section in docs/operations.md")
documented = {}
for line in m.group(1).splitlines():
    row = re.match(r"\|\s*`(ckpt_[a-z0-9_]+)`\s*\|\s*(counter|gauge|histogram)\s*\|", line)
    if row:
        documented[row.group(1)] = row.group(2)
if len(documented) < 20:
    sys.exit(f"FAIL: only {len(documented)} metrics found in docs/operations.md's table")
known = set()
for name, kind in list(documented.items()) + list(EXTRA.items()):
    known.add(name)
    if kind == "histogram":
        known.update(name + s for s in ("_bucket", "_sum", "_count"))

# --- PromQL: the metric names an expression selects
KEYWORDS = {
    # aggregations and their modifiers, binary operators, offsets
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values",
    "group", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
    "offset", "inf", "nan",
}
FUNCS = {
    "abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "day_of_month",
    "day_of_week", "days_in_month", "delta", "deriv", "exp", "floor", "histogram_quantile", "holt_winters",
    "hour", "idelta", "increase", "irate", "label_join", "label_replace", "ln", "log2", "log10", "minute",
    "month", "predict_linear", "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sqrt", "time",
    "timestamp", "vector", "year", "avg_over_time", "min_over_time", "max_over_time", "sum_over_time",
    "count_over_time", "quantile_over_time", "stddev_over_time", "stdvar_over_time", "last_over_time",
    "present_over_time", "label_values", "query_result", "metrics",
}

def metric_names(expr):
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)           # strings
    e = re.sub(r"\{[^{}]*\}", "{}", e)                       # label matchers
    e = re.sub(r"\$\{[^}]*\}|\$\w+", "", e)                 # Grafana variables
    e = re.sub(r"\[[^\]]*\]", "[]", e)                       # range selectors
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    e = re.sub(r"\boffset\s+\S+", "", e)
    names = []
    for tok in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        w = tok.group(0)
        if w.lower() in KEYWORDS or w in FUNCS:
            continue
        if re.fullmatch(r"\d*[eE]\d+", w):
            continue
        names.append(w)
    return names

def check_expr(where, expr, sink):
    names = metric_names(expr)
    if not names:
        sink(f"{where}: no metric in '{expr}'")
    for n in names:
        if n not in known:
            sink(f"{where}: '{n}' is not in docs/operations.md's metrics table: {expr}")
    return names

# The checker itself: a misspelt metric and an undocumented one must fail.
for bad in ('rate(ckpt_shard_byte_total{ckpt_job="$ckpt_job"}[1m])',
            'histogram_quantile(0.99, sum by (le) (rate(node_cpu_seconds_total[5m])))',
            'ckpt_save_stall_seconds_bucket / ckpt_stall_total'):
    caught = []
    check_expr("self-test", bad, caught.append)
    if not caught:
        fail(f"the checker accepted '{bad}'")
good = 'histogram_quantile(0.99, sum by (le, ckpt_job, tier) (rate(ckpt_save_stall_seconds_bucket{ckpt_job=~"$ckpt_job",tier="local_mem"}[$__rate_interval])))'
caught = []
if check_expr("self-test", good, caught.append) != ["ckpt_save_stall_seconds_bucket"] or caught:
    fail(f"the checker misread '{good}': {caught}")

# --- the dashboard
try:
    dash = json.load(open(dash_path, encoding="utf-8"))
except ValueError as e:
    sys.exit(f"FAIL: {dash_path} is not valid JSON: {e}")
if not isinstance(dash.get("schemaVersion"), int) or dash["schemaVersion"] < 36:
    fail(f"schemaVersion {dash.get('schemaVersion')!r}: want a current one (>= 36)")
for key in ("title", "uid", "panels", "templating"):
    if key not in dash:
        fail(f"no '{key}'")
variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
ds_vars = [n for n, v in variables.items() if v.get("type") == "datasource" and v.get("query") == "prometheus"]
if not ds_vars:
    fail("no Prometheus data source variable")
job = variables.get("ckpt_job")
if not job:
    fail("no ckpt_job variable")
else:
    q = job.get("query")
    q = q.get("query") if isinstance(q, dict) else q
    lv = re.fullmatch(r"label_values\(\s*(\w+)\s*,\s*ckpt_job\s*\)", q or "")
    if not lv or lv.group(1) != "ckpt_versions_committed_total":
        fail(f"ckpt_job variable's query: {q!r}")
    else:
        check_expr("variable ckpt_job", lv.group(1), fail)

def all_panels(ps):
    for p in ps:
        yield p
        yield from all_panels(p.get("panels", []))

ids, exprs = set(), []
ds_refs = {"${%s}" % n for n in ds_vars} | {"$%s" % n for n in ds_vars}
for p in all_panels(dash.get("panels", [])):
    title = p.get("title", "?")
    if p.get("id") in ids:
        fail(f"panel id {p.get('id')} used twice")
    ids.add(p.get("id"))
    if p.get("type") == "row":
        continue
    gp = p.get("gridPos", {})
    if not all(isinstance(gp.get(k), int) for k in ("h", "w", "x", "y")) or gp["x"] + gp["w"] > 24:
        fail(f"panel '{title}': bad gridPos {gp}")
    targets = p.get("targets", [])
    if not targets:
        fail(f"panel '{title}' has no query")
    for t in targets:
        ds = t.get("datasource") or p.get("datasource") or {}
        if ds.get("uid") not in ds_refs:
            fail(f"panel '{title}': data source {ds!r} is not the data source variable")
        if not t.get("expr"):
            fail(f"panel '{title}' target {t.get('refId')}: no expr")
            continue
        if t["expr"].count("(") != t["expr"].count(")") or t["expr"].count("{") != t["expr"].count("}"):
            fail(f"panel '{title}': unbalanced expression {t['expr']}")
        exprs.append(t["expr"])
        check_expr(f"panel '{title}'", t["expr"], fail)

# The panels the dashboard is for: each of these metrics is queried.
used = set()
for e in exprs:
    used.update(metric_names(e))
for want in ("ckpt_save_stall_seconds_bucket", "ckpt_time_to_durable_seconds_bucket", "ckpt_shard_bytes_total",
             "ckpt_versions_committed_total", "ckpt_commit_latency_seconds_bucket", "ckpt_job_pool_used_bytes",
             "ckpt_job_pool_bytes", "ckpt_segment_grants_refused_total", "ckpt_segments_evicted_total",
             "ckpt_step_seconds", "ckpt_stragglers", "ckpt_straggler_step_seconds", "ckpt_agents",
             "ckpt_goodput_ratio", "ckpt_time_seconds_total"):
    if want not in used:
        fail(f"no panel queries {want}")

if failures:
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    sys.exit(1)
print(f"ok: {len(exprs)} expressions over {len(used)} metrics, all in docs/operations.md "
      f"({len(documented)} listed) or the goodput pair")
PY
