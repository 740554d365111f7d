#!/usr/bin/env python3
"""Compares the final diagnostics of runs of one case on different rank counts.

usage: compare_runs.py REFERENCE_DIR OTHER_DIR [OTHER_DIR ...]
Each DIR holds a run_report.json. Particle count and mass must match exactly; the surge front
within 0.5% and the kinetic energy within 1% of the reference (decomposition changes only the
order of floating-point sums, so runs differ by round-off growth, not by physics).
"""
import json
import sys


def final(run_dir):
    with open(f"{run_dir}/run_report.json") as f:
        report = json.load(f)
    return report["ranks"], report["sph"]["final_diagnostics"]


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    ref_ranks, ref = final(argv[1])
    failures = []
    for run_dir in argv[2:]:
        ranks, d = final(run_dir)
        checks = [
            ("particles", d["particles"] == ref["particles"], d["particles"], ref["particles"]),
            ("mass", d["mass"] == ref["mass"], d["mass"], ref["mass"]),
            ("surge_front", abs(d["surge_front"] / ref["surge_front"] - 1) <= 0.005,
             d["surge_front"], ref["surge_front"]),
            ("kinetic_energy", abs(d["kinetic_energy"] / ref["kinetic_energy"] - 1) <= 0.01,
             d["kinetic_energy"], ref["kinetic_energy"]),
            ("outside_tank", d["outside_tank"] == 0, d["outside_tank"], 0),
        ]
        for name, ok, got, want in checks:
            status = "ok" if ok else "FAIL"
            print(f"{ranks} ranks vs {ref_ranks}: {name:15s} {got!r:>24} vs {want!r:>24}  {status}")
            if not ok:
                failures.append(f"{run_dir}: {name}")
    if failures:
        print("failed:", ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
