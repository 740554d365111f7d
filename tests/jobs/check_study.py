#!/usr/bin/env python3
"""Checks a jobs/scaling study directory against the run reports it was made from.

usage: check_study.py STUDY_DIR --ranks 1 2 4 [--series strong weak] [--steps N]

- scaling.csv holds exactly one row per series and rank count;
- every row agrees with its run's run_report.json (items, steps, time per step, throughput);
- strong rows all have the particle count of the smallest rank count; weak rows grow with the
  ranks, within 15% of r / r0 times it (the lattice rounds the spacing), and strictly;
- speed-up and efficiency are recomputed from the reports;
- scaling.png is a PNG of a sensible size and scaling.svg an SVG with the three panels.
"""
import argparse
import csv
import json
import math
import os
import struct
import sys

errors = []


def check(cond, message):
    if not cond:
        errors.append(message)
    return cond


def close(a, b, rel=1e-4):
    return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-12)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("study")
    p.add_argument("--ranks", type=int, nargs="+", required=True)
    p.add_argument("--series", nargs="+", default=["strong", "weak"])
    p.add_argument("--steps", type=int)
    a = p.parse_args()

    with open(os.path.join(a.study, "scaling.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    got = sorted((r["series"], int(r["ranks"])) for r in rows)
    want = sorted((s, n) for s in a.series for n in a.ranks)
    check(got == want, f"CSV rows {got}, expected {want}")
    r0 = min(a.ranks)
    for series in a.series:
        sel = {int(r["ranks"]): r for r in rows if r["series"] == series}
        if r0 not in sel:
            continue
        reports = {}
        for n, row in sel.items():
            with open(os.path.join(row["run_dir"], "run_report.json")) as f:
                reports[n] = json.load(f)
        base = reports[r0]
        base_items = base["items"]
        for n, row in sorted(sel.items()):
            rep, where = reports[n], f"{series} r={n}"
            check(rep["ranks"] == n, f"{where}: the report says {rep['ranks']} ranks")
            check(int(row["items"]) == rep["items"],
                  f"{where}: items {row['items']} != report {rep['items']}")
            check(row["item"] == rep["item"], f"{where}: item {row['item']} != {rep['item']}")
            check(int(row["steps"]) == rep["steps"], f"{where}: steps differ from the report")
            if a.steps:
                check(rep["steps"] == a.steps, f"{where}: {rep['steps']} steps, expected {a.steps}")
            check(close(row["seconds_per_step"], rep["loop_seconds"] / rep["steps"]),
                  f"{where}: seconds_per_step {row['seconds_per_step']} != loop_seconds / steps")
            check(close(row["item_steps_per_second"], rep["loop_item_steps_per_second"]),
                  f"{where}: item_steps_per_second differs from the report")
            speed_up = rep["loop_item_steps_per_second"] / base["loop_item_steps_per_second"]
            check(close(row["speed_up"], speed_up), f"{where}: speed_up {row['speed_up']} != {speed_up}")
            check(close(row["ideal_speed_up"], n / r0), f"{where}: ideal_speed_up != {n / r0}")
            check(close(row["efficiency"], speed_up * r0 / n),
                  f"{where}: efficiency {row['efficiency']} != {speed_up * r0 / n}")
            halo = rep["phases"]["halo"]["max_seconds"]
            check(close(row["halo_share"], halo / rep["loop_seconds"]), f"{where}: halo_share")
            check(0 <= float(row["halo_share"]) <= 1, f"{where}: halo_share out of [0, 1]")
            items = rep["items"]
            if series == "strong":
                check(items == base_items,
                      f"{where}: {items} items, the fixed problem has {base_items}")
            else:
                target = base_items * n / r0
                check(abs(items / target - 1) <= 0.15,
                      f"{where}: {items} items, not within 15% of {target:.0f}")
                check(int(row["target_items"]) == round(target), f"{where}: target_items")
        if series == "weak":
            counts = [int(sel[n]["items"]) for n in sorted(sel)]
            check(counts == sorted(set(counts)), f"weak: item counts {counts} do not grow")

    png = os.path.join(a.study, "scaling.png")
    if check(os.path.exists(png), "no scaling.png"):
        with open(png, "rb") as f:
            head = f.read(24)
        if check(head[:8] == b"\x89PNG\r\n\x1a\n", "scaling.png is not a PNG"):
            w, h = struct.unpack(">II", head[16:24])
            check(w >= 800 and h >= 300, f"scaling.png is {w}x{h}")
    svg = os.path.join(a.study, "scaling.svg")
    if check(os.path.exists(svg), "no scaling.svg"):
        text = open(svg).read()
        check("<svg" in text, "scaling.svg is not an SVG")
        for word in ("time per step", "speed-up", "parallel efficiency", "ideal"):
            check(word in text, f"scaling.svg has no '{word}'")

    for e in errors:
        print(f"check_study: FAIL: {e}")
    n = len(rows)
    print(f"check_study: {n} rows, {len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
