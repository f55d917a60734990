#!/usr/bin/env python3
"""The report of tools/bench-s3.sh: its measurements as a table, ratios to
the best other client and to fio, the memory-against-shard-size table, and
the BENCH-ROW lines of tools/bench-all.sh.

    s3-report.py RESULTS FLAT     (files bench-s3.sh wrote; BS_* in the environment)

RESULTS: one line per client run: NAME UP_MIBS UP_CPU_S_PER_GIB UP_PEAK_MIB
UP_LISTS DOWN_MIBS DOWN_CPU DOWN_PEAK DOWN_LISTS STATUS [SERVER_CPU_UP
SERVER_CPU_DOWN], or NAME - ... - not-installed|not-yet. FLAT: SIZE NAME
UP_PEAK_MIB DOWN_PEAK_MIB STATUS.
"""
import json
import os
import statistics
import sys

NOT = {"not-installed": "not installed", "not-yet": "not yet measured (its s3:// flush and restore are not on main)",
       "no-memory": "not run: the rank holds the shard in memory twice, more than is available"}


def num(x):
    return None if x == "-" else float(x)


def row(figure, value, fmt, target=None, ok=None):
    r = {"figure": figure, "value": value, "format": fmt}
    if target is not None:
        r["target"] = target
    if ok is not None:
        r["ok"] = ok
    print("BENCH-ROW " + json.dumps(r))


