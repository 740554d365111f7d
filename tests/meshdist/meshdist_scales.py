#!/usr/bin/env python3
"""meshdist_scales.py --apron EXE --mesh SPHERE.obj --work DIR: one mesh pair at three scales.

Issue 19: float arithmetic in world units gave a Hausdorff distance several times too large for a
sphere scaled by 1e12 (exit 0), and refused the same sphere at 1e-9. The pair here is a unit
icosphere (a) and a copy 1.5 times larger, offset by (0.2, -0.1, 0.05) (b), scaled by 1e-9, 1 and
1e12 in the files apron reads. Checks, on one rank and on two:
  - vertex samples only: the Hausdorff distance and the mean distance of each direction equal a
    float64 brute force (numpy, exact point-triangle distances) to 1e-5 relative, at every scale;
  - with area samples too: every run report field that carries a length (Hausdorff, mean, RMS,
    sums, histogram bin width, grid cell, the maximum's sample and closest point, the frame) or
    an area (mean squared, sum of squares, mesh area) is the scale-1 value times the scale (or
    its square) to 1e-6 relative, and the counts (samples, histogram, argmax, triangle) are equal.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

SCALES = [1e-9, 1.0, 1e12]
OFFSET = np.array([0.2, -0.1, 0.05])
REFERENCE_TOLERANCE = 1e-5  # float32 distances in coordinates of order 1 (the frame)
SCALE_TOLERANCE = 1e-6  # the same pair at another scale: the same float coordinates


def read_obj(path):
    vertices, faces = [], []
    with open(path) as f:
        for line in f:
            p = line.split()
            if p and p[0] == "v":
                vertices.append([float(x) for x in p[1:4]])
            elif p and p[0] == "f":
                faces.append([int(x.split("/")[0]) - 1 for x in p[1:4]])
    return np.array(vertices), np.array(faces)


def write_obj(path, vertices, faces):
    with open(path, "w") as f:
        f.writelines("v %.17g %.17g %.17g\n" % tuple(v) for v in vertices)
        f.writelines("f %d %d %d\n" % tuple(t + 1) for t in faces)


def segment_distance(p, a, b):
    ab = b - a
    t = np.clip(np.einsum("ptk,ptk->pt", p - a, ab) / np.einsum("ptk,ptk->pt", ab, ab), 0, 1)
    return np.linalg.norm(p - (a + t[..., None] * ab), axis=-1)


def distances(points, vertices, faces):
    """Float64 distance from every point to the nearest triangle: the foot of the perpendicular
    where it lies inside the triangle, else the nearest point of its edges."""
    p = points[:, None, :]
    a, b, c = (np.broadcast_to(vertices[faces[:, k]][None], (len(points), len(faces), 3))
               for k in range(3))
    n = np.cross(b - a, c - a)
    foot = p - (np.einsum("ptk,ptk->pt", p - a, n) / np.einsum("ptk,ptk->pt", n, n))[..., None] * n
    v0, v1, v2 = b - a, c - a, foot - a
    d00, d01, d11 = (np.einsum("ptk,ptk->pt", x, y) for x, y in ((v0, v0), (v0, v1), (v1, v1)))
    d20, d21 = np.einsum("ptk,ptk->pt", v2, v0), np.einsum("ptk,ptk->pt", v2, v1)
    den = d00 * d11 - d01 * d01
    v, w = (d11 * d20 - d01 * d21) / den, (d00 * d21 - d01 * d20) / den
    inside = (v >= 0) & (w >= 0) & (v + w <= 1)
    edges = np.minimum(np.minimum(segment_distance(p, a, b), segment_distance(p, b, c)),
                       segment_distance(p, c, a))
    return np.where(inside, np.linalg.norm(p - foot, axis=-1), edges).min(axis=1)


failures = []


def check(ok, message):
    print(("ok    " if ok else "FAIL  ") + message)
    if not ok:
        failures.append(message)


def close(got, want, tolerance, floor=1e-300):
    return abs(got - want) <= tolerance * max(abs(want), floor)


def run(args, work, scale, area_samples, ranks):
    out = f"{work}/run_{ranks}_{area_samples}_{scale:g}"
    command = args.mpiexec.split() + ["-n", str(ranks)] if ranks > 1 else []
    command += [args.apron, "run", f"{work}/case.yaml",
                "--set", f"meshdist.a.file={work}/a_{scale:g}.obj",
                "--set", f"meshdist.b.file={work}/b_{scale:g}.obj",
                "--set", f"meshdist.sampling.count={area_samples}", "--set", f"output.dir={out}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    if done.returncode != 0:
        check(False, f"scale {scale:g}: apron exits {done.returncode}:\n{done.stdout}{done.stderr}")
        return None
    with open(f"{out}/run_report.json") as f:
        return json.load(f)["meshdist"]


# (where in the report, the power of the scale it carries); coordinates (power 0 here: they are
# compared to a float ulp of the frame's scale, as a coordinate 0 at scale 1 need not stay 0)
def scaled_fields(md):
    fields = [(("mesh_a", "area"), 2), (("mesh_b", "area"), 2), (("frame", "scale"), 1)]
    fields += [(("frame", "centre", k), 0) for k in range(3)]
    for name in md["directions"]:
        d = ("directions", name)
        fields += [(d + (key,), 1) for key in ("hausdorff", "mean", "rms", "sum")]
        fields += [(d + (key,), 2) for key in ("mean_squared", "sum_squares")]
        fields += [(d + ("histogram", "bin_width"), 1), (d + ("grid", "cell_size"), 1)]
        fields += [(d + (point, k), 0) for point in ("max_sample", "closest_point")
                   for k in range(3)]
    fields += [(("symmetric", key), 1) for key in ("hausdorff", "mean", "rms")]
    fields += [(("symmetric", "d_hw"), 2)]
    return fields


def exact_fields(md):
    return [("directions", name, key) for name in md["directions"]
            for key in ("samples", "area_samples", "max_sample_index", "closest_triangle",
                        "histogram")]


def at(md, path):
    for key in path:
        md = md[key]
    return md["counts"] if isinstance(md, dict) and "counts" in md else md


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--apron", required=True)
    p.add_argument("--mesh", required=True, help="the unit sphere (OBJ)")
    p.add_argument("--work", required=True)
    p.add_argument("--mpiexec", default="mpirun --oversubscribe")
    args = p.parse_args()
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    vertices, faces = read_obj(args.mesh)
    pair = {"a": vertices, "b": 1.5 * vertices + OFFSET}
    for scale in SCALES:
        for name, v in pair.items():
            write_obj(f"{work}/{name}_{scale:g}.obj", scale * v, faces)
    with open(f"{work}/case.yaml", "w") as f:
        f.write("workload: meshdist\nname: scales\nmeshdist:\n"
                "  a: {file: a.obj}\n  b: {file: b.obj}\n"
                "  sampling: {vertices: true, count: 0, seed: 5}\n"
                "  directions: both\n  search: grid\n  histogram_bins: 16\n"
                "output: {dir: out}\n")
    # The reference at scale 1 (numpy's float64 scales exactly enough: the test's 1e-5 is far
    # above float64's rounding).
    reference = {}
    for name, source, target in (("a_to_b", "a", "b"), ("b_to_a", "b", "a")):
        d = distances(pair[source], pair[target], faces)
        reference[name] = (d.max(), d.mean())
        print(f"reference {name}: Hausdorff {d.max():.9g}, mean {d.mean():.9g}")

    for ranks in (1, 2):
        for scale in SCALES:
            md = run(args, work, scale, 0, ranks)
            if md is None:
                continue
            for name, (hausdorff, mean) in reference.items():
                got = md["directions"][name]
                check(close(got["hausdorff"], scale * hausdorff, REFERENCE_TOLERANCE),
                      f"{ranks} rank(s), scale {scale:g}, {name}: Hausdorff {got['hausdorff']:.9g}"
                      f" = {scale * hausdorff:.9g} (numpy) to {REFERENCE_TOLERANCE:g}")
                check(close(got["mean"], scale * mean, REFERENCE_TOLERANCE),
                      f"{ranks} rank(s), scale {scale:g}, {name}: mean {got['mean']:.9g}"
                      f" = {scale * mean:.9g} (numpy) to {REFERENCE_TOLERANCE:g}")

        runs = {scale: run(args, work, scale, 4000, ranks) for scale in SCALES}
        base = runs[1.0]
        if base is None:
            continue
        for scale, md in runs.items():
            if md is None or scale == 1.0:
                continue
            extent = base["frame"]["scale"] * scale

            def scales_with(path, power):
                if power == 0:  # a coordinate
                    return close(at(md, path), at(base, path) * scale, SCALE_TOLERANCE, extent)
                return close(at(md, path), at(base, path) * scale**power, SCALE_TOLERANCE)

            bad = [f"{'.'.join(map(str, path))}: {at(md, path):.9g} vs {at(base, path):.9g} x "
                   f"{scale:g}^{max(power, 1)}" for path, power in scaled_fields(base)
                   if not scales_with(path, power)]
            bad += [f"{'.'.join(path)}: {at(md, path)} vs {at(base, path)}"
                    for path in exact_fields(base) if at(md, path) != at(base, path)]
            check(not bad, f"{ranks} rank(s), scale {scale:g}: {len(scaled_fields(base))} report "
                  f"fields scale with it to {SCALE_TOLERANCE:g}, counts equal"
                  + "".join("\n      " + b for b in bad))
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
