#!/usr/bin/env python3
"""The piston wave maker against Biesel's transfer function, at two wave numbers and several
resolutions (a GPU run: minutes; bench/NOTES.md has the figures).

A flume LENGTH m long holds water of depth D = 0.1 m in a slab 0.03 m wide (quasi-2-D). The water
rests for START s (the start settles), then a piston at the left end moves by
S/2 sin(2 pi t / T). First-order wave-maker theory (Biesel 1951) gives the height of the
progressive wave it makes, H/S = 2 (cosh 2kd - 1) / (sinh 2kd + 2kd), with k from the dispersion
relation omega^2 = g k tanh(kd). A wave gauge at x = GAUGE m (over two depths from the piston,
where the evanescent modes have died out) reads the free surface; H is twice the amplitude of the
fitted sinusoid at the piston's frequency over a window that starts two periods after the wave
front (moving at the group velocity) passes the gauge and ends before the wave reflected from the
far wall comes back. The error |H/S - Biesel| / Biesel should fall as the spacing does; it does
not yet (see --alpha below).

usage: wave_maker.py --apron EXE [--spacings 0.01 0.005] [--periods 0.8 1.2] [--out DIR]
                     [--alpha 0.02] [--wall-alpha 0] [--mpirun "mpirun -n 2"]
                     [--set boundary.wall_pressure=fluid_average ...]"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time

G, DEPTH, WIDTH, LENGTH, STROKE, START, GAUGE = 9.81, 0.1, 0.03, 4.0, 0.02, 1.0, 1.0


def wave_number(period):
    omega = 2 * math.pi / period
    k = omega * omega / G  # deep water, then Newton on omega^2 = g k tanh(kd)
    for _ in range(50):
        f = G * k * math.tanh(k * DEPTH) - omega * omega
        df = G * math.tanh(k * DEPTH) + G * k * DEPTH / math.cosh(k * DEPTH) ** 2
        k -= f / df
    return k


def biesel(kd):
    return 2 * (math.cosh(2 * kd) - 1) / (math.sinh(2 * kd) + 2 * kd)


def group_velocity(k, period):
    c = 2 * math.pi / period / k
    return 0.5 * c * (1 + 2 * k * DEPTH / math.sinh(2 * k * DEPTH))


def window(period):
    k = wave_number(period)
    cg = group_velocity(k, period)
    first = START + GAUGE / cg + 2 * period
    reflected = START + (2 * LENGTH - GAUGE) / cg
    last = min(first + 4 * period, reflected - period)
    return first, last


def case_sets(spacing, period, out_dir, end, alpha, wall_alpha):
    return [
        f"sph.alpha={alpha}", f"sph.wall_alpha={wall_alpha}",
        f"domain={{lo: [-0.05, -0.03, -0.03], hi: [{LENGTH + 0.05}, {WIDTH + 0.03}, 0.25]}}",
        f"sph.spacing={spacing}",
        f"fluid=[{{lo: [0.03, 0, 0], hi: [{LENGTH}, {WIDTH}, {DEPTH}]}}]",
        f"boundary.tank={{lo: [0, 0, 0], hi: [{LENGTH}, {WIDTH}, 0.2]}}",
        f"boundary.solids=[{{lo: [0, 0, 0], hi: [0.03, {WIDTH}, 0.2], motion: {{type: sinusoid, "
        f"amplitude: [{STROKE / 2}, 0, 0], period: {period}, start: {START}}}}}]",
        f"gauges=[{{x: {GAUGE}, y: {WIDTH / 2}}}]",
        f"time.end={end}", "output.every=0", "output.diagnostics_every=10",
        f"output.dir={out_dir}", "checkpoint.at_end=false"]


def fitted_height(rows, period, first, last):
    """Twice the amplitude of a + b cos(wt) + c sin(wt) fitted to the gauge over [first, last]."""
    import numpy as np
    t = np.array([float(r["time"]) for r in rows])
    z = np.array([float(r["gauge0_elevation"]) for r in rows])
    keep = (t >= first) & (t <= last)
    w = 2 * math.pi / period
    design = np.stack([np.ones(keep.sum()), np.cos(w * t[keep]), np.sin(w * t[keep])], axis=1)
    coef, *_ = np.linalg.lstsq(design, z[keep], rcond=None)
    return 2 * math.hypot(coef[1], coef[2]), int(keep.sum())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--apron", required=True)
    p.add_argument("--spacings", type=float, nargs="+", default=[0.01, 0.005])
    p.add_argument("--periods", type=float, nargs="+", default=[0.8, 1.2])
    p.add_argument("--out", default="wave-maker-out")
    p.add_argument("--mpirun", default="", help="launcher prefix, e.g. 'mpirun -n 2'")
    # Not yet a validation (bench/NOTES.md, "The wave maker against Biesel"): at the flume case's
    # alpha = wall_alpha = 0.1 the waves are damped to 2-6% of Biesel's height within a metre (a
    # slab 3-6 particles wide is all wall boundary layer); at 0.05 and below the slab goes unstable
    # at rest, hydrostatic start or not (bottom particles dive at zero pressure), and the gauge
    # reads spray.
    p.add_argument("--alpha", type=float, default=0.1)
    p.add_argument("--wall-alpha", type=float, default=0.1)
    p.add_argument("--set", action="append", default=[], help="more key=value for every run")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    results = []
    for period in a.periods:
        k = wave_number(period)
        first, last = window(period)
        expected = biesel(k * DEPTH)
        for spacing in a.spacings:
            run_dir = os.path.join(a.out, f"T{period}_dx{spacing}")
            command = a.mpirun.split() + [a.apron, "run", "inputs/wave_flume.yaml"]
            for s in case_sets(spacing, period, run_dir, last + 0.05, a.alpha, a.wall_alpha) + a.set:
                command += ["--set", s]
            began = time.time()
            done = subprocess.run(command, capture_output=True, text=True)
            seconds = time.time() - began
            if done.returncode != 0:
                sys.exit(f"wave_maker.py: the run failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
            with open(os.path.join(run_dir, "diagnostics.csv")) as f:
                rows = list(csv.DictReader(f))
            height, samples = fitted_height(rows, period, first, last)
            error = abs(height / STROKE - expected) / expected
            results.append({"period": period, "kd": k * DEPTH, "spacing": spacing,
                            "particles_per_depth": DEPTH / spacing, "H_over_S": height / STROKE,
                            "biesel": expected, "error": error, "window": [first, last],
                            "samples": samples, "wall_seconds": seconds, "alpha": a.alpha,
                            "wall_alpha": a.wall_alpha, "sets": a.set})
            print(f"T = {period} s (kd = {k * DEPTH:.3f}), dx = {spacing} m: H/S = "
                  f"{height / STROKE:.4f}, Biesel {expected:.4f}, error {100 * error:.1f}% "
                  f"({samples} samples over t = {first:.2f}..{last:.2f} s; {seconds:.0f} s)",
                  flush=True)
    with open(os.path.join(a.out, "wave_maker.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
