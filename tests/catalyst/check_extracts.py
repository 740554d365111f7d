"""Checks what a Catalyst run wrote, with ParaView's own readers (run with pvpython).

usage: pvpython check_extracts.py DIR PATTERN --steps 0 10 20 --particles 4800 --ranks 2
                                  [--png PATTERN] [--fields velocity density ...] [--series X.pvd]
PATTERN is a file name with {step} (e.g. 'particles_{step:06d}.pvtp'). For every step the data
file must exist and hold every particle of every rank once (ids 0..N-1), every field, and ranks
0..R-1; files for other steps must not exist. With --png, the step's image must exist and not be
blank (its pixels vary).
"""
import argparse
import glob
import os
import re
import sys

import numpy as np
from paraview import servermanager
from paraview.simple import OpenDataFile
from paraview.vtk.util.numpy_support import vtk_to_numpy
from vtkmodules.vtkIOImage import vtkPNGReader

FIELDS = ["velocity", "density", "pressure", "kind", "id", "rank"]


def check_data(path, step, particles, ranks, fields):
    reader = OpenDataFile(path)
    if reader is None:
        return [f"ParaView cannot open {path}"]
    data = servermanager.Fetch(reader)
    problems = []
    if data.GetNumberOfPoints() != particles:
        problems.append(f"{path}: {data.GetNumberOfPoints()} points, expected {particles}")
    point_data = data.GetPointData()
    missing = [f for f in fields if point_data.GetArray(f) is None]
    if missing:
        return problems + [f"{path}: no field(s) {missing}"]
    ids = np.sort(vtk_to_numpy(point_data.GetArray("id")))
    if not np.array_equal(ids, np.arange(particles)):
        problems.append(f"{path}: the ids are not 0..{particles - 1} once each")
    seen_ranks = sorted(set(vtk_to_numpy(point_data.GetArray("rank")).tolist()))
    if seen_ranks != list(range(ranks)):
        problems.append(f"{path}: particles of ranks {seen_ranks}, expected 0..{ranks - 1}")
    if point_data.GetArray("velocity").GetNumberOfComponents() != 3:
        problems.append(f"{path}: velocity is not a 3-vector")
    summary = ""
    if "density" in fields:  # SPH's; densities are computed by the first step, not at step 0
        density = vtk_to_numpy(point_data.GetArray("density"))
        if step > 0 and not (density.min() > 0 and density.max() < 1100):
            problems.append(f"{path}: implausible densities {density.min()}..{density.max()}")
        summary = f", density {density.min():.1f}..{density.max():.1f}"
    print(f"{path}: {data.GetNumberOfPoints()} points, ranks {seen_ranks}{summary}")
    return problems


def check_png(path):
    if not os.path.exists(path):
        return [f"no image {path}"]
    reader = vtkPNGReader()
    reader.SetFileName(path)
    reader.Update()
    image = reader.GetOutput()
    pixels = vtk_to_numpy(image.GetPointData().GetScalars()).astype(float)
    variance = pixels.var()
    print(f"{path}: {image.GetDimensions()[:2]} pixels, variance {variance:.1f}")
    return [] if variance > 0 else [f"{path} is blank (every pixel alike)"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("pattern")
    p.add_argument("--steps", type=int, nargs="+", required=True)
    p.add_argument("--particles", type=int, required=True)
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--png")
    p.add_argument("--fields", nargs="+", default=FIELDS)
    p.add_argument("--series", help="a .pvd index in DIR that must list exactly these steps")
    args = p.parse_args()

    problems = []
    for step in args.steps:
        path = os.path.join(args.dir, args.pattern.format(step=step))
        if not os.path.exists(path):
            problems.append(f"no extract {path}")
            continue
        problems += check_data(path, step, args.particles, args.ranks, args.fields)
        if args.png:
            problems += check_png(os.path.join(args.dir, args.png.format(step=step)))
    # No extracts for steps that should have none.
    wildcard = re.sub(r"\{step[^}]*\}", "*", args.pattern)
    expected = {os.path.join(args.dir, args.pattern.format(step=s)) for s in args.steps}
    extra = sorted(set(glob.glob(os.path.join(args.dir, wildcard))) - expected)
    if extra:
        problems.append(f"extracts for steps not asked for: {extra}")
    if args.series:
        series = OpenDataFile(os.path.join(args.dir, args.series))
        times = list(series.TimestepValues) if series else []
        print(f"{args.series}: {len(times)} time steps {times}")
        if len(times) != len(args.steps):
            problems.append(f"{args.series}: {len(times)} time steps, expected {len(args.steps)}")
    if problems:
        sys.exit("FAIL:\n  " + "\n  ".join(problems))
    print(f"ok: {len(args.steps)} extracts of {args.particles} particles from {args.ranks} ranks")


main()
