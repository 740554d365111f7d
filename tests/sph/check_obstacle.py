#!/usr/bin/env python3
"""Checks a dam break with a solid obstacle made of axis-aligned boxes (the L-shaped block of
inputs/meshes/l_block.stl is two: its foot and its upright) from the run's outputs alone: no fluid
particle inside any box at any output step, the solver's own count of particles behind a wall
zero in every diagnostics row, and the surge having reached the obstacle (else the check proves
nothing).

usage: check_obstacle.py RUN_DIR --box LO_X LO_Y LO_Z HI_X HI_Y HI_Z [--box ...]"""
import argparse
import sys

import h5py
import numpy as np

from sph_outputs import diagnostics_rows, rows_with_particles_outside, series_files


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("run")
    p.add_argument("--box", type=float, nargs=6, action="append", required=True)
    a = p.parse_args()
    boxes = [(np.array(b[:3]), np.array(b[3:])) for b in a.box]
    files = series_files(a.run)
    if len(files) < 2:
        sys.exit("%s: fewer than 2 particle outputs" % a.run)
    ok, reached = True, False
    obstacle_start = min(lo[0] for lo, _ in boxes)
    for f in files:
        with h5py.File(f, "r") as h:
            x = h["position"][:]
        inside = sum(int(np.sum(np.all((x > lo + 1e-7) & (x < hi - 1e-7), axis=1)))
                     for lo, hi in boxes)
        reached |= bool(np.any(x[:, 0] > obstacle_start))
        print("%s: %d particles, %d inside the obstacle" % (f, len(x), inside))
        ok &= inside == 0
    rows = diagnostics_rows(a.run)
    behind = rows_with_particles_outside(rows)
    print("diagnostics rows: %d, with particles behind a wall: %d" % (len(rows), len(behind)))
    if not reached:
        print("the fluid never reached the obstacle")
    sys.exit(0 if ok and not behind and reached else 1)


if __name__ == "__main__":
    main()
