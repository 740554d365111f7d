#!/usr/bin/env python3
"""Checks the piston wave maker (inputs/wave_flume.yaml) from its diagnostics: every particle
stays (count, none behind a wall), the force the resting water exerts on the piston before it
starts is the hydrostatic rho g d^2 W / 2 on average (within the tolerance: the per-step wall
force of SPH is noisy, about 70% of its mean at 10 particles per depth), and while the piston
pushes the water (its first quarter period) the force on it is larger.

usage: check_wave_flume.py RUN_DIR --depth D --width W --start T0 --period T [--tolerance 0.2]"""
import argparse
import csv
import sys

import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("run")
    p.add_argument("--depth", type=float, required=True)
    p.add_argument("--width", type=float, required=True)
    p.add_argument("--start", type=float, required=True)
    p.add_argument("--period", type=float, required=True)
    p.add_argument("--rho0", type=float, default=1000.0)
    p.add_argument("--g", type=float, default=9.81)
    p.add_argument("--tolerance", type=float, default=0.2)
    a = p.parse_args()
    rows = list(csv.DictReader(open(a.run + "/diagnostics.csv")))
    t = np.array([float(r["time"]) for r in rows])
    fx = np.array([float(r["solid0_force_x"]) for r in rows])
    counts = {r["particles"] for r in rows}
    behind = sum(int(float(r["outside_tank"])) for r in rows)
    hydrostatic = -0.5 * a.rho0 * a.g * a.depth ** 2 * a.width  # on the piston, along x
    resting = fx[(t >= 0.5 * a.start) & (t < a.start)].mean()
    pushing = fx[(t >= a.start) & (t < a.start + a.period / 4)].mean()
    print("particles %s; behind a wall in any row: %d" % (sorted(counts), behind))
    print("force on the piston at rest: %.4f N (hydrostatic %.4f N, ratio %.3f); pushing: %.4f N"
          % (resting, hydrostatic, resting / hydrostatic, pushing))
    ok = len(counts) == 1 and behind == 0
    ok &= abs(resting / hydrostatic - 1) <= a.tolerance
    ok &= pushing < resting  # more negative: the water pushes back harder
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
