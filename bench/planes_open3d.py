#!/usr/bin/env python3
"""apron's plane detection (3D-KHT, issue 16) against Open3D on the same synthetic clouds: time
and per-point F1 against the scene's ground truth. Open3D's RANSAC (segment_plane, iterated:
the largest plane's inliers are taken out and the search repeated until a plane holds fewer than
the minimum) and, where the installed Open3D has it, RSPD (detect_planar_patches, Araujo &
Oliveira 2020; normals estimated first, their time included). The cloud and its ground truth
come from an apron run of the scene (planes_points_*.h5: position, truth); apron's own time is the
median of its repetitions after the first, from the run report.

  python3 bench/planes_open3d.py --apron build-omp/src/apron --scene room --points 1e6
"""
import argparse
import glob
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np


def f1_score(truth, labels, planes, truth_planes, diag):
    """planes: (normal, offset) per detected label; truth_planes: (normal, offset) per true plane."""
    match, taken = {}, set()
    order = sorted(range(len(planes)), key=lambda p: -int(np.sum(labels == p)))
    for p in order:
        n, d = planes[p]
        best, best_g = 1e300, -1
        for g, (tn, td) in enumerate(truth_planes):
            if g in taken:
                continue
            c = float(np.dot(n, tn))
            angle = math.degrees(math.acos(min(1.0, abs(c))))
            off = abs(d - (td if c >= 0 else -td))
            if angle > 5 or off > 0.02 * diag:
                continue
            score = angle / 5 + off / (0.02 * diag)
            if score < best:
                best, best_g = score, g
        if best_g >= 0:
            match[p] = best_g
            taken.add(best_g)
    mapped = np.full(len(labels), -2, dtype=np.int64)
    for p, g in match.items():
        mapped[labels == p] = g
    tp = int(np.sum((truth >= 0) & (mapped == truth)))
    labelled = int(np.sum(labels >= 0))
    on_planes = int(np.sum(truth >= 0))
    precision = tp / labelled if labelled else 0.0
    recall = tp / on_planes if on_planes else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1, len(match)


def ransac(o3d, points, distance, min_points):
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
    remaining = np.arange(len(points))
    labels = np.full(len(points), -1, dtype=np.int64)
    planes = []
    while len(remaining) >= min_points:
        model, inliers = cloud.segment_plane(distance_threshold=distance, ransac_n=3, num_iterations=1000)
        if len(inliers) < min_points:
            break
        a, b, c, d = model
        norm = math.sqrt(a * a + b * b + c * c)
        planes.append((np.array([a, b, c]) / norm, -d / norm))
        labels[remaining[inliers]] = len(planes) - 1
        keep = np.ones(len(remaining), dtype=bool)
        keep[inliers] = False
        remaining = remaining[keep]
        cloud = cloud.select_by_index(inliers, invert=True)
    return labels, planes


def rspd(o3d, points):
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
    cloud.estimate_normals(o3d.geometry.KDTreeSearchParamKNN(knn=30))
    boxes = cloud.detect_planar_patches(normal_variance_threshold_deg=60, coplanarity_deg=75,
                                        outlier_ratio=0.75, min_plane_edge_length=0, min_num_points=0,
                                        search_param=o3d.geometry.KDTreeSearchParamKNN(knn=30))
    labels = np.full(len(points), -1, dtype=np.int64)
    planes = []
    for box in boxes:
        n = np.asarray(box.R)[:, 2]
        idx = box.get_point_indices_within_bounding_box(cloud.points)
        sel = np.array(idx, dtype=np.int64)
        sel = sel[labels[sel] < 0]
        labels[sel] = len(planes)
        planes.append((n, float(np.dot(n, np.asarray(box.center)))))
    return labels, planes


def timed(repeat, f):
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = f()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times, result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--apron", required=True)
    ap.add_argument("--scene", default="room")
    ap.add_argument("--points", type=float, default=1e6)
    ap.add_argument("--noise", type=float, default=0.0005)
    ap.add_argument("--outliers", type=float, default=0.2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--grow-band", type=float, default=0)
    ap.add_argument("--json")
    args = ap.parse_args()
    out = tempfile.mkdtemp(prefix="planes_o3d_")
    cmd = [args.apron, "run", "inputs/planes_room.yaml", "--set", f"output.dir={out}",
           "--set", f"planes.input.scene={args.scene}", "--set", f"planes.input.points={int(args.points)}",
           "--set", f"planes.input.noise={args.noise}", "--set", f"planes.input.outliers={args.outliers}",
           "--set", f"planes.repeat={args.repeat + 1}", "--set", f"planes.grow_band={args.grow_band}"]
    subprocess.run(cmd, check=True, capture_output=True)
    with open(os.path.join(out, "run_report.json")) as f:
        report = json.load(f)

    def find(node):
        if isinstance(node, dict):
            if "ground_truth" in node:
                return node
            for v in node.values():
                r = find(v)
                if r:
                    return r
        return None

    planes = find(report)
    gt = planes["ground_truth"]
    reps = planes["stage_seconds_per_repetition"][1:]
    apron_s = statistics.median(r["total"] for r in reps)
    with h5py.File(sorted(glob.glob(os.path.join(out, "planes_points_*.h5")))[0]) as h5:
        points = np.asarray(h5["position"], dtype=np.float64).reshape(-1, 3)
        truth = np.asarray(h5["truth"]).reshape(-1).astype(np.int64)
    truth_planes = [(np.array(t["normal"]), t["offset"]) for t in gt["truth"]]
    diag = gt["scene_size"]
    min_points = planes["min_plane_points"]
    rows = [{"method": "apron 3D-KHT (OpenMP)", "seconds": apron_s, "precision": gt["precision"],
             "recall": gt["recall"], "f1": gt["f1"], "planes": len(planes["detected"]),
             "matched": len(planes["detected"]) - gt["unmatched_detected"]}]
    try:
        import open3d as o3d
    except ImportError:
        o3d = None
        print("open3d is not installed (pip install open3d): apron only")
    if o3d is not None:
        distance = 3 * args.noise * diag
        s, _, (labels, found) = timed(args.repeat, lambda: ransac(o3d, points, distance, min_points))
        p, r, f1, m = f1_score(truth, labels, found, truth_planes, diag)
        rows.append({"method": f"Open3D {o3d.__version__} segment_plane iterated (threshold {distance:.3g})",
                     "seconds": s, "precision": p, "recall": r, "f1": f1, "planes": len(found), "matched": m})
        if hasattr(o3d.geometry.PointCloud, "detect_planar_patches"):
            s, _, (labels, found) = timed(args.repeat, lambda: rspd(o3d, points))
            p, r, f1, m = f1_score(truth, labels, found, truth_planes, diag)
            rows.append({"method": f"Open3D {o3d.__version__} detect_planar_patches (RSPD)", "seconds": s,
                         "precision": p, "recall": r, "f1": f1, "planes": len(found), "matched": m})
    print(f"{args.scene}, {int(args.points)} points, noise {args.noise}, outliers {args.outliers}, "
          f"median of {args.repeat}:")
    for row in rows:
        print(f"  {row['method']:<62} {1e3 * row['seconds']:10.1f} ms  planes {row['planes']:3d} "
              f"(matched {row['matched']:3d})  P {row['precision']:.3f} R {row['recall']:.3f} F1 {row['f1']:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"scene": args.scene, "points": int(args.points), "noise": args.noise,
                       "outliers": args.outliers, "repeat": args.repeat, "command": " ".join(cmd),
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
