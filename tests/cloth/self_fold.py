#!/usr/bin/env python3
"""The cloth's self-collision on inputs/cloth_self_fold.yaml, checked from the run's own output by
brute force written here (numpy over every pair of the sheet, not the solver's broad phase).

usage: self_fold.py SCENARIO --apron EXE --case CASE.yaml --work DIR [--mpiexec "mpirun ..."]

  fold     2 ranks, self-collision on: at every output step no two non-adjacent triangles
           intersect (an edge of one crossing the other), every non-adjacent vertex-triangle and
           edge-edge pair is at least 0.9 x cloth.thickness apart, the layers do meet (pairs within
           1.5 x the thickness), and the total energy (diagnostics.csv, the contact's included)
           never rises by more than 1% of its start from one output to the next. Then the control:
           the same case with self-collision off does intersect (so the checks can fail). And the
           guarantee alone: with a repulsion 500x too soft to stop the halves, the displacement
           bound still keeps every pair at least cloth.self_collision.hard_gap x the thickness
           apart, without an intersection.
  implicit the fold stepped implicitly (1 ms, 4.3 x the explicit limit; the repulsion and the rod
           inside each solve) passes the fold's checks on 2 ranks, and ends on 1 rank on the same
           bits.
  ranks    the sheet at 12 x 6 cells on 1, 2 and 4 ranks, into its first contacts: the same
           positions and velocities bit for bit (the checkpoints' float64); and a run checkpointed
           on 4 ranks while in contact and continued on 1 and on 2 ends on the same bits.
"""
import argparse
import csv
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what)
    if not condition:
        sys.exit(1)


def run(args, ranks, out_dir, *extra):
    command = args.mpiexec.split() + ["-n", str(ranks), args.apron, "run", args.case,
                                      "--set", f"output.dir={out_dir}",
                                      "--set", "output.progress_every=100000", *extra]
    done = subprocess.run(command, env=dict(os.environ, OMP_NUM_THREADS="1"),
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"FAIL: exit status {done.returncode}:\n{done.stdout}{done.stderr}")
    return out_dir


def thickness_of(case):
    with open(case) as f:
        for line in f:
            if line.strip().startswith("thickness:"):
                return float(line.split(":")[1].split("#")[0])
    sys.exit("no cloth.thickness in the case")


# ---- the sheet as written -----------------------------------------------------------------------

def outputs(out_dir):
    """(file, positions by vertex id, triangles by vertex id) of every mesh output, in order."""
    for name in sorted(f for f in os.listdir(out_dir) if f.startswith("cloth_") and f.endswith(".h5")):
        with h5py.File(f"{out_dir}/{name}", "r") as f:
            ids, position, triangles = f["id"][...], f["position"][...], f["triangles"][...]
        x = np.zeros((ids.max() + 1, 3))
        x[ids] = position  # a vertex written by two ranks holds the same values in both
        yield name, x, np.sort(ids[triangles], axis=1)


def sheet_edges(triangles):
    edges = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [0, 2]]])
    return np.unique(np.sort(edges, axis=1), axis=0)


def non_adjacent(a, b):
    """Rows of index arrays a (n, i) and b (n, j) that share no vertex."""
    return ~np.any(a[:, :, None] == b[:, None, :], axis=(1, 2))


def box_gap(lo_a, hi_a, lo_b, hi_b):
    return np.linalg.norm(np.maximum(0, np.maximum(lo_a - hi_b, lo_b - hi_a)), axis=-1)


def close_pairs(x, a, b, reach):
    """Index pairs (i, j) of primitives a[i], b[j] (vertex index arrays) whose bounding boxes come
    within `reach` and that share no vertex."""
    pa, pb = x[a], x[b]
    lo_a, hi_a, lo_b, hi_b = pa.min(1), pa.max(1), pb.min(1), pb.max(1)
    i, j = [], []
    for start in range(0, len(a), 256):
        gap = box_gap(lo_a[start:start + 256, None], hi_a[start:start + 256, None], lo_b[None], hi_b[None])
        ii, jj = np.nonzero(gap <= reach)
        i.append(ii + start)
        j.append(jj)
    i, j = np.concatenate(i), np.concatenate(j)
    keep = non_adjacent(a[i], b[j])
    return i[keep], j[keep]


