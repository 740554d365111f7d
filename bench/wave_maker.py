#!/usr/bin/env python3
"""The piston wave maker against Biesel's transfer function, at two wave numbers and several
resolutions (a GPU run: minutes; bench/NOTES.md has the figures).

A flume holds water of depth D = 0.1 m in a slab 0.03 m wide (quasi-2-D; --width). The water rests for
START s (the start settles), then a piston at the left end moves by S/2 sin(2 pi t / T), its
amplitude ramped up over the first --ramp-periods periods (default 2; 0: an abrupt start, whose
ripples run ahead of the wave train and, reflected, come back before it).
First-order wave-maker theory (Biesel 1951) gives the height of the progressive wave it makes,
H/S = 2 (cosh 2kd - 1) / (sinh 2kd + 2kd), with k from the dispersion relation
omega^2 = g k tanh(kd). Gauges read the free surface three depths from the piston (where the
evanescent modes have died out) and one, two and three wavelengths from it; the comparison is made
at three wavelengths. H is twice the amplitude of the sinusoid at the piston's frequency fitted at
each gauge over a window that starts a period after the ramp's end (moving at the group velocity)
passes it (two periods after the front without a ramp) and lasts four periods. The flume is made
long enough that the wave reflected from its far wall comes back to the farthest gauge only a
period after its window ends, so no beach is needed. The gauges between the piston and the far one
say where height is lost: at the piston (the first gauge low already) or on the way (the heights
falling with distance).

usage: wave_maker.py --apron EXE [--spacings 0.01 0.005] [--periods 0.8 1.2] [--out DIR]
                     [--alpha 0.01] [--wall-alpha 0] [--smoothing-ratio 1.7] [--width 0.03]
                     [--x0 0] [--stroke 0.02] [--ramp-periods 2] [--jobs N]
                     [--mpirun "mpirun -n 2"] [--set key=value ...]"""
import argparse
import concurrent.futures
import csv
import json
import math
import os
import subprocess
import sys
import time

G, DEPTH, START = 9.81, 0.1, 1.0
PISTON = 0.03  # the piston's face at rest, x from the tank's wall
WALL_HEIGHT = 0.16  # the tank's and the piston's top: above the highest crest and splash
WINDOW_PERIODS = 4


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


def gauge_places(period):
    """Three depths from the piston, then one, two and three wavelengths (x from the tank's wall)."""
    wavelength = 2 * math.pi / wave_number(period)
    return [PISTON + 3 * DEPTH] + [PISTON + n * wavelength for n in (1, 2, 3)]


def window(period, gauge, ramp_periods):
    cg = group_velocity(wave_number(period), period)
    first = START + (gauge - PISTON) / cg + (ramp_periods + 1 if ramp_periods else 2) * period
    return first, first + WINDOW_PERIODS * period


def flume_length(period, ramp_periods):
    """Long enough that the reflection from the far wall reaches the farthest gauge a period after
    its window ends."""
    gauge = gauge_places(period)[-1]
    last = window(period, gauge, ramp_periods)[1]
    length = PISTON + 0.5 * (gauge - PISTON + group_velocity(wave_number(period), period) * (last + period - START))
    return math.ceil(length * 10) / 10


def case_sets(spacing, period, out_dir, end, alpha, wall_alpha, smoothing_ratio, width, x0, stroke,
              ramp_periods):
    """The run's settings; the tank's wall at x = x0 (its coordinates' magnitude sets the ulp)."""
    length = flume_length(period, ramp_periods)
    margin = 4 * spacing  # the walls' layers outside the tank
    gauges = ", ".join(f"{{x: {x0 + x:.4f}, y: {width / 2}}}" for x in gauge_places(period))
    return [
        f"sph.alpha={alpha}", f"sph.wall_alpha={wall_alpha}", f"sph.smoothing_ratio={smoothing_ratio}",
        f"domain={{lo: [{round(x0 - margin, 6)}, {-margin}, {-margin}], hi: [{round(x0 + length + margin, 6)}, "
        f"{width + margin}, 0.25]}}",
        f"sph.spacing={spacing}",
        f"fluid=[{{lo: [{round(x0 + PISTON, 6)}, 0, 0], hi: [{round(x0 + length, 6)}, {width}, {DEPTH}]}}]",
        f"boundary.tank={{lo: [{x0}, 0, 0], hi: [{round(x0 + length, 6)}, {width}, {WALL_HEIGHT}]}}",
        f"boundary.solids=[{{lo: [{x0}, 0, 0], hi: [{round(x0 + PISTON, 6)}, {width}, {WALL_HEIGHT}], "
        f"motion: {{type: sinusoid, amplitude: [{stroke / 2}, 0, 0], period: {period}, "
        f"start: {START}, ramp: {ramp_periods * period}}}}}]",
        f"gauges=[{gauges}]",
        f"time.end={end}", "output.every=0", "output.diagnostics_every=10",
        f"output.dir={out_dir}", "checkpoint.at_end=false"]


def fitted_height(rows, gauge, period, first, last):
    """Twice the amplitude of a + b cos(wt) + c sin(wt) fitted to a gauge over [first, last] by
    least squares (the normal equations: no numpy where the GPU machine has none)."""
    w = 2 * math.pi / period
    normal = [[0.0] * 4 for _ in range(3)]
    samples = 0
    for r in rows:
        t = float(r["time"])
        if first <= t <= last:
            basis = (1.0, math.cos(w * t), math.sin(w * t))
            z = float(r[f"gauge{gauge}_elevation"])
            for i in range(3):
                for j in range(3):
                    normal[i][j] += basis[i] * basis[j]
                normal[i][3] += basis[i] * z
            samples += 1
    for i in range(3):  # Gauss-Jordan; the matrix is symmetric positive definite
        pivot = normal[i][i]
        normal[i] = [v / pivot for v in normal[i]]
        for j in range(3):
            if j != i:
                factor = normal[j][i]
                normal[j] = [v - factor * u for v, u in zip(normal[j], normal[i])]
    return 2 * math.hypot(normal[1][3], normal[2][3]), samples


