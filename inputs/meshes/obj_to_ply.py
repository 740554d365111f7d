#!/usr/bin/env python3
"""obj_to_ply.py IN.obj OUT.ply [COMMENT...]: a triangle OBJ (v and f lines) as binary little-endian
PLY with float64 vertices, so that the numbers read are those of the OBJ text exactly. Used once to
ship the Stanford bunny pair with the repository (inputs/meshes/README.md)."""
import struct
import sys


def main(src, dst, comments):
    vertices, faces = [], []
    for line in open(src):
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "v":
            vertices.append(tuple(float(x) for x in parts[1:4]))
        elif parts[0] == "f":
            faces.append([int(p.split("/")[0]) - 1 for p in parts[1:]])
    header = ["ply", "format binary_little_endian 1.0"]
    header += [f"comment {c}" for c in comments]
    header += [f"element vertex {len(vertices)}", "property double x", "property double y",
               "property double z", f"element face {len(faces)}",
               "property list uchar int vertex_indices", "end_header"]
    with open(dst, "wb") as out:
        out.write(("\n".join(header) + "\n").encode())
        for v in vertices:
            out.write(struct.pack("<3d", *v))
        for f in faces:
            out.write(struct.pack("<B", len(f)) + struct.pack(f"<{len(f)}i", *f))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
