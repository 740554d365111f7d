#!/usr/bin/env python3
"""The cloth's integrators against each other (issue 17: "an integrator that allows time steps
set by the physics of the cloth ... chosen by measurement"). One case run to the same simulated
time by the explicit integrator (cfl 0.5) and by the implicit one at several steps; each run's
step-loop wall time, steps, conjugate-gradient iterations, and its final positions' largest
distance from a reference (explicit at cfl 0.125), read in float64 from the final checkpoints.

usage: cloth_integrators.py --apron EXE [--case CASE] [--cells N] [--end T] [--dt DT ...]
                            [--work DIR] [--mpiexec "mpirun -n 1"] [--set KEY=VALUE ...]
"""
import argparse
import json
import os
import re
import subprocess

import h5py
import numpy as np


def run(args, name, *settings):
    out = os.path.join(args.work, name)
    command = args.mpiexec.split() + [
        args.apron, "run", args.case, "--set", f"cloth.grid.cells=[{args.cells}, {args.cells}, 0]",
        "--set", f"time.end={args.end}", "--set", "output.every=0", "--set", f"output.dir={out}",
        "--set", "checkpoint.at_end=true", "--set", "output.progress_every=1000"]
    for s in args.set + list(settings):
        command += ["--set", s]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"name": name, "failed": (done.stdout + done.stderr).strip().splitlines()[-1]}
    log = done.stdout
    loop = float(re.search(r"step loop: ([0-9.e+-]+) s", log).group(1))
    with open(f"{out}/run_report.json") as f:
        cloth = json.load(f)["cloth"]
    last = sorted(os.listdir(f"{out}/checkpoints"))[-1]
    with h5py.File(f"{out}/checkpoints/{last}", "r") as f:
        columns = f["tables/vertices/columns"]
        position = columns["position"][...][np.argsort(columns["id"][...])]
    steps = int(re.search(r"checkpoint_0*([0-9]+)\.h5", last).group(1))
    return {"name": name, "loop": loop, "steps": steps, "cloth": cloth, "position": position}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--apron", required=True)
    parser.add_argument("--case", default="inputs/cloth_drape.yaml")
    parser.add_argument("--cells", type=int, default=32)
    parser.add_argument("--end", type=float, default=0.15)
    parser.add_argument("--dt", type=float, nargs="*", default=[1e-4, 3e-4, 1e-3, 3e-3])
    parser.add_argument("--work", default="out/cloth_integrators")
    parser.add_argument("--mpiexec", default="")
    parser.add_argument("--set", action="append", default=[])
    args = parser.parse_args()
    reference = run(args, "reference", "cloth.cfl=0.125")
    runs = [run(args, "explicit", "cloth.cfl=0.5")]
    for dt in args.dt:
        runs.append(run(args, f"implicit_dt{dt:g}", "cloth.integrator=implicit",
                        f"cloth.implicit.dt={dt}", "cloth.implicit.max_iterations=1000"))
    print(f"{args.case}, {args.cells}x{args.cells} cells, to t = {args.end} s; reference: explicit, "
          f"cfl 0.125, {reference['steps']} steps")
    print("| integrator | dt [s] | steps | CG iterations per step (most) | step loop [s] | "
          "largest distance from the reference [m] |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in runs:
        if "failed" in r:
            print(f"| {r['name']} | | | | | failed: {r['failed']} |")
            continue
        c = r["cloth"]
        cg = (f"{c['cg_iterations_per_step']:.1f} ({c['cg_iterations_most']})"
              if c["integrator"] == "implicit" else "-")
        distance = float(np.max(np.abs(r["position"] - reference["position"])))
        print(f"| {c['integrator']} | {c['dt']:.3g} | {r['steps']} | {cg} | {r['loop']:.3f} | "
              f"{distance:.3g} |")


if __name__ == "__main__":
    main()