def run_case(a, period, spacing):
    """One flume run; its heights at every gauge against Biesel's."""
    k = wave_number(period)
    places = gauge_places(period)
    windows = [window(period, x, a.ramp_periods) for x in places]
    run_dir = os.path.join(a.out, f"T{period}_dx{spacing}_w{a.width}")
    command = a.mpirun.split() + [a.apron, "run", "inputs/wave_flume.yaml"]
    end = windows[-1][1] + 0.05
    for s in case_sets(spacing, period, run_dir, end, a.alpha, a.wall_alpha, a.smoothing_ratio, a.width,
                       a.x0, a.stroke, a.ramp_periods) + a.set:
        command += ["--set", s]
    os.makedirs(run_dir, exist_ok=True)
    log = os.path.join(run_dir, "apron.log")
    began = time.time()
    with open(log, "w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.time() - began
    if done.returncode != 0:
        with open(log) as f:
            return {"period": period, "spacing": spacing, "failed": f.read()[-4000:]}
    with open(os.path.join(run_dir, "diagnostics.csv")) as f:
        rows = list(csv.DictReader(f))
    expected = biesel(k * DEPTH)
    heights = [fitted_height(rows, g, period, *w)[0] / a.stroke for g, w in enumerate(windows)]
    return {"period": period, "kd": k * DEPTH, "wavelength": 2 * math.pi / k, "spacing": spacing,
            "particles_per_depth": DEPTH / spacing, "flume_length": flume_length(period, a.ramp_periods),
            "gauges": places, "windows": windows, "H_over_S": heights, "biesel": expected,
            "error": abs(heights[-1] - expected) / expected, "particles": sorted({r["particles"] for r in rows}),
            "outside_tank_rows": sum(int(float(r["outside_tank"])) > 0 for r in rows),
            "wall_seconds": seconds, "width": a.width, "alpha": a.alpha, "wall_alpha": a.wall_alpha,
            "smoothing_ratio": a.smoothing_ratio, "ramp_periods": a.ramp_periods, "sets": a.set}


def report(r):
    if "failed" in r:
        return f"T = {r['period']} s, dx = {r['spacing']} m: the run failed:\n{r['failed']}"
    heights = ", ".join(f"{h:.4f} at {x:.2f} m" for h, x in zip(r["H_over_S"], r["gauges"]))
    return (f"T = {r['period']} s (kd = {r['kd']:.3f}), dx = {r['spacing']} m, flume "
            f"{r['flume_length']} m, slab {r['width']} m: H/S = {heights}; Biesel {r['biesel']:.4f}, error at three "
            f"wavelengths {100 * r['error']:.1f}% (particles in the rows {r['particles']}, rows with one "
            f"outside the tank {r['outside_tank_rows']}; {r['wall_seconds']:.0f} s)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--apron", required=True)
    p.add_argument("--spacings", type=float, nargs="+", default=[0.01, 0.005])
    p.add_argument("--periods", type=float, nargs="+", default=[0.8, 1.2])
    p.add_argument("--out", default="wave-maker-out")
    p.add_argument("--mpirun", default="", help="launcher prefix, e.g. 'mpirun -n 2'")
    # The flume's case runs continuity density at alpha 0.01 (bench/NOTES.md, "SPH: session 24");
    # 0.1 damps the wave within a metre.
    p.add_argument("--alpha", type=float, default=0.01)
    p.add_argument("--wall-alpha", type=float, default=0.0)
    # At h/dx 1.3 the narrow kernel's noise at rest is 7x that at 1.7 and the wave loses twice
    # the height on the way (bench/NOTES.md, "Continuity density at h/dx 1.7").
    p.add_argument("--smoothing-ratio", type=float, default=1.7, help="h / dx")
    # The slab's side walls damp the wave as a channel's would (bench/NOTES.md): a wider slab
    # tells how much of the height lost on the way is theirs.
    p.add_argument("--width", type=float, default=0.03, help="the slab's width [m]")
    # Float32 positions: a step's displacement is a few ulps of a coordinate metres from the
    # origin at fine spacings; a flume centred on it halves the coordinates and their ulp.
    # Biesel's is first-order theory: a smaller stroke tells what of the height the wave's
    # steepness takes (its second and third-order parts).
    p.add_argument("--stroke", type=float, default=0.02, help="the piston's stroke S [m]")
    p.add_argument("--ramp-periods", type=float, default=2, help="the stroke's ramp [periods]")
    p.add_argument("--x0", type=float, default=0.0, help="x of the tank's wall [m]")
    # On one GPU keep 1: six runs at once there wrote no diagnostics row in 540 s (bench/NOTES.md).
    p.add_argument("--jobs", type=int, default=1, help="runs at once (CPU runs)")
    p.add_argument("--set", action="append", default=[], help="more key=value for every run")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    cases = [(period, spacing) for period in a.periods for spacing in a.spacings]
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        futures = [pool.submit(run_case, a, *c) for c in cases]
        results = []
        for f in concurrent.futures.as_completed(futures):
            results.append(f.result())
            print(report(results[-1]), flush=True)
            with open(os.path.join(a.out, "wave_maker.json"), "w") as out:
                json.dump(results, out, indent=1)
    sys.exit(1 if any("failed" in r for r in results) else 0)


if __name__ == "__main__":
    main()
