#!/usr/bin/env python3
"""Checks a settled SPH run in a tilted box tank given as a mesh (tests/sph/hydrostatic_rotated.yaml)
from its particle outputs alone, independently of the solver's own wall queries:
- at every output step, no fluid particle outside the tilted box (each position taken back to the
  box's frame by the case's rotation and offset, and compared with its faces), and in every
  diagnostics row the solver's own count of particles behind a wall is 0;
- at the last output, below the top fifth of the column: the pressure gradient fitted over the
  particles is rho0 g, and the pressure binned by depth d below the fitted free surface (2 dx
  bins of at least 20 particles) is rho0 g d, each within the tolerance.
Exit status 0 when all hold; the figures are printed either way."""
import argparse
import math
import sys

import h5py
import numpy as np

from sph_outputs import diagnostics_rows, rows_with_particles_outside, series_files


def rotation(degrees):
    """Rz Ry Rx, about x first: the placement apron applies to a mesh."""
    rx, ry, rz = (math.radians(a) for a in degrees)
    x = np.array([[1, 0, 0], [0, math.cos(rx), -math.sin(rx)], [0, math.sin(rx), math.cos(rx)]])
    y = np.array([[math.cos(ry), 0, math.sin(ry)], [0, 1, 0], [-math.sin(ry), 0, math.cos(ry)]])
    z = np.array([[math.cos(rz), -math.sin(rz), 0], [math.sin(rz), math.cos(rz), 0], [0, 0, 1]])
    return z @ y @ x


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("run", help="the run's output folder")
    p.add_argument("--box-lo", type=float, nargs=3, required=True, help="the box in its own frame")
    p.add_argument("--box-hi", type=float, nargs=3, required=True)
    p.add_argument("--rotation", type=float, nargs=3, required=True, help="degrees about x, y, z")
    p.add_argument("--offset", type=float, nargs=3, required=True)
    p.add_argument("--spacing", type=float, required=True)
    p.add_argument("--rho0", type=float, default=1000.0)
    p.add_argument("--g", type=float, default=9.81)
    p.add_argument("--tolerance", type=float, default=0.02)
    a = p.parse_args()

    r = rotation(a.rotation)
    lo, hi = np.array(a.box_lo), np.array(a.box_hi)
    files = series_files(a.run)
    if len(files) < 2:
        sys.exit("%s: fewer than 2 particle outputs" % a.run)
    ok = True
    for f in files:
        with h5py.File(f, "r") as h:
            x = h["position"][:]
        local = (x - np.array(a.offset)) @ r  # R^T (x - offset), row by row
        outside = np.sum(np.any((local < lo - 1e-6) | (local > hi + 1e-6), axis=1))
        print("%s: %d particles, %d outside the tilted box" % (f, len(x), outside))
        ok &= outside == 0
    rows = diagnostics_rows(a.run)
    behind = rows_with_particles_outside(rows)
    print("diagnostics rows: %d, with particles behind a wall: %d" % (len(rows), len(behind)))
    ok &= len(rows) > 0 and not behind

    with h5py.File(files[-1], "r") as h:
        x, pressure = h["position"][:], h["pressure"][:]
    z = x[:, 2]
    deep = z < z.max() - 0.2 * (z.max() - z.min())  # below the top fifth of the column
    slope, intercept = np.polyfit(z[deep], pressure[deep], 1)
    surface = -intercept / slope  # where the fitted pressure vanishes
    gradient = -slope / (a.rho0 * a.g)
    good = abs(gradient - 1) <= a.tolerance
    ok &= good
    print("dp/dz = %.4f rho0 g over %d particles; free surface at z = %.5f m%s"
          % (gradient, int(deep.sum()), surface, "" if good else "  <- off"))
    bins = {}
    for d, pr in zip(surface - z[deep], pressure[deep]):
        bins.setdefault(int(d / (2 * a.spacing)), []).append(pr / (a.rho0 * a.g * d))
    for b in sorted(bins):
        if len(bins[b]) < 20:
            continue  # the few particles of the tank's lowest corner
        ratio = float(np.mean(bins[b]))
        good = abs(ratio - 1) <= a.tolerance
        ok &= good
        print("depth %.4f m: p / (rho0 g d) = %.4f over %d particles%s"
              % ((b + 0.5) * 2 * a.spacing, ratio, len(bins[b]), "" if good else "  <- off"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
