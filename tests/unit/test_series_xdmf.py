#!/usr/bin/env python3
"""Reads back what test_series_output wrote on RANKS ranks into DIR.

usage: test_series_xdmf.py DIR RANKS            h5py: every value, the XDMF as XML against the
                                                 datasets it names (shape, type, hyperslabs)
       pvpython test_series_xdmf.py DIR RANKS --paraview
                                                 ParaView's XDMF reader opens each series: steps,
                                                 points, cells, field ranges

The data (test_series_output.cpp): rank 1 holds nothing; otherwise rank r has 5 + 2r points, a
quad of 4 vertices and 2 triangles at z = r + step, and r + 1 bricks of 2+k x 3 x 2 points; every
value is a function of the global row g.
"""
import os
import shutil
import sys
import xml.etree.ElementTree as ET

STEPS = (1, 2)


def check(condition, message):
    print(("ok    " if condition else "FAIL  ") + message)
    if not condition:
        sys.exit(1)


def layout(ranks):
    points = [0 if r == 1 else 5 + 2 * r for r in range(ranks)]
    mesh_ranks = [r for r in range(ranks) if r != 1]
    bricks = []  # (rank, k, dims x y z)
    for r in range(ranks):
        if r != 1:
            bricks += [(r, k, (2 + k, 3, 2)) for k in range(r + 1)]
    return points, mesh_ranks, bricks


NUMBER_TYPES = {("Float", "4"): "float32", ("Float", "8"): "float64", ("Int", "4"): "int32",
                ("UInt", "4"): "uint32", ("Int", "8"): "int64", ("UChar", "1"): "uint8"}


def check_xmf(directory, xmf, expected_steps):
    import h5py
    tree = ET.parse(os.path.join(directory, xmf))  # raises on invalid XML
    root = tree.getroot()
    check(root.tag == "Xdmf" and root.get("Version") == "3.0", f"{xmf}: an Xdmf 3.0 document")
    series = root.find("Domain/Grid")
    check(series.get("CollectionType") == "Temporal", f"{xmf}: a temporal collection")
    steps = series.findall("Grid")
    times = [float(g.find("Time").get("Value")) for g in steps]
    check(times == [0.25 * s for s in expected_steps], f"{xmf}: times {times}")
    items = 0
    for item in root.iter("DataItem"):
        if item.get("Format") != "HDF":
            continue
        file_name, path = item.text.strip().split(":")
        with h5py.File(os.path.join(directory, file_name), "r") as f:
            check(path in f, f"{xmf}: {item.text.strip()} exists")
            d = f[path]
            dims = tuple(int(v) for v in item.get("Dimensions").split())
            check(dims == d.shape, f"{xmf}: {item.text.strip()} has shape {dims}")
            kind = NUMBER_TYPES[(item.get("NumberType"), item.get("Precision"))]
            check(kind == d.dtype.name, f"{xmf}: {item.text.strip()} holds {kind}")
        items += 1
    for slab in root.iter("DataItem"):
        if slab.get("ItemType") != "HyperSlab":
            continue
        selection, source = slab.findall("DataItem")
        values = [int(v) for v in selection.text.split()]
        rank = len(source.get("Dimensions").split())
        start, stride, count = values[:rank], values[rank:2 * rank], values[2 * rank:]
        shape = [int(v) for v in source.get("Dimensions").split()]
        inside = all(s + (c - 1) * st < n for s, st, c, n in zip(start, stride, count, shape))
        result = 1
        for v in slab.get("Dimensions").split():
            result *= int(v)
        total = 1
        for c in count:
            total *= c
        check(inside and result == total, f"{xmf}: hyperslab {values} inside {shape}, {result} values")
    check(items > 0, f"{xmf}: {items} HDF data items, all valid")


