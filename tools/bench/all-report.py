#!/usr/bin/env python3
"""The report of tools/bench-all.sh: every step's figures beside their
targets, from the outputs the run left in its work folder, and (--doc) the
same rows merged into the marked table of a document.

A step's figures come from one of two places:
  - the built-in steps (roles, ls, disk, daemon, peer, preempt, step): the
    parsers below read what their programs print;
  - any other step (a file of tools/bench/all.d/): the lines its command
    prints on stdout of the form
        BENCH-ROW {"figure": "...", "value": 0.93, "format": "%.2f",
                   "target": ">= 0.80", "ok": true}
    "value" null (or absent) is a missing figure (the run fails);
    "format" defaults to "%g"; "target" is free text; "ok" (true/false)
    says whether it is met, else a target of the form "OP NUMBER [unit]"
    (OP one of < <= > >=) is judged against the value, else nothing is
    judged. A step that prints no row at all is reported as missing.

--doc FILE: the part of FILE between "<!-- bench-all:begin -->" and
"<!-- bench-all:end -->" is rewritten: the rows of the steps this run
measured replace that step's rows; the other steps' rows stay, with the
commit, date and machine they were measured at. So one benchmark can be
rerun on its own (bench-all.sh --only NAME --doc docs/benchmarks.md).

usage: all-report.py WORK [--doc FILE] > report.md
WORK holds, per step NAME that ran, NAME.out (its stdout) and NAME.seconds;
"commands" (NAME, a tab, the command as shown); "order" (every step's name,
one a line). The run itself is described by the environment bench-all.sh
sets: BA_SMOKE (1), BA_COMMIT, BA_DIRTY (1), BA_DATE, BA_SECONDS,
BA_LOAD_START, BA_LOAD_END, BA_MACHINE, BA_FAILED (names, space-separated).
"""
import json
import os
import re
import statistics
import sys

BEGIN, END = "<!-- bench-all:begin -->", "<!-- bench-all:end -->"
BUILTIN = ["roles", "ls", "disk", "daemon", "peer", "preempt", "step"]
HEAD = "| step | figure | value | target | met | commit | date | machine |"
RULE = "|---|---|---:|---|---|---|---|---|"
med = statistics.median


