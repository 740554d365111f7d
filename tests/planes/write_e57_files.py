#!/usr/bin/env python3
"""E57 test files written by a reference writer, pye57 (libE57Format's Python binding), for
test_point_cloud_reader's E57Files tests and the planes runs on an E57 file. Nothing is stored in
the repository.

usage: write_e57_files.py DIR
    DIR/one_scan.e57: 3000 points far from the origin (pye57 stores float32 coordinates);
    DIR/two_scans.e57: two scans of 1500 and 2500 points, the second under a pose (a rotation of
    30 degrees about z and a translation), and 100 of the first marked invalid;
    beside each DIR/<name>.xyz: the points pye57 reads back in the file's frame (read_scan with
    its transform; the invalid ones left out), %.17g;
    DIR/bad_<what>.e57: malformed files (one fault each; the reader's message is checked);
    DIR/large.e57: 100000 points, for the memory check.
usage: write_e57_files.py --from-ply IN.ply OUT.e57
    the points of a binary little-endian PLY written by the planes workload (float x y z, three
    uchar colours, int plane) as one E57 scan (float32, the PLY's own precision), for the planes of
    a scene read as E57 against the same scene read as PLY."""
import os
import struct
import sys

try:
    import numpy as np
    from planes_ply import read_planes_ply
    import pye57
except ImportError as e:  # CI installs it (scripts/install-deps.sh)
    sys.exit(f"write_e57_files.py: {e}; install it: python3 -m pip install pye57 numpy "
             "(scripts/install-deps.sh does)")


def write_scans(path, scans):
    """scans: a list of (xyz, invalid or None, rotation (w, x, y, z) or None, translation or None)."""
    if os.path.exists(path):
        os.remove(path)
    e57 = pye57.E57(path, mode="w")
    for xyz, invalid, rotation, translation in scans:
        data = {"cartesianX": xyz[:, 0].copy(), "cartesianY": xyz[:, 1].copy(),
                "cartesianZ": xyz[:, 2].copy()}
        if invalid is not None:
            data["cartesianInvalidState"] = invalid.astype(np.int8)
        e57.write_scan_raw(data, rotation=rotation, translation=translation)
    e57.close()


def expected_points(path, out):
    e57 = pye57.E57(path)
    with open(out, "w") as f:
        for i in range(e57.scan_count):
            # read_scan leaves out the points marked invalid and applies the scan's pose
            moved = e57.read_scan(i, ignore_missing_fields=True, transform=True)
            for p in zip(moved["cartesianX"], moved["cartesianY"], moved["cartesianZ"]):
                f.write("%.17g %.17g %.17g\n" % p)
    e57.close()


def good_files(folder):
    rng = np.random.default_rng(57)
    far = np.array([512000.0, 5.4e6, 300.0])
    one = rng.uniform([-50, -20, 0], [50, 20, 10], size=(3000, 3)) + far
    write_scans(f"{folder}/one_scan.e57", [(one, None, None, None)])
    expected_points(f"{folder}/one_scan.e57", f"{folder}/one_scan.xyz")
    a = rng.uniform(0, 10, size=(1500, 3))
    b = rng.uniform(-5, 5, size=(2500, 3))
    invalid = np.zeros(1500, np.int8)
    invalid[rng.choice(1500, 100, replace=False)] = 2
    half = np.radians(30.0) / 2
    write_scans(f"{folder}/two_scans.e57",
                [(a, invalid, None, None),
                 (b, None, np.array([np.cos(half), 0, 0, np.sin(half)]), np.array([3.0, -2.0, 1.5]))])
    expected_points(f"{folder}/two_scans.e57", f"{folder}/two_scans.xyz")


def patched(folder, name, source, at, fmt, value):
    data = bytearray(open(source, "rb").read())
    struct.pack_into(fmt, data, at, value)
    open(f"{folder}/{name}", "wb").write(data)


def bad_files(folder):
    good = f"{folder}/one_scan.e57"
    data = open(good, "rb").read()
    open(f"{folder}/bad_truncated.e57", "wb").write(data[: len(data) // 2])
    open(f"{folder}/bad_header.e57", "wb").write(data[:30])
    patched(folder, "bad_magic.e57", good, 0, "8s", b"ASTM-E58")
    patched(folder, "bad_length.e57", good, 16, "<Q", len(data) + 1024)
    patched(folder, "bad_xml_offset.e57", good, 24, "<Q", len(data) * 4)
    # a byte of the binary section flipped: its page's checksum fails
    bad = bytearray(data)
    bad[2000] ^= 0x5A
    open(f"{folder}/bad_checksum.e57", "wb").write(bad)


def large_file(folder):
    rng = np.random.default_rng(7)
    write_scans(f"{folder}/large.e57", [(rng.uniform(0, 10, size=(100000, 3)), None, None, None)])


def from_ply(ply, out):
    xyz = read_planes_ply(ply)
    write_scans(out, [(xyz, None, None, None)])


def main(args):
    if len(args) == 3 and args[0] == "--from-ply":
        from_ply(args[1], args[2])
        return 0
    if len(args) != 1:
        sys.exit(__doc__)
    os.makedirs(args[0], exist_ok=True)
    good_files(args[0])
    bad_files(args[0])
    large_file(args[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
