#!/usr/bin/env python3
"""Draws a job's timeline from `ckpt goodput --json`: per minute, where the
time went (useful work, checkpoint stalls, restores, steps done again,
downtime), stacked, and the cumulative goodput over it. `ckpt goodput
--plot FILE.png` runs this; it can also be run on a saved report:

    ckpt goodput --daemon ADDR --job J --json > g.json
    python3 tools/goodput/plot_timeline.py --in g.json --out goodput.png

Exit codes: 0 written, 1 bad input or write error, 3 matplotlib missing.
"""
import argparse
import json
import sys

KINDS = [("useful_s", "useful", "#2e7d32"), ("stall_s", "checkpoint stall", "#f9a825"),
         ("restore_s", "restore", "#1565c0"), ("recompute_s", "recomputed", "#ef6c00"),
         ("down_s", "down", "#c62828")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--in", dest="src", required=True, help="ckpt goodput --json output ('-' for stdin)")
    ap.add_argument("--out", required=True, help="PNG file to write")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"plot_timeline.py: matplotlib is not available to {sys.executable}: {e}", file=sys.stderr)
        return 3
    try:
        rep = json.load(sys.stdin if args.src == "-" else open(args.src))
        slices = rep["timeline"]
        width = float(rep["slice_seconds"])
        xs = [s["start_s"] / 60.0 for s in slices]
        series = [[float(s[k]) for s in slices] for k, _, _ in KINDS]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"plot_timeline.py: {args.src}: not a ckpt goodput report: {e}", file=sys.stderr)
        return 1
    fig, (ax, gx) = plt.subplots(2, 1, figsize=(10, 6), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    bottom = [0.0] * len(xs)
    for (k, label, color), ys in zip(KINDS, series):
        ax.bar(xs, ys, width=width / 60.0, bottom=bottom, align="edge", color=color, label=label)
        bottom = [b + y for b, y in zip(bottom, ys)]
    ax.set_ylabel("seconds per slice")
    wall = float(rep.get("wall_s", 0))
    span = f"{wall / 3600:.2f} h" if wall >= 3600 else f"{wall / 60:.1f} min" if wall >= 60 else f"{wall:.1f} s"
    ax.set_title(f"job {rep.get('job', '?')}: goodput {100 * rep.get('goodput', 0):.2f}% "
                 f"over {span}, {rep.get('failures', 0)} restarts")
    ax.legend(loc="lower left", fontsize="small", ncol=5)
    cum_useful = cum_all = 0.0
    gp = []
    for i in range(len(xs)):
        cum_useful += series[0][i]
        cum_all += sum(col[i] for col in series)
        gp.append(100 * cum_useful / cum_all if cum_all else 0)
    gx.plot([x + width / 120.0 for x in xs], gp, color="#2e7d32", marker="o" if len(xs) < 30 else None)
    gx.set_ylabel("goodput so far (%)")
    gx.set_xlabel("minutes since the job's first step")
    gx.set_ylim(min(gp + [100]) - 5 if gp else 0, 100.5)
    fig.tight_layout()
    try:
        fig.savefig(args.out, dpi=100)
    except OSError as e:
        print(f"plot_timeline.py: {args.out}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
