#!/usr/bin/env python3
"""Plane detection benchmark (issue 16): runs `apron run inputs/planes_room.yaml` on a synthetic
scene of N points (OpenMP or CUDA build, 1 or more ranks) with `planes.repeat` repetitions,
and reports the median over the repetitions after the first (warm-up) of each stage and of the
whole analysis (from points in host memory, file parsing and scene generation excluded), with
the planes found and the F1 against the scene's ground truth. JSON with --json.

  python3 bench/planes_bench.py --apron build-omp/src/apron --points 1e6 --repeat 7
  python3 bench/planes_bench.py --apron .device/apron --ranks 2 --points 20e6 --json out.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def find_planes(report):
    if isinstance(report, dict):
        if "stage_seconds_per_repetition" in report:
            return report
        for v in report.values():
            found = find_planes(v)
            if found:
                return found
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--apron", required=True)
    ap.add_argument("--case", default="inputs/planes_room.yaml")
    ap.add_argument("--scene", default="room")
    ap.add_argument("--points", type=float, default=1e6)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--set", action="append", default=[], help="more --set key=value")
    ap.add_argument("--json")
    args = ap.parse_args()
    out = tempfile.mkdtemp(prefix="planes_bench_")
    cmd = [args.apron, "run", args.case, "--set", f"output.dir={out}",
           "--set", f"planes.input.scene={args.scene}",
           "--set", f"planes.input.points={int(args.points)}", "--set", f"planes.repeat={args.repeat}",
           "--set", "planes.point_output=false"]
    for s in args.set:
        cmd += ["--set", s]
    if args.ranks > 1 or os.environ.get("APRON_BENCH_MPIRUN"):
        cmd = [args.mpirun, "--allow-run-as-root", "--oversubscribe", "-n", str(args.ranks)] + cmd
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        sys.exit(proc.returncode)
    with open(os.path.join(out, "run_report.json")) as f:
        report = json.load(f)
    planes = find_planes(report)
    reps = planes["stage_seconds_per_repetition"]
    timed = reps[1:] if len(reps) > 1 else reps
    medians = {k: statistics.median(r[k] for r in timed) for k in timed[0]}
    truth = planes.get("ground_truth", {})
    result = {
        "command": " ".join(cmd),
        "points": int(args.points), "ranks": args.ranks, "scene": args.scene,
        "repetitions": len(reps), "median_of": len(timed),
        "stage_ms_median": {k: 1e3 * v for k, v in medians.items()},
        "total_ms_all": [1e3 * r["total"] for r in reps],
        "planes": len(planes["detected"]), "clusters": planes["clusters"], "votes": planes["votes"],
        "f1": truth.get("f1"), "precision": truth.get("precision"), "recall": truth.get("recall"),
        "max_normal_error_deg": truth.get("max_normal_error_deg"),
        "device": report.get("device", report.get("runtime", {})),
    }
    stages = " ".join(f"{k} {v:.2f}" for k, v in result["stage_ms_median"].items() if k != "total")
    print(f"{args.scene} {int(args.points)} points, {args.ranks} rank(s): median {result['stage_ms_median']['total']:.2f} ms "
          f"of {len(timed)} ({stages}); {result['planes']} planes, F1 {result['f1']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