class Steps:
    def __init__(self, work, meta):
        self.work, self.meta = work, meta
        self.smoke = meta["smoke"]
        self.rows, self.missing = [], []

    def text(self, name):
        p = os.path.join(self.work, name + ".out")
        return open(p, errors="replace").read() if os.path.exists(p) else ""

    def last_json(self, name):
        for line in reversed(self.text(name).splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except ValueError:
                    pass
        return None

    def row(self, step, what, value, fmt, target, ok):
        """ok: a function of the value, True/False, or None (no judgement)."""
        if value is None:
            self.missing.append("%s: %s" % (step, what))
            self.rows.append([step, what, "**missing**", target, "**no**" if target else ""])
            return
        if callable(ok):
            ok = ok(value)
        met = "" if ok is None else ("yes" if ok else "**no**")
        if self.smoke and ok is not None:
            met = "(smoke)"
        try:
            shown = fmt % value
        except (TypeError, ValueError):
            shown = str(value)
        self.rows.append([step, what, shown, target, met])


def seconds(d):  # "60s", "1500ms", "2m"
    m = re.match(r"^(\d+)(ms|s|m)$", d or "")
    return int(m.group(1)) * {"ms": 1e-3, "s": 1.0, "m": 60.0}[m.group(2)] if m else None


def judge(target, value):
    """True/False for a target "OP NUMBER [unit]" against a number; else None."""
    m = re.match(r"^\s*(<=|>=|<|>)\s*([0-9.]+)", target or "")
    if not m or not isinstance(value, (int, float)):
        return None
    x = float(m.group(2))
    return {"<": value < x, "<=": value <= x, ">": value > x, ">=": value >= x}[m.group(1)]


# --- the built-in steps' parsers

def roles(s):
    lat = {int(m.group(1)): float(m.group(2)) for m in
           re.finditer(r"^\s*(\d+) ranks: median\s+([\d.]+) ms", s.text("roles"), re.M)}
    if lat:
        w = max(lat)
        s.row("roles", "commit of one version, %d ranks (64 simulated agents over TCP), median" % w
              if not s.smoke else "commit of one version, %d ranks, median" % w, lat[w], "%.1f ms", "< 1000 ms",
              lambda v: v < 1000)
    else:
        s.row("roles", "commit latency", None, "", "< 1000 ms", None)


def ls(s):
    j = s.last_json("ls") or {}
    recs = j.get("records", 0)
    s.row("ls", "`ckpt ls --daemon`, %d versions over %s shard records, whole process, median"
          % (j.get("versions", 0), "{:,}".format(recs)), j.get("ls_median_ms"), "%.1f ms", "< 100 ms",
          lambda v: v < 100)
    s.row("ls", "the coordinator's own listing of them", j.get("engine_list_ms"), "%.2f ms", "", None)


def disk(s):
    j = s.last_json("disk") or {}
    for z in j.get("sizes", []) or [{}]:
        b = z.get("bytes", 0)
        h = "%g GiB" % (b / 2.0**30) if b >= 2**30 else "%g MiB" % (b / 2.0**20)
        s.row("disk", "%s: save stall / memcpy (median / best)" % h, z.get("stall_vs_memcpy"), "%.2f", "<= 1.3",
              lambda v: v <= 1.3)
        s.row("disk", "%s: save stall / memcpy just before it (median of pairs)" % h,
              z.get("stall_vs_memcpy_paired"), "%.2f", "", None)
        s.row("disk", "%s: durable GiB/s / fio write GiB/s" % h, z.get("durable_vs_fio_write"), "%.2f", ">= 0.85",
              lambda v: v >= 0.85)
        s.row("disk", "%s: durable GiB/s, recycled shard files / fio overwrite GiB/s" % h,
              z.get("durable_recycled_vs_fio_overwrite"), "%.2f", ">= 0.90", lambda v: v >= 0.90)
        s.row("disk", "%s: restore GiB/s / fio read GiB/s" % h, z.get("restore_vs_fio_read"), "%.2f", ">= 0.95",
              lambda v: v >= 0.95)


def daemon(s):
    j = s.last_json("daemon") or {}
    s.row("daemon", "save into node DRAM: stall / memcpy (median / best)", j.get("stall_vs_memcpy"), "%.2f", "", None)
    s.row("daemon", "LOCAL_MEM commit / durable on disk", j.get("mem_commit_vs_durable"), "%.2f", "", None)
    s.row("daemon", "restore from LOCAL_MEM: speed / memcpy speed (best memcpy)", j.get("restore_vs_memcpy"), "%.2f",
          ">= 0.80", lambda v: v >= 0.8)
    s.row("daemon", "restore from LOCAL_MEM: speed / memcpy just before it (median of pairs)",
          j.get("restore_vs_memcpy_paired"), "%.2f", "", None)
    st = j.get("stall_s_all") or []
    rest = sorted(st[1:])
    first = st[0] / rest[len(rest) // 2] if len(st) >= 2 and rest[len(rest) // 2] > 0 else None
    s.row("daemon", "a job's first save into node DRAM: stall / the median of its others", first, "%.2f", "<= 1.25",
          lambda v: v <= 1.25)


def peer(s):
    j = s.last_json("peer") or {}
    s.row("peer", "PEER_MEM copy GB/s / raw fabric write GB/s", j.get("copy_vs_fabric_write"), "%.2f", ">= 0.70",
          lambda v: v >= 0.70)
    s.row("peer", "save stall with PEER_MEM / without", j.get("stall_peer_vs_nopeer"), "%.2f", "~1.0", None)
    s.row("peer", "restore on a new node from partner DRAM: speed / raw fabric read", j.get("restore_new_node_vs_fabric_read"),
          "%.2f", ">= 0.80", lambda v: v >= 0.80)
    s.row("peer", "restore from partner DRAM, pool ready: speed / raw fabric read", j.get("restore_peer_vs_fabric_read"),
          "%.2f", ">= 0.80", lambda v: v >= 0.80)


def preempt(s):
    j = s.last_json("preempt") or {}
    it, safe = j.get("iters"), j.get("safe_in_time")
    dl = j.get("deadline", "?")
    s.row("preempt", "notices whose emergency version was safe before the deadline (%s)" % dl,
          None if it is None else safe / float(it) if it else 0.0, "%.2f", "1.00 (every one)", lambda v: v >= 1.0)
    s.row("preempt", "notice to emergency version safe, median (%s per rank, 4 ranks)"
          % ("%g MiB" % (j["bytes"] / 2.0**20) if j.get("bytes") else "?"), j.get("notice_to_safe_s"), "%.2f s",
          "< deadline (%s)" % dl, lambda v: seconds(dl) is not None and v < seconds(dl))
    s.row("preempt", "restart from partner DRAM on a new node, ckpt_restore, median", j.get("peer_mem_restore_s"),
          "%.3f s", "", None)


def step(s):
    res = {m.group(1): (float(m.group(2)), float(m.group(3))) for m in
           re.finditer(r"^RESULT mode=(\w+) ns_per_call=([\d.]+) .*overhead_pct=([\d.]+)", s.text("step"), re.M)}
    for mode in ("embedded", "joined"):
        ns, pct = res.get(mode, (None, None))
        s.row("step", "ckpt_step's cost on a 100 ms step, %s (%s ns a call)" % (mode, "%.1f" % ns if ns else "?"),
              pct, "%.5f %%", "< 0.5 %", lambda v: v < 0.5)


def contributed(s, name):
    """The BENCH-ROW lines a step of tools/bench/all.d/ printed."""
    n = 0
    for line in s.text(name).splitlines():
        if not line.startswith("BENCH-ROW "):
            continue
        try:
            r = json.loads(line[len("BENCH-ROW "):])
        except ValueError:
            s.row(name, "a BENCH-ROW line that is not JSON: %s" % line[:60], None, "", "", None)
            continue
        n += 1
        target = str(r.get("target") or "")
        ok = r.get("ok")
        if ok is None:
            ok = judge(target, r.get("value"))
        s.row(name, str(r.get("figure", "?")).replace("|", "/"), r.get("value"), r.get("format") or "%g", target,
              bool(ok) if ok is not None else None)
    if n == 0:
        s.row(name, "its figures (no BENCH-ROW line printed)", None, "", "", None)


# --- the table: this run's rows, merged with a document's

def machine_letter(machines, desc):
    for k, v in machines.items():
        if v == desc:
            return k
    k = next(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in machines)
    machines[k] = desc
    return k


def parse_doc_part(lines):
    """Rows, machines, runs and commands kept in a document's marked part."""
    rows, machines, runs, cmds = [], {}, [], {}
    section = None
    for l in lines:
        if l.startswith("| ") and not l.startswith(HEAD):
            cells = [c.strip() for c in l.strip().strip("|").split("|")]
            if len(cells) == 8:
                rows.append(cells)
        elif l.startswith("Machines"):
            section = "m"
        elif l.startswith("Runs"):
            section = "r"
        elif l.startswith("Commands"):
            section = "c"
        elif l.startswith("- ") and section == "m":
            m = re.match(r"^- ([A-Z]): (.*)$", l)
            if m:
                machines[m.group(1)] = m.group(2)
        elif l.startswith("- ") and section == "r":
            runs.append(l)
        elif l.startswith("- ") and section == "c":
            m = re.match(r"^- (\S+) \(", l)
            if m:
                cmds[m.group(1)] = l
    return rows, machines, runs, cmds


def render(meta, s, order, old=None):
    """The marked part's text: this run's rows, and old's for the steps it did not run."""
    rows, machines, runs, cmds = old or ([], {}, [], {})
    ran = [n for n in order if n in meta["ran"]]
    letter = machine_letter(machines, meta["machine"])
    commit = meta["commit"][:7] + ("+" if meta["dirty"] else "")
    new = [r + ["`%s`" % commit, meta["date"][:10], letter] for r in s.rows]
    for f in meta["failed"]:
        new.append([f, "**the benchmark failed**", "", "", "**no**", "`%s`" % commit, meta["date"][:10], letter])
    kept = [r for r in rows if r[0] not in meta["ran"]]
    # Steps in the order bench-all runs them, then any the document names
    # that no longer exist.
    known = order + sorted({r[0] for r in kept} - set(order))
    allrows = sorted(kept + new, key=lambda r: known.index(r[0]))
    this_run = "- `%s`%s, %s, machine %s, %s s, load average %s at the start, %s at the end%s: %s" % (
        meta["commit"], " (with uncommitted changes)" if meta["dirty"] else "", meta["date"], letter,
        meta["seconds"], meta["load_start"], meta["load_end"],
        " (**smoke sizes: the figures are not measurements**)" if s.smoke else "", ", ".join(ran) or "nothing")
    runs = [r for r in runs if any(("`" + r0[5].strip("`").rstrip("+")) in r and r0[6] in r for r0 in kept)]
    runs.append(this_run)
    used = {r[7] for r in allrows}
    for n in ran:
        c = meta["commands"].get(n)
        if c:
            cmds[n] = "- %s (%s s): `%s`" % (n, meta["step_seconds"].get(n, "?"), c)
    out = []
    if s.smoke:
        out.append("At **smoke sizes: the figures are not measurements**.")
        out.append("")
    out += [HEAD, RULE] + ["| " + " | ".join(r) + " |" for r in allrows]
    out += ["", "Machines:", ""] + ["- %s: %s" % (k, machines[k]) for k in sorted(machines) if k in used]
    out += ["", "Runs (newest last):", ""] + runs
    out += ["", "Commands (each step's, from the repository root):", ""]
    out += [cmds[n] for n in known if n in cmds and any(r[0] == n for r in allrows)]
    return "\n".join(out)


def main():
    args = sys.argv[1:]
    doc = None
    if "--doc" in args:
        i = args.index("--doc")
        doc = args[i + 1]
        del args[i:i + 2]
    work, = args
    e = os.environ.get
    cmds = dict(l.rstrip("\n").split("\t", 1) for l in open(os.path.join(work, "commands")) if "\t" in l)
    secs = {}
    for n in cmds:
        p = os.path.join(work, n + ".seconds")
        if os.path.exists(p):
            secs[n] = open(p).read().strip()
    meta = {"smoke": e("BA_SMOKE") == "1", "commit": e("BA_COMMIT", "unknown"), "dirty": e("BA_DIRTY") == "1",
            "date": e("BA_DATE", "?"), "seconds": e("BA_SECONDS", "?"), "load_start": e("BA_LOAD_START", "?"),
            "load_end": e("BA_LOAD_END", "?"), "machine": e("BA_MACHINE", "?"),
            "order": open(os.path.join(work, "order")).read().split(), "ran": list(cmds),
            "failed": e("BA_FAILED", "").split(), "commands": cmds, "step_seconds": secs}
    s = Steps(work, meta)
    parsers = {"roles": roles, "ls": ls, "disk": disk, "daemon": daemon, "peer": peer, "preempt": preempt,
               "step": step}
    for name in meta["ran"]:
        if name in meta["failed"]:
            continue
        parsers.get(name, lambda st, n=name: contributed(st, n))(s)
    order = meta["order"]
    print(render(meta, s, order))
    if doc:
        text = open(doc).read().split("\n")
        b, e = text.index(BEGIN), text.index(END)
        if e < b:
            sys.exit("bench-all.sh: --doc: the end marker comes before the begin marker")
        part = render(meta, s, order, parse_doc_part(text[b + 1:e]))
        open(doc, "w").write("\n".join(text[:b + 1] + part.split("\n") + text[e:]))
    if s.missing:
        sys.stderr.write("bench-all.sh: figures missing: %s\n" % "; ".join(s.missing))
        open(os.path.join(work, "missing"), "w").write("\n".join(s.missing))


if __name__ == "__main__":
    main()
