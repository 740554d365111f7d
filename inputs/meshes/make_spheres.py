#!/usr/bin/env python3
"""Writes the small CI meshes of inputs/meshdist.yaml: a unit icosphere at two levels of
subdivision (the coarse one as OBJ, the fine one as binary PLY), so the case needs no shared data.
Run from this folder: python3 make_spheres.py"""
import math
import struct


def icosphere(levels):
    t = (1 + math.sqrt(5)) / 2
    verts = [(-1, t, 0), (1, t, 0), (-1, -t, 0), (1, -t, 0), (0, -1, t), (0, 1, t),
             (0, -1, -t), (0, 1, -t), (t, 0, -1), (t, 0, 1), (-t, 0, -1), (-t, 0, 1)]
    faces = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4),
             (11, 10, 2), (10, 7, 6), (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8),
             (3, 8, 9), (4, 9, 5), (2, 4, 11), (6, 2, 10), (8, 6, 7), (9, 8, 1)]
    verts = [tuple(c / math.sqrt(sum(x * x for x in v)) for c in v) for v in verts]
    for _ in range(levels):
        midpoint = {}

        def mid(i, j):
            key = (min(i, j), max(i, j))
            if key not in midpoint:
                m = [(a + b) / 2 for a, b in zip(verts[i], verts[j])]
                n = math.sqrt(sum(x * x for x in m))
                verts.append(tuple(x / n for x in m))
                midpoint[key] = len(verts) - 1
            return midpoint[key]

        new = []
        for a, b, c in faces:
            ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
            new += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        faces = new
    return verts, faces


def write_obj(path, verts, faces):
    with open(path, "w") as f:
        f.write("# unit icosphere\n")
        f.writelines("v %.9f %.9f %.9f\n" % v for v in verts)
        f.writelines("f %d %d %d\n" % (a + 1, b + 1, c + 1) for a, b, c in faces)


def write_ply(path, verts, faces):
    header = ("ply\nformat binary_little_endian 1.0\ncomment unit icosphere\n"
              "element vertex %d\nproperty float x\nproperty float y\nproperty float z\n"
              "element face %d\nproperty list uchar int vertex_indices\nend_header\n"
              % (len(verts), len(faces)))
    with open(path, "wb") as f:
        f.write(header.encode())
        for v in verts:
            f.write(struct.pack("<3f", *v))
        for face in faces:
            f.write(struct.pack("<B3i", 3, *face))


write_obj("sphere_coarse.obj", *icosphere(2))
write_ply("sphere_fine.ply", *icosphere(4))
