#!/usr/bin/env python3
"""README.md's "How fast" section and its plot, from the JSON of
tools/bench/torch-vs-ckpt.py: ckpt beside torch.save, safetensors and DCP
on the same state, in the same run, with the machine's own limits (memcpy,
fio write and read of the same bytes).

Run by tools/bench-how-fast.sh (which runs the benchmark first); by hand:

  /usr/bin/python3 tools/bench/how-fast.py RESULT.json [--readme README.md]
      [--plot docs/how-fast.png] [--commit C] [--command "..."] [--machine M]

--readme replaces the part of the file between "<!-- how-fast:begin -->" and
"<!-- how-fast:end -->". Needs matplotlib for --plot (Debian's
python3-matplotlib, which tools/deps.sh installs).
"""
import argparse
import json
import os
import statistics
import sys

BEGIN, END = "<!-- how-fast:begin -->", "<!-- how-fast:end -->"

# The methods as torch-vs-ckpt.py names them, with the short name users know.
METHODS = [
    ("ckpt (Python, Checkpointer.save / restore in place)", "ckpt"),
    ("torch.save + fsync / torch.load", "torch.save / torch.load"),
    ("safetensors save_file + fsync / load_file", "safetensors"),
    ("dcp.save (FileSystemWriter) / dcp.load", "DCP save / load"),
    ("dcp.async_save, thread executor, DefaultStager", "DCP async_save (thread)"),
    ("dcp.async_save, process executor", "DCP async_save (process)"),
]


def size_text(b):
    return "%g GiB" % (b / 2.0**30) if b >= 2**30 else "%g MiB" % (b / 2.0**20)


def rows(r):
    out = []
    for key, short in METHODS:
        m = r["methods"].get(key)
        if m:
            out.append((short, m))
    return out


def section(r, a, plot_rel):
    fw = statistics.median(r["fio_write_s"])
    fr = statistics.median(r["fio_read_s"])
    mc = r["memcpy_s"]
    gib = r["bytes"] / 2.0**30
    lines = []
    lines.append("One state of %d float32 tensors, %s in all, saved and restored by each method in the same run "
                 "on the same disk (medians of %d; the page cache dropped before every restore). *Training waits* "
                 "is the time until the state may be changed again, *durable* until it is fsynced, *restore* "
                 "reading it back into tensors. Beside them, this machine's own limits in the same run: "
                 "a copy of the same bytes (memcpy) %.3f s, fio writing them %.3f s (%.2f GiB/s) and reading "
                 "them %.3f s (%.2f GiB/s)." % (r["tensors"], size_text(r["bytes"]), r["iters"], mc, fw, gib / fw,
                                                 fr, gib / fr))
    lines.append("")
    lines.append("| method | training waits | durable | restore |")
    lines.append("|---|---:|---:|---:|")
    for short, m in rows(r):
        name = "**ckpt**" if short == "ckpt" else short
        lines.append("| %s | %.3f s (%.1fx memcpy) | %.3f s (%.2f of fio write) | %.3f s (%.2f of fio read) |" % (
            name, m["modify_s"], m["modify_s"] / mc, m["durable_s"], fw / m["durable_s"], m["restore_s"],
            fr / m["restore_s"]))
    ck = dict(rows(r)).get("ckpt")
    if ck:
        others = [(s, m) for s, m in rows(r) if s != "ckpt"]
        if others:
            lines.append("")
            def than(key, sooner, later):
                best = min(others, key=lambda o: o[1][key])
                x = best[1][key] / ck[key]
                return "%.1fx %s than %s" % (x if x >= 1 else 1 / x, sooner if x >= 1 else later, best[0])
            lines.append("Against the fastest of the others on each figure: training goes on %s, the state is "
                         "durable %s, and restores %s." % (than("modify_s", "sooner", "later"),
                                                           than("durable_s", "sooner", "later"),
                                                           than("restore_s", "faster", "slower")))
    for k, v in sorted(r.get("failed", {}).items()):
        lines.append("")
        lines.append("%s did not run: %s" % (k, v))
    lines.append("")
    if plot_rel:
        lines.append("![ckpt against torch.save, safetensors and DCP](%s)" % plot_rel)
        lines.append("")
    lines.append("Measured at commit `%s`, %s, on %s; load average %s. torch %s. Absolute times depend on the "
                 "machine and its load; the ratios to its own limits in the same run are what carry over. "
                 "Regenerate (it rewrites this "
                 "section and the plot; about %d s here):" % (a.commit, a.date, a.machine, a.load,
                                                               r.get("torch", "?"), round(r.get("run_s", 0))))
    lines.append("")
    lines.append("```")
    lines.append(a.command)
    lines.append("```")
    lines.append("")
    lines.append("Figures against each machine limit, and every other benchmark: `docs/benchmarks.md`.")
    return "\n".join(lines)


