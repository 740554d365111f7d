#!/usr/bin/env python3
"""LAS test files written by a reference writer, laspy, for test_point_cloud_reader's
LasFiles tests and the planes runs on a LAS file. Nothing is stored in the repository.

usage: write_las_files.py DIR
    DIR/v1.<m>_f<k>.las for every version 1.2 to 1.4 and every point format it defines (0-10 in
    1.4), 2000 points each with scale 0.001 and offsets far from the origin, and beside each
    DIR/v1.<m>_f<k>.xyz: the coordinates laspy reads back (X * scale + offset), %.17g;
    DIR/bad_<what>.las: malformed files (one fault each; the reader's message is checked);
    DIR/large.las: 100000 points, for the memory check;
    with a LAZ backend (lazrs), the same as LAZ: DIR/v1.<m>_f<k>.laz (points as in the .xyz),
    DIR/bad_<what>.laz (one fault each) and DIR/large.laz.
usage: write_las_files.py --from-ply IN.ply OUT.las
    the points of a binary little-endian PLY written by the planes workload (float x y z, three
    uchar colours, int plane) as LAS 1.4, point format 6, scale 1e-6 (finer than the PLY's
    floats), for the planes of a scene read as LAS against the same scene read as PLY; OUT.laz
    writes it compressed (LAZ, through lazrs)."""
import os
import struct
import sys

try:
    import laspy
    import numpy as np
    from planes_ply import read_planes_ply
except ImportError as e:  # CI installs it (scripts/install-deps.sh)
    sys.exit(f"write_las_files.py: {e}; install it: python3 -m pip install laspy numpy "
             "(scripts/install-deps.sh does)")

FORMATS = {2: range(0, 4), 3: range(0, 6), 4: range(0, 11)}


def write_points(path, xyz, version, point_format, scale, offset):
    header = laspy.LasHeader(point_format=point_format, version=version)
    header.scales = np.array([scale] * 3)
    header.offsets = np.array(offset)
    las = laspy.LasData(header)
    las.x, las.y, las.z = xyz[:, 0], xyz[:, 1], xyz[:, 2]
    las.write(path)
    return laspy.read(path)


def good_files(folder, laz):
    rng = np.random.default_rng(31)
    for minor, formats in FORMATS.items():
        for k in formats:
            xyz = rng.uniform([-50, -20, 0], [50, 20, 10], size=(2000, 3)) + [512000.0, 5.4e6, 300.0]
            back = write_points(f"{folder}/v1.{minor}_f{k}.las", xyz, f"1.{minor}", k, 0.001,
                                [512000.0, 5.4e6, 300.0])
            if laz:  # the same points compressed; laspy reads back the same coordinates
                back.write(f"{folder}/v1.{minor}_f{k}.laz")
            with open(f"{folder}/v1.{minor}_f{k}.xyz", "w") as f:
                for p in zip(back.x, back.y, back.z):
                    f.write("%.17g %.17g %.17g\n" % p)


def patched(folder, name, source, at, fmt, value):
    data = bytearray(open(source, "rb").read())
    struct.pack_into(fmt, data, at, value)
    open(f"{folder}/{name}", "wb").write(data)


def bad_files(folder):
    v12, v14 = f"{folder}/v1.2_f0.las", f"{folder}/v1.4_f6.las"
    data = open(v12, "rb").read()
    open(f"{folder}/bad_truncated.las", "wb").write(data[: len(data) - 25])
    open(f"{folder}/bad_header.las", "wb").write(data[:100])
    patched(folder, "bad_magic.las", v12, 0, "4s", b"LASX")
    patched(folder, "bad_version.las", v12, 25, "B", 9)
    patched(folder, "bad_format.las", v12, 104, "B", 11)
    patched(folder, "bad_compressed.las", v12, 104, "B", 0x80 | 3)
    patched(folder, "bad_record_length.las", v12, 105, "<H", 12)
    patched(folder, "bad_point_offset.las", v12, 96, "<I", 1 << 30)
    patched(folder, "bad_scale.las", v12, 139, "<d", 0.0)
    patched(folder, "bad_format_version.las", v14, 25, "B", 2)
    patched(folder, "bad_counts.las", v14, 107, "<I", 7)
    # max X (byte 179) below the points: a header that does not describe them
    header = laspy.read(v12).header
    patched(folder, "bad_bounds.las", v12, 179, "<d", float(header.maxs[0]) - 1.0)


def bad_laz_files(folder):
    v12, v14 = f"{folder}/v1.2_f0.laz", f"{folder}/v1.4_f6.laz"
    data = open(v14, "rb").read()
    point_offset = struct.unpack_from("<I", data, 96)[0]
    table = struct.unpack_from("<q", data, point_offset)[0]
    # the chunk table cut off, and the points too
    open(f"{folder}/bad_truncated.laz", "wb").write(data[: (point_offset + table) // 2])
    # a chunk table announcing four billion chunks for 2000 points
    patched(folder, "bad_chunks.laz", v14, table + 4, "<I", 0xFFFFFFF0)
    # the compressed bytes of the first chunk overwritten: the decoder reads nonsense
    bad = bytearray(data)
    bad[point_offset + 8 + 40: point_offset + 8 + 440] = bytes(range(256)) + bytes(range(144))
    open(f"{folder}/bad_payload.laz", "wb").write(bad)
    # LASzip's bit cleared: an uncompressed LAS named .laz
    patched(folder, "bad_not_compressed.laz", v12, 104, "B", 0)
    # the header's point count doubled: the points end before it is reached
    patched(folder, "bad_count.laz", v12, 107, "<I", 4000)


def large_file(folder, laz):
    rng = np.random.default_rng(7)
    las = write_points(f"{folder}/large.las", rng.uniform(0, 10, size=(100000, 3)), "1.2", 0, 0.001,
                       [0.0, 0.0, 0.0])
    if laz:
        las.write(f"{folder}/large.laz")


def from_ply(ply, out):
    xyz = read_planes_ply(ply)
    write_points(out, xyz, "1.4", 6, 1e-6, list(np.floor(xyz.min(axis=0))))


def laz_backend():
    """Whether laspy can write LAZ here (lazrs or laszip installed)."""
    return bool(laspy.LazBackend.detect_available())


def main(args):
    if len(args) == 3 and args[0] == "--from-ply":
        if args[2].endswith(".laz") and not laz_backend():
            sys.exit("write_las_files.py: no LAZ backend for laspy; install lazrs")
        from_ply(args[1], args[2])
        return 0
    if len(args) != 1:
        sys.exit(__doc__)
    os.makedirs(args[0], exist_ok=True)
    laz = laz_backend()
    if not laz:
        print("write_las_files.py: no LAZ backend for laspy: no .laz files (install lazrs: "
              "scripts/install-deps.sh does)")
    good_files(args[0], laz)
    bad_files(args[0])
    if laz:
        bad_laz_files(args[0])
    large_file(args[0], laz)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
