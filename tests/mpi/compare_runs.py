#!/usr/bin/env python3
"""Compares the final diagnostics of runs of one case on different rank counts.

usage: compare_runs.py REFERENCE_DIR OTHER_DIR [OTHER_DIR ...]
Each DIR holds a run_report.json. What must agree depends on the workload (CHECKS): counts that
no decomposition may change exactly; the surge front and kinetic energy within a relative
tolerance of the reference (decomposition changes only the order of floating-point sums, so runs
differ by round-off growth, not by physics).
"""
import json
import sys


def exact():
    return lambda got, want: got == want


def within(rel):
    return lambda got, want: abs(got / want - 1) <= rel


def zero():
    return lambda got, want: got == 0


CHECKS = {
    "sph": [("particles", exact()), ("mass", exact()), ("surge_front", within(0.005)),
            ("kinetic", within(0.01)), ("outside_tank", zero())],
    "flip": [("particles", exact()), ("surge_front", within(0.01)),
             ("kinetic", within(0.01))],
}


def final(run_dir):
    with open(f"{run_dir}/run_report.json") as f:
        report = json.load(f)
    workload = report["workload"]
    return workload, report["ranks"], report[workload]["final_diagnostics"]


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    workload, ref_ranks, ref = final(argv[1])
    failures = []
    for run_dir in argv[2:]:
        _, ranks, d = final(run_dir)
        for name, check in CHECKS[workload]:
            ok = check(d[name], ref[name])
            status = "ok" if ok else "FAIL"
            print(f"{ranks} ranks vs {ref_ranks}: {name:15s} {d[name]!r:>24} vs {ref[name]!r:>24}  "
                  f"{status}")
            if not ok:
                failures.append(f"{run_dir}: {name}")
    if failures:
        print("failed:", ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
