#!/usr/bin/env python3
"""Mesh-distance benchmark (issue 5): the bunny pair end to end, and samples per second against
large targets.

usage: meshdist_throughput.py --apron PATH [--ranks 1] [--mpirun "mpirun -n"] [--repeat 3]
                              [--samples 1e7] [--subdivide 4 12] [--skip-bunny] [--json OUT.json]

bunny: inputs/meshdist_bunny.yaml (both directions, vertex samples as in the paper), the analysis
  run repeat + 1 times in one process; the first is warm-up, the figure is the median of the
  rest. "End to end excluding parsing": upload of both meshes, grid builds, sampling, searches
  and the reductions over ranks (run_report.json: meshdist.analysis_seconds).
throughput: samples (area-uniform on the simplified bunny) against the full bunny with every edge
  split into k parts (k = 4: 1.11M triangles, k = 12: 10.0M), direction a -> b only; samples/s =
  samples / (sampling + grid build + search + reduction), median of the repetitions after warm-up.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
BUNNY_CASE = os.path.join(ROOT, "inputs", "meshdist_bunny.yaml")


def run(args, extra, out_dir):
    cmd = (args.mpirun.split() + [str(args.ranks)]) if args.ranks > 1 else []
    cmd += [args.apron, "run", BUNNY_CASE, "--set", f"output.dir={out_dir}",
            "--set", "meshdist.per_vertex_output=false", "--set", f"meshdist.repeat={args.repeat + 1}"]
    for e in extra:
        cmd += ["--set", e]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    with open(os.path.join(out_dir, "run_report.json")) as f:
        return json.load(f)


def bunny(args):
    with tempfile.TemporaryDirectory() as out:
        r = run(args, [], out)
    md = r["meshdist"]
    times = md["analysis_seconds"][1:]
    row = {"case": "bunny pair", "ranks": r["ranks"], "devices": r["devices"],
           "ms": 1e3 * statistics.median(times), "runs_ms": [1e3 * t for t in times],
           "samples": sum(d["samples"] for d in md["directions"].values())}
    for name, d in md["directions"].items():
        row[name] = {k: d[k] for k in ("samples", "hausdorff", "mean", "rms", "mean_squared")}
    row["symmetric"] = md["symmetric"]
    print(f"bunny pair, {r['ranks']} rank(s): {row['ms']:.3f} ms end to end excluding parsing "
          f"(runs {', '.join(f'{t:.3f}' for t in row['runs_ms'])})")
    return row


def throughput(args, k):
    extra = ["meshdist.a.file=inputs/meshes/stanford-bunny-low.ply",
             "meshdist.b.file=inputs/meshes/stanford-bunny.ply",
             f"meshdist.b.subdivide={k}", "meshdist.directions=a_to_b",
             "meshdist.sampling.vertices=false", f"meshdist.sampling.count={int(args.samples)}"]
    # Each repetition measures again: the direction's seconds are those of the last one, so run
    # the process `repeat` times with one warm-up analysis each and keep the last.
    rates, seconds = [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as out:
            r = run(args, extra + ["meshdist.repeat=2"], out)
        d = r["meshdist"]["directions"]["a_to_b"]
        rates.append(d["samples_per_second"])
        seconds.append(d["seconds"])
    triangles = r["meshdist"]["mesh_b"]["triangles"]
    row = {"case": f"bunny x{k * k} ({triangles} triangles)", "ranks": r["ranks"],
           "triangles": triangles, "samples": d["samples"],
           "samples_per_second": statistics.median(rates), "runs": rates,
           "seconds": statistics.median(seconds), "grid": d["grid"]}
    print(f"{triangles:>10} triangles, {d['samples']} samples, {r['ranks']} rank(s): "
          f"{row['samples_per_second']:.3g} samples/s ({row['seconds'] * 1e3:.1f} ms; runs "
          f"{', '.join(f'{x:.3g}' for x in rates)})")
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--apron", required=True)
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--mpirun", default="mpirun --oversubscribe --allow-run-as-root -n")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--samples", type=float, default=1e7)
    p.add_argument("--subdivide", type=int, nargs="*", default=[4, 12])
    p.add_argument("--skip-bunny", action="store_true")
    p.add_argument("--json")
    args = p.parse_args()
    args.apron = os.path.abspath(args.apron)
    rows = [] if args.skip_bunny else [bunny(args)]
    rows += [throughput(args, k) for k in args.subdivide]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
