#!/usr/bin/env python3
"""Catalyst overhead: time per Catalyst call and its share of the step loop.

usage: catalyst_overhead.py --apron PATH [--particles 1e6] [--steps 20] [--every 5]
                            [--repeat 3] [--json OUT.json] [--mpirun "mpirun -n"] [--ranks 1]

Runs inputs/dam_break_large.yaml at the spacing that gives the particle count for a fixed number
of steps, `repeat` times each: without Catalyst, with the built-in writer pipeline (.pvtp of
every particle), with a Python script that does nothing (bench/catalyst_noop.py: the cost of
the call itself) and with a script writing a parallel data extract (.pvtp) through ParaView's
extractors (tests/catalyst/extracts_and_screenshot.py minus rendering: data only). Reports, as
medians over the runs: seconds per Catalyst call in steady state (the driver's "catalyst" phase
without the first call, which imports the scripts' modules, over the other calls), the first
call and the start-up apart, and the share of a step's time Catalyst takes when it runs every
`every` steps and every step (against the run without Catalyst).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run import ROOT, sph_spacing  # noqa: E402

CASE = os.path.join(ROOT, "inputs", "dam_break_large.yaml")

DATA_EXTRACT_SCRIPT = """\
# script-version: 2.0
from paraview.simple import *
from paraview import catalyst
particles = TrivialProducer(registrationName='particles')
data = CreateExtractor('VTP', particles, registrationName='particle_data')
data.Trigger = 'TimeStep'
data.Trigger.Frequency = 1
data.Writer.FileName = 'particles_{timestep:06d}.pvtp'
options = catalyst.Options()
options.ExtractsOutputDirectory = 'extracts'
"""


def variants(work):
    extract = os.path.join(work, "data_extract.py")
    with open(extract, "w") as f:
        f.write(DATA_EXTRACT_SCRIPT)
    return {
        "none": [],
        "builtin writer": ["--set", "catalyst.scripts=[]"],
        "python no-op": ["--set", f"catalyst.scripts=[{os.path.join(HERE, 'catalyst_noop.py')}]"],
        "python data extract": ["--set", f"catalyst.scripts=[{extract}]"],
    }


def run_once(args, extra, out_dir):
    cmd = (args.mpirun.split() + [str(args.ranks)]) if args.ranks > 1 else []
    cmd += [args.apron, "run", CASE, "--set", f"sph.spacing={sph_spacing(args.particles):.9g}",
            "--set", f"time.max_steps={args.steps}", "--set", "output.every=0",
            "--set", f"output.diagnostics_every={args.steps}", "--set", f"output.dir={out_dir}",
            "--set", "output.progress_every=1000", "--set", "checkpoint.at_end=false"]
    if extra:
        cmd += ["--set", f"catalyst.every={args.every}"] + extra
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out_dir, "run_report.json")) as f:
        return json.load(f)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--apron", required=True)
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--mpirun", default="mpirun -n")
    p.add_argument("--particles", type=float, default=1e6)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--every", type=int, default=5)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json")
    args = p.parse_args()

    rows = []
    baseline_step = None
    with tempfile.TemporaryDirectory() as work:
        for name, extra in variants(work).items():
            reports = []
            for i in range(args.repeat):
                out = os.path.join(work, f"run_{len(rows)}_{i}")
                reports.append(run_once(args, extra, out))
            loop_step = statistics.median(r["loop_seconds"] / r["steps"] for r in reports)
            row = {"variant": name, "particles": reports[0]["items"], "ranks": args.ranks,
                   "steps": args.steps, "every": args.every, "loop_seconds_per_step": loop_step,
                   "devices": reports[0]["devices"]}
            if not extra:
                baseline_step = loop_step
                print(f"{name:>20}: {loop_step:.3f} s/step ({row['particles']:,} particles, "
                      f"median of {args.repeat})", flush=True)
                rows.append(row)
                continue
            # Steady cost per call: the first call (module imports) is kept apart.
            steady = [(r["phases"]["catalyst"]["max_seconds"] - r["catalyst"]["first_call_seconds"])
                      / (r["catalyst"]["calls"] - 1) for r in reports]
            per_call = statistics.median(steady)
            per_step = per_call / args.every
            row.update({
                "calls": reports[0]["catalyst"]["calls"],
                "median_seconds_per_call": per_call,
                "median_first_call_seconds": statistics.median(
                    r["catalyst"]["first_call_seconds"] for r in reports),
                "median_setup_seconds": statistics.median(
                    r["phases"]["catalyst setup"]["max_seconds"] for r in reports),
                # Of a step's time when Catalyst runs every `every` steps, and every step.
                "share_of_step_time": per_step / (baseline_step + per_step),
                "share_of_step_time_every_step": per_call / (baseline_step + per_call),
                "runs_seconds_per_call": steady,
            })
            rows.append(row)
            print(f"{name:>20}: {per_call * 1e3:8.1f} ms/call, {100 * row['share_of_step_time']:5.1f}% "
                  f"of step time every {args.every} steps ({100 * row['share_of_step_time_every_step']:.1f}% "
                  f"every step); first call {row['median_first_call_seconds']:.2f} s, setup "
                  f"{row['median_setup_seconds']:.2f} s (median of {args.repeat})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