# ---- distances by construction: a plane's projection, else the nearest side ---------------------

def point_segment(p, a, b):
    ab = b - a
    s = np.clip(np.einsum("ij,ij->i", p - a, ab) / np.maximum(np.einsum("ij,ij->i", ab, ab), 1e-300), 0, 1)
    return np.linalg.norm(p - (a + s[:, None] * ab), axis=1)


def point_triangle(p, a, b, c):
    n = np.cross(b - a, c - a)
    n /= np.linalg.norm(n, axis=1)[:, None]
    height = np.einsum("ij,ij->i", p - a, n)
    q = p - height[:, None] * n
    inside = np.ones(len(p), bool)
    for u, v in ((a, b), (b, c), (c, a)):
        inside &= np.einsum("ij,ij->i", np.cross(v - u, q - u), n) >= 0
    sides = np.minimum(np.minimum(point_segment(p, a, b), point_segment(p, b, c)), point_segment(p, c, a))
    return np.where(inside, np.abs(height), sides)


def segment_segment(p0, p1, q0, q1):
    best = np.minimum.reduce([point_segment(p0, q0, q1), point_segment(p1, q0, q1),
                              point_segment(q0, p0, p1), point_segment(q1, p0, p1)])
    d1, d2, r = p1 - p0, q1 - q0, p0 - q0
    a, b, e = (np.einsum("ij,ij->i", u, v) for u, v in ((d1, d1), (d1, d2), (d2, d2)))
    det = a * e - b * b
    ok = det > 1e-12 * a * e
    safe = np.where(ok, det, 1)
    s = (b * np.einsum("ij,ij->i", d2, r) - e * np.einsum("ij,ij->i", d1, r)) / safe
    u = (a * np.einsum("ij,ij->i", d2, r) - b * np.einsum("ij,ij->i", d1, r)) / safe
    ok &= (s > 0) & (s < 1) & (u > 0) & (u < 1)
    interior = np.linalg.norm((p0 + s[:, None] * d1) - (q0 + u[:, None] * d2), axis=1)
    return np.where(ok, np.minimum(best, interior), best)


def closest_non_adjacent(x, triangles, edges, reach):
    """The smallest distance between a vertex and a triangle without it, or two edges without a
    shared vertex (pairs farther than `reach` are not measured: reach is returned then)."""
    vertices = np.arange(len(x))[:, None]
    v, t = close_pairs(x, vertices, triangles, reach)
    vt = point_triangle(x[v], *(x[triangles[t, k]] for k in range(3)))
    e, f = close_pairs(x, edges, edges, reach)
    keep = e < f
    e, f = e[keep], f[keep]
    ee = segment_segment(x[edges[e, 0]], x[edges[e, 1]], x[edges[f, 0]], x[edges[f, 1]])
    return min(reach, vt.min(initial=reach), ee.min(initial=reach)), int((vt < reach).sum() + (ee < reach).sum())


# ---- intersections: an edge through a triangle -------------------------------------------------

def orient(a, b, c, d):
    return np.einsum("ij,ij->i", np.cross(b - a, c - a), d - a)


def intersecting_triangle_pairs(x, triangles, edges):
    """Pairs of triangles without a shared vertex where an edge of one crosses the other."""
    e, t = close_pairs(x, edges, triangles, 0.0)
    p, q = x[edges[e, 0]], x[edges[e, 1]]
    a, b, c = (x[triangles[t, k]] for k in range(3))
    crosses = orient(a, b, c, p) * orient(a, b, c, q) < 0
    s1, s2, s3 = orient(p, q, a, b), orient(p, q, b, c), orient(p, q, c, a)
    crosses &= ((s1 > 0) & (s2 > 0) & (s3 > 0)) | ((s1 < 0) & (s2 < 0) & (s3 < 0))
    pairs = set()
    for edge, other in zip(e[crosses], t[crosses]):
        u, w = edges[edge]
        holders = np.nonzero(np.any(triangles == u, axis=1) & np.any(triangles == w, axis=1))[0]
        for h in holders:
            if not np.intersect1d(triangles[h], triangles[other]).size:
                pairs.add((min(h, other), max(h, other)))
    return pairs