def check_values(directory, ranks):
    import h5py
    import numpy as np
    points, mesh_ranks, bricks = layout(ranks)
    for step in STEPS:
        with h5py.File(f"{directory}/points_{step:06d}.h5", "r") as f:
            g = np.arange(sum(points))
            check(f.attrs["kind"] == b"points" or f.attrs["kind"] == "points", "points: kind")
            check(np.array_equal(f["position"][...],
                                 np.stack([g, 2 * g, 3 * g + step], axis=1).astype(np.float32)),
                  f"points step {step}: {len(g)} positions in rank order")
            check(np.array_equal(f["id"][...], g) and np.array_equal(f["value"][...], 0.5 * g),
                  f"points step {step}: fields")
        with h5py.File(f"{directory}/mesh_{step:06d}.h5", "r") as f:
            tri = f["triangles"][...]
            expected = []
            for i, r in enumerate(mesh_ranks):
                expected += [[4 * i + 0, 4 * i + 1, 4 * i + 2], [4 * i + 1, 4 * i + 3, 4 * i + 2]]
            check(np.array_equal(tri, np.array(expected).reshape(-1, 3)),
                  f"mesh step {step}: {len(tri)} triangles in the global vertex numbering")
            pos = f["position"][...]
            check(pos.shape == (4 * len(mesh_ranks), 3) and
                  all(pos[4 * i, 2] == r + step for i, r in enumerate(mesh_ranks)),
                  f"mesh step {step}: vertices in rank order")
            check(np.array_equal(f["triangle_fields/owner"][...],
                                 np.repeat(mesh_ranks, 2).astype(np.int32)),
                  f"mesh step {step}: per-triangle field")
        with h5py.File(f"{directory}/bricks_{step:06d}.h5", "r") as f:
            dims = f["bricks/dims"][...]
            origin = f["bricks/origin"][...]
            first = f["bricks/first"][...]
            check([tuple(d) for d in dims] == [b[2] for b in bricks],
                  f"bricks step {step}: {len(dims)} bricks in rank order")
            check(all(tuple(o) == (10 * r + 3 * k, 0, step) for o, (r, k, _) in zip(origin, bricks)),
                  f"bricks step {step}: origins")
            rows = [d[0] * d[1] * d[2] for _, _, d in bricks]
            check(list(first) == list(np.cumsum([0] + rows)[:-1]), f"bricks step {step}: first rows")
            g = np.arange(sum(rows), dtype=np.float32)
            check(np.array_equal(f["phi"][...], g) and
                  np.array_equal(f["vel"][...], np.stack([g, -g, 2 * g], axis=1)),
                  f"bricks step {step}: fields")


def check_paraview(directory, ranks):
    from paraview import servermanager as sm
    from paraview.simple import XDMFReader
    points, mesh_ranks, bricks = layout(ranks)
    for name in ("points", "mesh", "bricks"):
        both = f"{directory}/{name}_both.xmf"
        shutil.copy(f"{directory}/{name}_both.xmf.txt", both)
        reader = XDMFReader(FileNames=[both])
        check(list(reader.TimestepValues) == [0.25, 0.5], f"ParaView {name}: two steps")
        reader.UpdatePipeline(0.5)
        data = sm.Fetch(reader)
        if name == "points":
            check(data.GetNumberOfPoints() == sum(points), f"ParaView points: {sum(points)} points")
            if sum(points):
                rng = data.GetPointData().GetArray("value").GetRange()
                check(rng == (0.0, 0.5 * (sum(points) - 1)), f"ParaView points: value range {rng}")
        elif name == "mesh":
            check(data.GetNumberOfPoints() == 4 * len(mesh_ranks) and
                  data.GetNumberOfCells() == 2 * len(mesh_ranks),
                  f"ParaView mesh: {4 * len(mesh_ranks)} vertices, {2 * len(mesh_ranks)} triangles")
            check(data.GetCellData().GetArray("owner") is not None, "ParaView mesh: cell field")
        else:
            check(data.GetNumberOfBlocks() == len(bricks), f"ParaView bricks: {len(bricks)} blocks")
            row = 0
            for i, (r, k, dims) in enumerate(bricks):
                block = data.GetBlock(i)
                n = dims[0] * dims[1] * dims[2]
                check(block.GetDimensions() == dims and
                      block.GetOrigin() == (10 * r + 3 * k, 0, 0.5 / 0.25) and
                      block.GetPointData().GetArray("phi").GetRange() == (row, row + n - 1),
                      f"ParaView brick {i}: dims {dims}, origin, values {row}..{row + n - 1}")
                row += n


def main():
    directory, ranks = sys.argv[1], int(sys.argv[2])
    if "--paraview" in sys.argv:
        check_paraview(directory, ranks)
        return 0
    check_values(directory, ranks)
    for name in ("points", "mesh", "bricks"):
        check_xmf(directory, f"{name}.xmf", (1, 3))  # resumed at step 1, then step 3 written
        check_xmf(directory, f"{name}_both.xmf.txt", STEPS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
