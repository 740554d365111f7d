"""Reads what test_catalyst_blocks wrote with ParaView (run with pvpython).

usage: pvpython check_blocks.py DIR RANKS
"""
import os
import sys

from paraview import servermanager
from paraview.simple import OpenDataFile

folder, ranks = sys.argv[1], int(sys.argv[2])
expected = {  # file: (points, cells, a field that must be there)
    "points_000003.pvtp": (4 * ranks, 4 * ranks, "rank"),
    "grid_000003.pvti": (9 * (ranks + 1), 4 * ranks, "value"),
    "mesh_000003.pvtu": (4 * ranks, 2 * ranks, "area"),
}
problems = []
for name, (points, cells, field) in expected.items():
    reader = OpenDataFile(os.path.join(folder, name))
    data = servermanager.Fetch(reader) if reader else None
    if data is None:
        problems.append(f"ParaView cannot open {name}")
        continue
    got = (data.GetNumberOfPoints(), data.GetNumberOfCells())
    has = data.GetPointData().GetArray(field) or data.GetCellData().GetArray(field)
    print(f"{name}: {got[0]} points, {got[1]} cells, field {field}: {has is not None}")
    if got != (points, cells) or has is None:
        problems.append(f"{name}: {got} points/cells, expected {(points, cells)} and '{field}'")
if problems:
    sys.exit("FAIL: " + "; ".join(problems))
print("ok")
