#!/usr/bin/env python3
"""Plots goodput against GPU count, one line per strategy, from the --json
output of ckpt-sim (docs/goodput.md). ckpt-sim --plot runs this; it can also
be run on a saved report:

    ckpt-sim --json > report.json
    python3 tools/sim/plot_goodput.py --in report.json --out goodput.png

Exit codes: 0 written, 1 bad input or write error, 3 matplotlib missing.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--in", dest="src", required=True, help="ckpt-sim --json output ('-' for stdin)")
    ap.add_argument("--out", required=True, help="PNG file to write")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"plot_goodput.py: matplotlib is not available to {sys.executable}: {e}", file=sys.stderr)
        return 3
    try:
        if args.src == "-":
            report = json.load(sys.stdin)
        else:
            with open(args.src, encoding="utf-8") as f:
                report = json.load(f)
        rows = report["results"]
        model = report["model"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"plot_goodput.py: --in {args.src}: not a ckpt-sim report: {e}", file=sys.stderr)
        return 1

    # One line per strategy, in the order the report lists them.
    lines = {}
    for r in rows:
        lines.setdefault(r["strategy"], []).append(r)
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    markers = "os^dvP*X"
    for i, (name, pts) in enumerate(lines.items()):
        pts.sort(key=lambda r: r["gpus"])
        # Nudged apart on the log axis so that the min-max bars do not overlap.
        nudge = 2 ** ((i - (len(lines) - 1) / 2) * 0.04)
        x = [r["gpus"] * nudge for r in pts]
        y = [100 * r["goodput"]["mean"] for r in pts]
        lo = [100 * (r["goodput"]["mean"] - r["goodput"]["min"]) for r in pts]
        hi = [100 * (r["goodput"]["max"] - r["goodput"]["mean"]) for r in pts]
        ax.errorbar(x, y, yerr=[lo, hi], marker=markers[i % len(markers)], capsize=3, label=name)
    ax.set_xscale("log", base=2)
    gpus = sorted({r["gpus"] for r in rows})
    ax.set_xticks(gpus)
    ax.set_xticklabels([str(g) for g in gpus])
    ax.set_xlabel("GPUs")
    ax.set_ylabel("goodput (%), mean and min-max over runs")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower left")
    ax.set_title("Goodput by checkpoint strategy (ckpt-sim, %.0f h per run, %d runs, %.1f GiB state per GPU)"
                 % (model["hours"], model["runs"], model["state_per_gpu_bytes"] / 2**30), fontsize=9)
    fig.text(0.01, 0.01, "failures: " + model["mtbf_source"], fontsize=6, alpha=0.7)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    try:
        fig.savefig(args.out, format="png")
    except OSError as e:
        print(f"plot_goodput.py: --out {args.out}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
