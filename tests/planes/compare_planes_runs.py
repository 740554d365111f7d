#!/usr/bin/env python3
"""The same planes from runs on different rank counts (issue 16): planes.csv of each run folder
against the first's: the same count, and each plane matched by one with a normal within 0.5
degree and an offset within 1% of the scene's diagonal (read from the run report). Each folder's
visual output is checked too (unless --planes-only: runs with planes.point_output false): the
per-point HDF5 holds every point once with a plane label in range, the XDMF files name their HDF5
files, the PLY declares every point.

usage: compare_planes_runs.py [--planes-only] REFERENCE_DIR OTHER_DIR [...]"""
import csv
import json
import math
import sys


def planes(folder):
    with open(f"{folder}/planes.csv") as f:
        return [({k: float(v) for k, v in row.items()}) for row in csv.DictReader(f)]


def objects_with(folder, key):
    """Every object of the folder's run report that holds `key`, depth first."""
    with open(f"{folder}/run_report.json") as f:
        report = json.load(f)
    found = []

    def walk(node):
        if isinstance(node, dict):
            if key in node:
                found.append(node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(report)
    return found


def scene_size(folder):
    found = objects_with(folder, "ground_truth")
    return found[0]["ground_truth"]["scene_size"] if found else 1.0


def check_outputs(folder, plane_count):
    import glob
    import h5py
    import numpy as np
    problems = []
    total = [node["points"] for node in objects_with(folder, "min_plane_points")]
    files = sorted(glob.glob(f"{folder}/planes_points_*.h5"))
    if not files:
        return [f"{folder}: no planes_points_*.h5"]
    with h5py.File(files[0]) as h5:
        labels = np.asarray(h5["plane"]).reshape(-1)
        index = np.asarray(h5["index"]).reshape(-1)
        if len(labels) != total[0] or len(np.unique(index)) != total[0]:
            problems.append(f"{files[0]}: {len(labels)} labels, {len(np.unique(index))} distinct "
                            f"indices for {total[0]} points")
        if labels.max(initial=-1) >= plane_count or labels.min(initial=-1) < -1:
            problems.append(f"{files[0]}: plane labels outside [-1, {plane_count})")
    for xmf in ("planes_points.xmf", "planes_rectangles.xmf"):
        with open(f"{folder}/{xmf}") as f:
            if ".h5:" not in f.read():
                problems.append(f"{folder}/{xmf}: names no HDF5 dataset")
    with open(f"{folder}/planes_points.ply", "rb") as f:
        if f"element vertex {total[0]}\n".encode() not in f.read(400):
            problems.append(f"{folder}/planes_points.ply: the header does not declare {total[0]} points")
    return problems


def main(args):
    planes_only = "--planes-only" in args
    folders = [a for a in args if a != "--planes-only"]
    reference = planes(folders[0])
    problems = []
    for folder in folders if not planes_only else []:
        problems += check_outputs(folder, len(planes(folder)))
    for p in problems:
        print(p)
    size = scene_size(folders[0])
    failed = False
    for folder in folders[1:]:
        other = planes(folder)
        if len(other) != len(reference):
            print(f"{folder}: {len(other)} planes, {folders[0]}: {len(reference)}")
            failed = True
            continue
        worst = 0.0
        for p in reference:
            best = 180.0
            for q in other:
                c = p["nx"] * q["nx"] + p["ny"] * q["ny"] + p["nz"] * q["nz"]
                offset = q["offset"] if c >= 0 else -q["offset"]
                if abs(p["offset"] - offset) > 0.01 * size:
                    continue
                best = min(best, math.degrees(math.acos(min(1.0, abs(c)))))
            worst = max(worst, best)
        print(f"{folder}: {len(other)} planes, largest normal difference {worst:.4f} deg")
        failed = failed or worst > 0.5
    return 1 if failed or problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
