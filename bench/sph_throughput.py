#!/usr/bin/env python3
"""SPH throughput benchmark: particle-steps per second of the dam break at given particle counts.

usage: sph_throughput.py --apron PATH [--ranks 1] [--particles 1e6 10e6] [--steps 100]
                         [--repeat 3] [--json OUT.json] [--mpirun "mpirun -n"] [--set K=V ...]

Runs inputs/dam_break_large.yaml with the spacing that gives each fluid particle count, for a
fixed number of steps without particle output, `repeat` times, and reports the median of the
step-loop throughput (setup excluded) with the device bytes per particle. Weak scaling: pass
--per-rank so the count is multiplied by the rank count.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CASE = os.path.join(HERE, "..", "inputs", "dam_break_large.yaml")
FLUID_VOLUME = 0.146 * 0.292 * 0.292  # the case's fluid block [m^3]


def spacing_for(particles):
    return (FLUID_VOLUME / particles) ** (1 / 3)


def run_once(args, particles, out_dir):
    cmd = (args.mpirun.split() + [str(args.ranks)]) if args.ranks > 1 else []
    cmd += [args.apron, "run", CASE,
            "--set", f"sph.spacing={spacing_for(particles):.9g}",
            "--set", f"time.max_steps={args.steps}",
            "--set", "output.every=0", "--set", f"output.diagnostics_every={args.steps}",
            "--set", f"output.dir={out_dir}", "--set", "output.progress_every=1000"]
    for extra in args.set:
        cmd += ["--set", extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out_dir, "run_report.json")) as f:
        return json.load(f)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--apron", required=True)
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--mpirun", default="mpirun -n")
    p.add_argument("--particles", type=float, nargs="+", default=[1e6])
    p.add_argument("--per-rank", action="store_true", help="weak scaling: particles per rank")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="extra case override, passed on to apron (repeatable)")
    args = p.parse_args()

    rows = []
    for n in args.particles:
        total = n * args.ranks if args.per_rank else n
        reports = []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as out:
                reports.append(run_once(args, total, out))
        # Reports of builds before the workload-neutral keys (issue 14) say "particle" for "item".
        rates = [r.get("loop_item_steps_per_second", r.get("loop_particle_steps_per_second"))
                 for r in reports]
        row = {
            "ranks": args.ranks,
            "fluid_particles": reports[0]["items"],
            "steps": reports[0]["steps"],
            "median_particle_steps_per_second": statistics.median(rates),
            "runs": rates,
            # Without the first 10 steps (one-time allocations, NCCL connecting): a long run's rate.
            "median_steady_particle_steps_per_second": statistics.median(
                r.get("steady_item_steps_per_second", r.get("steady_particle_steps_per_second"))
                for r in reports)
            if all("steady_item_steps_per_second" in r or "steady_particle_steps_per_second" in r
                   for r in reports) else None,
            "median_seconds_per_step": statistics.median(r["loop_seconds"] / r["steps"] for r in reports),
            "device_bytes_per_particle": reports[0]["sph"].get("device_bytes_per_particle"),
            "device_bytes_per_particle_by_use": reports[0]["sph"].get("device_bytes_per_particle_by_use"),
            "halo_transport": reports[0]["sph"].get("halo_transport"),
            "devices": reports[0]["devices"],
            "phases": reports[-1]["phases"],
        }
        rows.append(row)
        print(f"{args.ranks} rank(s) {row['fluid_particles']:>11,d} particles: "
              f"{row['median_particle_steps_per_second']:.3e} particle-steps/s "
              f"({row['median_seconds_per_step'] * 1e3:.2f} ms/step, median of {args.repeat}; "
              f"{row['median_steady_particle_steps_per_second'] or 0:.3e} after step 10), "
              f"{row['device_bytes_per_particle']} B/particle", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
