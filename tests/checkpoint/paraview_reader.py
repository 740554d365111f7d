"""Opens an apron particle series with ParaView's own XDMF reader (run with pvpython).

usage: pvpython paraview_reader.py SERIES.xmf PARTICLES STEPS
Checks that ParaView sees STEPS time steps, PARTICLES points in each, and every field apron
writes, with plausible densities.
"""
import sys

from paraview.simple import OpenDataFile

path, particles, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
reader = OpenDataFile(path)
if reader is None:
    sys.exit(f"FAIL: ParaView cannot open {path}")
times = list(reader.TimestepValues) if hasattr(reader.TimestepValues, "__len__") else [reader.TimestepValues]
print(f"{path}: {len(times)} time steps, {times[0]} .. {times[-1]} s")
failures = []
if len(times) != steps:
    failures.append(f"{len(times)} time steps, expected {steps}")
for t in (times[0], times[-1]):
    reader.UpdatePipeline(t)
    points = reader.GetDataInformation().GetNumberOfPoints()
    fields = sorted(reader.PointData.keys())
    print(f"t = {t}: {points} points, fields {fields}")
    if points != particles:
        failures.append(f"t = {t}: {points} points, expected {particles}")
    for name in ("velocity", "density", "pressure", "kind", "id"):
        if name not in fields:
            failures.append(f"t = {t}: no field '{name}'")
density = reader.PointData["density"].GetRange()  # of the last step (step 0 precedes any)
print(f"density range at the last step: {density}")
# Summation density is low at the free surface, never zero or far above rho0 in the bulk.
if not (0 < density[0] <= density[1] < 1100):
    failures.append(f"implausible densities {density}")
if failures:
    sys.exit("FAIL: " + "; ".join(failures))
print("ok: ParaView reads the whole series")