def plot(r, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rs = rows(r)
    names = [s for s, _ in rs]
    figs = [("training waits", "modify_s", r["memcpy_s"], "memcpy"),
            ("durable (fsynced)", "durable_s", statistics.median(r["fio_write_s"]), "fio write"),
            ("restore", "restore_s", statistics.median(r["fio_read_s"]), "fio read")]
    fig, axes = plt.subplots(1, 3, figsize=(12, 0.45 * len(names) + 1.6), sharey=True)
    for ax, (label, key, limit, lname) in zip(axes, figs):
        vals = [m[key] for _, m in rs]
        colors = ["#1f77b4" if s == "ckpt" else "#b0b0b0" for s in names]
        ax.barh(range(len(names)), vals, color=colors)
        ax.axvline(limit, color="#d62728", linestyle="--", linewidth=1)
        ax.text(limit, len(names) - 0.4, " " + lname, color="#d62728", fontsize=8, va="bottom")
        ax.set_title(label + " (s)", fontsize=10)
        # One method far slower than the rest (DCP's process executor)
        # would flatten the others: its bar is cut, its value still written.
        srt = sorted(vals + [limit])
        cap = srt[-1] * 1.25
        if len(srt) > 2 and srt[-1] > 3 * srt[-2]:
            cap = srt[-2] * 1.8
        ax.set_xlim(0, cap)
        for i, v in enumerate(vals):
            ax.text(min(v, cap * 0.8), i, " %.2f%s" % (v, " (cut)" if v > cap else ""), va="center", fontsize=8)
    axes[0].set_yticks(range(len(names)))
    axes[0].set_yticklabels(names, fontsize=9)
    axes[0].invert_yaxis()
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("result")
    ap.add_argument("--readme")
    ap.add_argument("--plot")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--date", default="")
    ap.add_argument("--machine", default="this machine")
    ap.add_argument("--load", default="?")
    ap.add_argument("--command", default="tools/bench-how-fast.sh")
    a = ap.parse_args()
    r = json.load(open(a.result))
    if not rows(r):
        sys.exit("how-fast.py: %s holds no method's figures" % a.result)
    plot_rel = None
    if a.plot:
        title = "%s of float32 tensors, one disk, one run (commit %s); lower is better" % (
            size_text(r["bytes"]), a.commit[:7])
        plot(r, a.plot, title)
        if a.readme:
            plot_rel = os.path.relpath(os.path.abspath(a.plot), os.path.dirname(os.path.abspath(a.readme)))
    text = section(r, a, plot_rel)
    if a.readme:
        lines = open(a.readme).read().split("\n")
        if BEGIN not in lines or END not in lines or lines.index(END) < lines.index(BEGIN):
            sys.exit("how-fast.py: %s has no '%s' ... '%s' lines" % (a.readme, BEGIN, END))
        b, e = lines.index(BEGIN), lines.index(END)
        open(a.readme, "w").write("\n".join(lines[:b + 1] + text.split("\n") + lines[e:]))
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
