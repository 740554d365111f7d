#!/usr/bin/env python3
"""Plot dam-break surge front Z = x/a vs T = t*sqrt(2g/a) against experiment.

Usage:
  plot_dam_break.py DIAG.csv [MORE.csv ...] -o surge_front.png
      [--a A] [--g 9.81] [--labels L1 L2 ...] [--svg] [--t-shift 0]

Each DIAG.csv needs columns `time` [s] and `surge_front` [m, from the left
inner wall]; without --a, the column width comes from its '# a=' comment.
Writes a PNG; also an SVG when -o ends in .svg or --svg is given.
"""
import argparse
import os
import sys

import matplotlib
matplotlib.use("Agg")  # headless: CI and cluster nodes have no display
import matplotlib.pyplot as plt

from surge_front import (EXP_CSV, dimensionless, load_experiment,
                         read_diagnostics, surge_front_error)

EXP_STYLE = {"martin_moyce_1952": ("o", "Martin & Moyce (1952), exp."),
             "koshizuka_oka_1996": ("s", "Koshizuka & Oka (1996), exp.")}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("diags", nargs="+", metavar="DIAGNOSTICS.csv")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--a", type=float, help="column width [m] (default: '# a=' in each CSV)")
    p.add_argument("--g", type=float, default=9.81)
    p.add_argument("--labels", nargs="+")
    p.add_argument("--svg", action="store_true", help="also write an SVG")
    p.add_argument("--t-shift", type=float, default=0.0,
                   help="added to simulated T (gate-release correction)")
    p.add_argument("--exp", default=EXP_CSV, help="experimental CSV")
    args = p.parse_args(argv)
    if args.labels and len(args.labels) != len(args.diags):
        p.error("--labels needs one label per diagnostics file")
    labels = args.labels or [os.path.splitext(os.path.basename(d))[0]
                             for d in args.diags]

    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    zmax = 0.0
    for path, label in zip(args.diags, labels):
        times, fronts, a_file = read_diagnostics(path)
        a = args.a or a_file
        if not a:
            p.error(f"{path}: no '# a=' comment; pass --a")
        T, Z = dimensionless(times, fronts, a, args.g, args.t_shift)
        ax.plot(T, Z, "-", lw=1.5, label=label)
        zmax = max([zmax] + Z)
        # Report the gate metric too, so the plot and the pass/fail agree.
        for src in EXP_STYLE:
            try:
                err, _ = surge_front_error(path, a, args.g, source=src,
                                           exp_csv=args.exp, t_shift=args.t_shift)
                print(f"{label}: max rel. error vs {src} (1<=T<=2.5) = {err:.3f}")
            except ValueError as e:
                print(f"{label}: vs {src}: n/a ({e})")

    for src, pts in load_experiment(args.exp).items():
        marker, name = EXP_STYLE.get(src, ("^", src))
        ax.plot([t for t, _ in pts], [z for _, z in pts], marker, ls="none",
                mfc="none", mec="k", label=name)

    ax.set_xlabel(r"$T = t\,\sqrt{2g/a}$")
    ax.set_ylabel(r"$Z = x/a$")
    ax.set_title("Dam break: surge-front position")
    ax.set_xlim(left=0.0)
    ax.set_ylim(1.0, max(4.0, zmax * 1.05))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()

    base, ext = os.path.splitext(args.output)
    outs = [base + ".png"]
    if ext.lower() == ".svg" or args.svg:
        outs.append(base + ".svg")
    for out in outs:
        fig.savefig(out, dpi=150)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