def main():
    env = os.environ
    shards, size, iters = env.get("BS_SHARDS", "?"), env.get("BS_SIZE", "?"), env.get("BS_ITERS", "?")
    fio_w, fio_r = num(env.get("BS_FIO_W") or "-"), num(env.get("BS_FIO_R") or "-")
    runs, status = {}, {}
    for line in open(sys.argv[1]):
        f = line.split()
        if not f:
            continue
        name, st = f[0], f[9]
        status[name] = st
        if st == "ok":
            runs.setdefault(name, []).append([float(x) for x in f[1:9]] + [float(x) for x in f[10:13]])
    med = {}
    for name, rs in runs.items():
        col = list(zip(*rs))
        med[name] = {
            "up": statistics.median(col[0]), "up_cpu": statistics.median(col[1]), "up_rss": max(col[2]),
            "up_lists": max(col[3]), "down": statistics.median(col[4]), "down_cpu": statistics.median(col[5]),
            "down_rss": max(col[6]), "down_lists": max(col[7]),
            "srv_up": statistics.median(col[8]) if len(col) > 8 and min(col[8]) >= 0 else None,
            "srv_down": statistics.median(col[9]) if len(col) > 9 and min(col[9]) >= 0 else None,
            "srv_both": statistics.median(col[10]) if len(col) > 10 else None,
            "up_all": col[0], "down_all": col[4],
        }
    others = {n: m for n, m in med.items() if n != "ckpt"}
    best_up = max(others, key=lambda n: others[n]["up"]) if others else None
    best_down = max(others, key=lambda n: others[n]["down"]) if others else None
    best_cpu_up = min(others, key=lambda n: others[n]["up_cpu"]) if others else None
    best_cpu_down = min(others, key=lambda n: others[n]["down_cpu"]) if others else None

    print("S3: %s shards x %s, %s run(s) each (median; peak RSS and LISTs: the most), gateway on %s, load %s"
          % (shards, size, iters, env.get("BS_STORE", "?"), env.get("BS_LOAD", "?")))
    if fio_w:
        print("machine: fio direct write %.0f MiB/s, read %.0f MiB/s (the OSD's disk)" % (fio_w, fio_r))
    print()
    print("| client | upload MiB/s | / best | CPU s/GiB | peak MiB | LISTs | download MiB/s | / best | CPU s/GiB "
          "| peak MiB | LISTs | gateway CPU s/GiB up, down |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in status:
        if name not in med:
            print("| %s | %s |  |  |  |  |  |  |  |  |  |  |" % (name, NOT.get(status[name], status[name])))
            continue
        m = med[name]
        print("| %s | %.0f | %.2f | %.2f | %.0f | %d | %.0f | %.2f | %.2f | %.0f | %d | %s |" % (
            name, m["up"], m["up"] / med[best_up]["up"] if best_up else 0, m["up_cpu"], m["up_rss"], m["up_lists"],
            m["down"], m["down"] / med[best_down]["down"] if best_down else 0, m["down_cpu"], m["down_rss"],
            m["down_lists"], "%.2f, %.2f" % (m["srv_up"], m["srv_down"]) if m["srv_up"] is not None
            else "%.2f both" % m["srv_both"] if m["srv_both"] is not None else ""))
    print()
    for name, m in med.items():
        print("%s runs: up %s MiB/s, down %s MiB/s" % (name, " ".join("%.0f" % x for x in m["up_all"]),
                                                       " ".join("%.0f" % x for x in m["down_all"])))
    flat = [l.split() for l in open(sys.argv[2]) if l.strip()]
    if flat:
        print()
        print("| shard | client | upload peak MiB | download peak MiB (ckpt: over its regions) |")
        print("|---|---|---:|---:|")
        for f in flat:
            if f[4] != "ok":
                print("| %s | %s | %s |  |" % (f[0], f[1], NOT.get(f[4], f[4])))
            else:
                print("| %s | %s | %s | %s |" % tuple(f[:4]))
    print()

    what = "%s x %s" % (shards, size)
    if best_up:
        row("S3 %s: upload, best other client (%s), MiB/s" % (what, best_up), round(med[best_up]["up"], 1), "%.0f")
        row("S3 %s: download, best other client (%s), MiB/s" % (what, best_down), round(med[best_down]["down"], 1), "%.0f")
        row("S3 %s: client CPU per GiB, least of the others, upload (%s), s" % (what, best_cpu_up),
            round(med[best_cpu_up]["up_cpu"], 3), "%.2f")
        row("S3 %s: client CPU per GiB, least of the others, download (%s), s" % (what, best_cpu_down),
            round(med[best_cpu_down]["down_cpu"], 3), "%.2f")
        if fio_w:
            row("S3 %s: best other client's upload / fio direct write" % what, round(med[best_up]["up"] / fio_w, 3), "%.2f")
            row("S3 %s: best other client's download / fio direct read" % what, round(med[best_down]["down"] / fio_r, 3), "%.2f")
    if "ckpt" in med and best_up:
        m = med["ckpt"]
        row("S3 %s: ckpt flush / best other client's upload" % what, round(m["up"] / med[best_up]["up"], 3), "%.2f", ">= 1.0")
        row("S3 %s: ckpt restore, checksums checked / best other client's download" % what,
            round(m["down"] / med[best_down]["down"], 3), "%.2f", ">= 1.0")
        row("S3 %s: ckpt client CPU per GiB / least of the others, upload" % what,
            round(m["up_cpu"] / med[best_cpu_up]["up_cpu"], 3), "%.2f", "<= 0.5")
        row("S3 %s: ckpt client CPU per GiB / least of the others, download" % what,
            round(m["down_cpu"] / med[best_cpu_down]["down_cpu"], 3), "%.2f", "<= 0.5")
        row("S3 %s: LIST requests of ckpt's save and restore" % what, int(m["up_lists"] + m["down_lists"]), "%d", "<= 0")
    ck = [f for f in flat if f[1] == "ckpt" and f[4] == "ok"]
    budget = env.get("BS_CKPT_MEM_MIB")
    if ck and budget:
        row("S3: ckpt flush peak RSS (the agent's), %s shard, MiB" % ck[-1][0], float(ck[-1][2]), "%.0f",
            "<= %s" % budget)
    if len(ck) >= 2:
        row("S3: ckpt flush peak RSS, %s shard / %s shard" % (ck[-1][0], ck[0][0]),
            round(float(ck[-1][2]) / float(ck[0][2]), 3), "%.2f", "<= 1.1")
        row("S3: ckpt restore peak RSS over its regions, %s shard / %s shard" % (ck[-1][0], ck[0][0]),
            round(float(ck[-1][3]) / float(ck[0][3]), 3), "%.2f", "<= 1.1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