# ---- the scenarios ------------------------------------------------------------------------------

def diagnostics(out_dir):
    with open(f"{out_dir}/diagnostics.csv") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def check_fold(on, thickness):
    """The fold's checks on one run: no intersections, the thickness kept, energy not made."""
    worst_pairs, closest, touching = 0, thickness, 0
    for name, x, triangles in outputs(on):
        edges = sheet_edges(triangles)
        crossing = intersecting_triangle_pairs(x, triangles, edges)
        d, near = closest_non_adjacent(x, triangles, edges, 1.5 * thickness)
        worst_pairs = max(worst_pairs, len(crossing))
        closest, touching = min(closest, d), max(touching, near)
        print(f"      {name}: {len(crossing)} intersecting triangle pairs, closest non-adjacent "
              f"pair {d / thickness:.3f} x thickness, {near} pairs within 1.5 x")
    check(worst_pairs == 0, "no intersecting non-adjacent triangle pair at any output step")
    check(touching > 50, "the sheet meets itself (over 50 pairs within 1.5 x the thickness)")
    check(closest >= 0.9 * thickness,
          f"non-adjacent elements at least 0.9 x thickness apart (closest {closest / thickness:.3f} x)")
    # Every diagnostics row (20 steps apart, so several per output): the total never rises above
    # its lowest so far by 1% of its start, which bounds the rise between any two outputs.
    table = diagnostics(on)
    with open(f"{on}/run_report.json") as f:
        report = json.load(f)["cloth"]["self_collision"]
    start, lowest, rise = table[0]["total"], table[0]["total"], 0.0
    for row in table:
        lowest = min(lowest, row["total"])
        rise = max(rise, row["total"] - lowest)
    print(f"      total energy {start:.6g} -> {table[-1]['total']:.6g} J; largest rise above the "
          f"lowest so far {rise:.3g} J ({100 * rise / start:.3f}% of the start); largest contact "
          f"energy {max(row['contact'] for row in table):.3g} J")
    print(f"      pair list built {report['pair_list_builds']} times, at most "
          f"{report['pairs_listed_most']:.0f} pairs on a rank; {report['clamped_vertex_steps']} "
          "vertex-steps clamped")
    check(rise <= 0.01 * start, "total energy never rises by more than 1% between outputs")
    return report


def scenario_fold(args, work):
    thickness = thickness_of(args.case)
    on = run(args, 2, f"{work}/on")
    report = check_fold(on, thickness)
    vertices = len(next(outputs(on))[1])
    halo = report["halo_vertices_per_step_most"]
    print(f"      each rank took the whole sheet {report['whole_sheet_gathers']} times (once per "
          f"list build); between builds it received {halo:.1f} of the {vertices} vertices a step")
    check(report["whole_sheet_gathers"] == report["pair_list_builds"] and 0 < halo < 0.2 * vertices,
          "ranks exchange the whole sheet only to build the pair list, then only the vertices "
          "their pairs name (under a fifth of the sheet)")

    off = run(args, 2, f"{work}/off", "--set", "cloth.self_collision.enabled=false")
    most = max(len(intersecting_triangle_pairs(x, t, sheet_edges(t))) for _, x, t in outputs(off))
    print(f"      without self-collision: up to {most} intersecting triangle pairs at an output")
    check(most > 0, "the control without self-collision intersects itself")

    soft = run(args, 2, f"{work}/soft", "--set", "cloth.self_collision.stiffness=1e-4")
    with open(f"{soft}/run_report.json") as f:
        clamped = json.load(f)["cloth"]["self_collision"]["clamped_vertex_steps"]
    most, closest = 0, thickness
    for _, x, triangles in outputs(soft):
        edges = sheet_edges(triangles)
        most = max(most, len(intersecting_triangle_pairs(x, triangles, edges)))
        closest = min(closest, closest_non_adjacent(x, triangles, edges, thickness)[0])
    print(f"      repulsion 500x softer: {clamped} vertex-steps clamped, up to {most} intersecting "
          f"pairs, closest non-adjacent pair {closest / thickness:.3f} x thickness")
    check(clamped > 0 and most == 0 and closest >= 0.5 * thickness * (1 - 1e-4),
          "the bound alone keeps the soft sheet's parts hard_gap (0.5) x thickness apart")


