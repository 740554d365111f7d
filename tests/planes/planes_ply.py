"""The points of a planes_points.ply the planes workload writes (binary little-endian: float x y z,
three uchar colours, int plane), for the scripts that write the same scene in other formats."""
import sys

import numpy as np


def read_planes_ply(ply):
    """The points as an (n, 3) float64 array; exits naming the file if it is not such a PLY."""
    with open(ply, "rb") as f:
        data = f.read()
    end = data.index(b"end_header\n") + len(b"end_header\n")
    header = data[:end].decode()
    count = int(header.split("element vertex ")[1].split()[0])
    if "format binary_little_endian" not in header or "property int plane" not in header:
        sys.exit(f"{ply}: not a planes_points.ply of the planes workload")
    rows = np.frombuffer(data, dtype=np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"),
                                              ("rgb", "u1", 3), ("plane", "<i4")]),
                         count=count, offset=end)
    return np.stack([rows["x"], rows["y"], rows["z"]], axis=1).astype(np.float64)
