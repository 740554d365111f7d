#!/usr/bin/env python3
"""Checkpoint write and read bandwidth, and the cost of checkpointing in a run.

usage: checkpoint_bandwidth.py --apron PATH [--particles 10e6] [--steps 400] [--every 100]
                               [--repeat 3] [--dir DIR] [--json OUT.json]

For each particle count: a run of `steps` steps of inputs/dam_break_large.yaml without
checkpoints and one writing a checkpoint every `every` steps (and at the end); the write bandwidth
is checkpoint bytes over the background write's time (run report: checkpoints.write_seconds),
the overhead the difference in step-loop time. Then a restart from the last checkpoint gives the read bandwidth (the "checkpoint
read" phase: read and verify the arrays). The reference is a dd-style sequential write of the
same number of random bytes to the same folder with fdatasync (median of 3). Medians of `repeat`
runs.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import ROOT, sph_spacing as spacing_for  # noqa: E402

CASE = os.path.join(ROOT, "inputs", "dam_break_large.yaml")


def run(apron, particles, steps, out_dir, *extra):
    cmd = [apron, "run", CASE, "--set", f"sph.spacing={spacing_for(particles):.9g}",
           "--set", f"time.max_steps={steps}", "--set", "output.every=0",
           "--set", f"output.diagnostics_every={steps}", "--set", f"output.dir={out_dir}",
           "--set", "output.progress_every=1000", *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out_dir, "run_report.json")) as f:
        return json.load(f)


def dd_bandwidth(folder, nbytes, repeat=3):
    """dd-style sequential write of `nbytes` to `folder` in 64 MiB blocks, then fdatasync: the
    median of `repeat`. The blocks are random bytes: some virtual disks store zeros (dd's usual
    /dev/zero input) faster than data."""
    block = os.urandom(64 << 20)
    target = os.path.join(folder, "dd.bin")
    rates = []
    for _ in range(repeat):
        start = time.perf_counter()
        with open(target, "wb") as f:
            for _ in range(max(1, nbytes // len(block))):
                f.write(block)
            f.flush()
            os.fdatasync(f.fileno())
        rates.append(max(1, nbytes // len(block)) * len(block) / (time.perf_counter() - start))
        os.remove(target)
    return statistics.median(rates)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--apron", required=True)
    p.add_argument("--particles", type=float, nargs="+", default=[10e6])
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--every", type=int, default=100)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dir", default="bench-checkpoints")
    p.add_argument("--json")
    args = p.parse_args()
    rows = []
    for n in args.particles:
        plain, with_ck, reads, writes, stalls = [], [], [], [], []
        for i in range(args.repeat):
            out = os.path.join(args.dir, f"run{i}")
            shutil.rmtree(out, ignore_errors=True)
            plain.append(run(args.apron, n, args.steps, out, "--set", "checkpoint.at_end=false"))
            shutil.rmtree(out, ignore_errors=True)
            r = run(args.apron, n, args.steps, out, "--set", f"checkpoint.every_steps={args.every}",
                    "--set", "checkpoint.keep=1")
            with_ck.append(r)
            latest = sorted(os.listdir(os.path.join(out, "checkpoints")))[-1]
            nbytes = os.path.getsize(os.path.join(out, "checkpoints", latest))
            # The rows go to disk on a background thread: its time (pwrite + fdatasync, slowest
            # rank) gives the bandwidth; what the step loop pays shows in the overhead.
            written = r["checkpoints"]
            writes.append(written["bytes"] / written["write_seconds"])
            stalls.append(sum(r["phases"].get(p, {"max_seconds": 0})["max_seconds"]
                              for p in ("checkpoint", "checkpoint wait")) / written["count"])
            back = run(args.apron, n, args.steps + 1, out, "--restart", "latest",
                       "--set", "checkpoint.at_end=false")
            phase = back["phases"].get("checkpoint read", back["phases"]["restart"])
            reads.append(nbytes / phase["max_seconds"])
        disk = dd_bandwidth(args.dir, nbytes)
        base = statistics.median(x["loop_seconds"] for x in plain)
        loaded = statistics.median(x["loop_seconds"] for x in with_ck)
        row = {"fluid_particles": plain[0]["items"], "checkpoint_bytes": nbytes,
               "write_bytes_per_second": statistics.median(writes),
               "read_bytes_per_second": statistics.median(reads), "dd_bytes_per_second": disk,
               "loop_seconds_without": base, "loop_seconds_with": loaded,
               "overhead": loaded / base - 1, "every_steps": args.every, "steps": args.steps,
               "step_loop_seconds_per_checkpoint": statistics.median(stalls),
               "devices": plain[0]["devices"]}
        rows.append(row)
        print(f"{row['fluid_particles']:,d} particles, {nbytes / 1e9:.2f} GB per checkpoint: write "
              f"{row['write_bytes_per_second'] / 1e9:.2f} GB/s, read {row['read_bytes_per_second'] / 1e9:.2f}"
              f" GB/s, dd {disk / 1e9:.2f} GB/s; every {args.every} steps costs "
              f"{100 * row['overhead']:.1f}% of the step loop "
              f"({1e3 * row['step_loop_seconds_per_checkpoint']:.1f} ms on it per checkpoint)",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