def scenario_implicit(args, work):
    """The fold stepped implicitly at 1 ms (4.3 x the explicit limit): the repulsion's stiffness
    is inside each solve (its gradient at the probes), the clamps still the last of the motion."""
    thickness = thickness_of(args.case)
    implicit = ["--set", "cloth.integrator=implicit", "--set", "cloth.implicit.dt=1e-3",
                "--set", "cloth.precision=float64"]
    two = run(args, 2, f"{work}/implicit_np2", *implicit)
    check_fold(two, thickness)
    one = run(args, 1, f"{work}/implicit_np1", *implicit)
    name, position, velocity = final_state(one)
    other, other_position, other_velocity = final_state(two)
    check(other == name and np.array_equal(position, other_position) and
          np.array_equal(velocity, other_velocity),
          f"implicit with self-contact: 2 ranks end where 1 rank does, bit for bit ({name})")


def final_state(out_dir):
    checkpoints = sorted(os.listdir(f"{out_dir}/checkpoints"))
    with h5py.File(f"{out_dir}/checkpoints/{checkpoints[-1]}", "r") as f:
        columns = f["tables/vertices/columns"]
        ids, position, velocity = columns["id"][...], columns["position"][...], columns["velocity"][...]
    order = np.argsort(ids)
    return checkpoints[-1], position[order], velocity[order]


def scenario_ranks(args, work):
    steps = ["--set", "cloth.grid.cells=[12, 6, 0]", "--set", "time.end=100", "--set",
             "output.every=0", "--set", "output.diagnostics_every=50"]
    through_contact = ["--set", f"time.max_steps={args.steps}"]
    middle = args.steps - 300
    runs = {n: run(args, n, f"{work}/np{n}", *steps, *through_contact) for n in (1, 2, 4)}
    name, reference, velocity = final_state(runs[1])
    contact = max(row["contact"] for row in diagnostics(runs[1]))
    in_contact = [row["step"] for row in diagnostics(runs[1]) if row["contact"] > 0]
    check(contact > 0 and in_contact[0] < middle,
          f"the sheet is in self-contact from step {in_contact[0] if in_contact else '-'} "
          f"(before the checkpoint at {middle}; largest contact energy {contact:.3g} J)")
    for n in (2, 4):
        other, position, other_velocity = final_state(runs[n])
        difference = float(np.max(np.abs(position - reference)))
        print(f"      {n} ranks: largest position difference from 1 rank {difference:.3g} m")
        check(other == name and np.array_equal(position, reference) and
              np.array_equal(velocity, other_velocity),
              f"{n} ranks: positions and velocities at step {args.steps} equal 1 rank's bit for bit")
    half = run(args, 4, f"{work}/half", *steps, "--set", f"time.max_steps={middle}")
    for n in (1, 2):
        target = f"{work}/continued_np{n}"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(half, target)
        run(args, n, target, *steps, *through_contact, "--restart", "latest")
        _, position, other_velocity = final_state(target)
        check(np.array_equal(position, reference) and np.array_equal(velocity, other_velocity),
              f"checkpoint on 4 ranks at step {middle}, continued on {n}: bit for bit")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=["fold", "implicit", "ranks"])
    parser.add_argument("--apron", required=True)
    parser.add_argument("--case", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--steps", type=int, default=2300)
    parser.add_argument("--mpiexec", default="mpirun --oversubscribe")
    args = parser.parse_args()
    work = os.path.join(args.work, args.scenario)
    os.makedirs(work, exist_ok=True)
    globals()[f"scenario_{args.scenario}"](args, work)


if __name__ == "__main__":
    main()
