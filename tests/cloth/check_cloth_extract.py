"""Checks the cloth's Catalyst extract with ParaView's reader (run with pvpython).

usage: pvpython check_cloth_extract.py FILE.pvtu --vertices N --triangles M
The sheet's triangles are each written once, by the rank owning their lowest-id corner, with the
vertices they use: every triangle is there once, every vertex id 0..N-1 at least once (a vertex on
a rank boundary is in both ranks' pieces), and each vertex's copies agree.
"""
import argparse
import sys

import numpy as np
from paraview import servermanager
from paraview.simple import OpenDataFile
from paraview.vtk.util.numpy_support import vtk_to_numpy

parser = argparse.ArgumentParser()
parser.add_argument("file")
parser.add_argument("--vertices", type=int, required=True)
parser.add_argument("--triangles", type=int, required=True)
args = parser.parse_args()

reader = OpenDataFile(args.file)
if reader is None:
    sys.exit(f"FAIL: ParaView cannot open {args.file}")
data = servermanager.Fetch(reader)
problems = []
if data.GetNumberOfCells() != args.triangles:
    problems.append(f"{data.GetNumberOfCells()} triangles, expected {args.triangles}")
points = data.GetPointData()
for field in ("velocity", "energy_density", "strain_max", "strain_min", "mean_curvature",
              "gaussian_curvature", "id"):
    if points.GetArray(field) is None:
        problems.append(f"no point field '{field}'")
if not problems:
    ids = vtk_to_numpy(points.GetArray("id"))
    if not np.array_equal(np.unique(ids), np.arange(args.vertices)):
        problems.append(f"the vertex ids are not 0..{args.vertices - 1}")
    position = vtk_to_numpy(data.GetPoints().GetData())
    for i in np.unique(ids):
        copies = position[ids == i]
        if not np.all(copies == copies[0]):
            problems.append(f"vertex {i}: its copies on two ranks differ")
            break
print(f"{args.file}: {data.GetNumberOfPoints()} points, {data.GetNumberOfCells()} triangles")
for p in problems:
    print(f"FAIL: {p}")
sys.exit(1 if problems else 0)
