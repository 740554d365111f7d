#!/usr/bin/env python3
"""Compares the surge front of two runs of one case at the diagnostics steps both have (most of
the shorter run's, at least 10; its last row, at its end time, may be its own): the largest
relative difference must be within the tolerance.

usage: compare_surge_front.py REFERENCE_DIR OTHER_DIR [--tolerance 0.01]"""
import argparse
import csv
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("reference")
    p.add_argument("other")
    p.add_argument("--tolerance", type=float, default=0.01)
    a = p.parse_args()
    ref = list(csv.DictReader(open(a.reference + "/diagnostics.csv")))
    other = list(csv.DictReader(open(a.other + "/diagnostics.csv")))
    by_step = {r["step"]: r for r in ref}
    pairs = [(by_step[o["step"]], o) for o in other if o["step"] in by_step]
    if len(pairs) < 10 or len(pairs) < 0.9 * min(len(ref), len(other)):
        sys.exit("%d common diagnostics steps of %d and %d rows: not the same case"
                 % (len(pairs), len(ref), len(other)))
    worst = max(abs(float(o["surge_front"]) / float(r["surge_front"]) - 1) for r, o in pairs)
    print("%d rows; largest relative difference of the surge front: %.5f (tolerance %g)"
          % (len(pairs), worst, a.tolerance))
    sys.exit(0 if worst <= a.tolerance else 1)


if __name__ == "__main__":
    main()
