#!/usr/bin/env python3
"""Checks the piston wave maker (inputs/wave_flume.yaml) from its diagnostics: every particle
stays (count, none behind a wall), the force the resting water exerts on the piston before it
starts is the hydrostatic rho g d^2 W / 2 on average (within the tolerance: the per-step wall
force of SPH is noisy, about 70% of its mean at 10 particles per depth), and while the piston
pushes the water (its first quarter period) the force on it is larger.

With --gauge X Y --spacing DX, the wave gauge (gauge0_elevation) too: before the piston starts
it reads the depth within one spacing, and its last row equals the surface the last particles
output gives (the highest particle within one spacing of the vertical through (X, Y), plus half
a spacing), computed here from the file.

usage: check_wave_flume.py RUN_DIR --depth D --width W --start T0 --period T [--tolerance 0.2]
                           [--gauge X Y --spacing DX]"""
import argparse
import csv
import sys

import h5py

import numpy as np

from sph_outputs import series_files


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
    p.add_argument("--gauge", type=float, nargs=2)
    p.add_argument("--spacing", type=float)
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
    if a.gauge:
        ok &= check_gauge(a, rows, t)
    sys.exit(0 if ok else 1)


def check_gauge(a, rows, t):
    level = np.array([float(r["gauge0_elevation"]) for r in rows])
    still = np.abs(level[t < a.start] - a.depth).max()
    last = series_files(a.run)[-1]  # this run's, not a file an earlier run left in the folder
    with h5py.File(last, "r") as f:
        x = f["position"][...]
    near = (x[:, 0] - a.gauge[0]) ** 2 + (x[:, 1] - a.gauge[1]) ** 2 <= np.float32(a.spacing) ** 2
    expected = x[near, 2].max() + 0.5 * a.spacing
    print("gauge at (%g, %g): depth at rest within %.4f m (spacing %g); at t = %.4f s %.6f m, "
          "from %s %.6f m" % (*a.gauge, still, a.spacing, t[-1], level[-1], last, expected))
    return still <= a.spacing and abs(level[-1] - expected) < 1e-6


if __name__ == "__main__":
    main()
