#!/usr/bin/env python3
"""The same planes from runs on different rank counts (issue 16): planes.csv of each run folder
against the first's: the same count, and each plane matched by one with a normal within 0.5
degree and an offset within 1% of the scene's diagonal (read from the run report)."""
import csv
import json
import math
import sys


def planes(folder):
    with open(f"{folder}/planes.csv") as f:
        return [({k: float(v) for k, v in row.items()}) for row in csv.DictReader(f)]


def scene_size(folder):
    with open(f"{folder}/run_report.json") as f:
        report = json.load(f)
    found = []

    def walk(node):
        if isinstance(node, dict):
            if "ground_truth" in node:
                found.append(node["ground_truth"]["scene_size"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(report)
    return found[0] if found else 1.0


def main(folders):
    reference = planes(folders[0])
    size = scene_size(folders[0])
    failed = False
    for folder in folders[1:]:
        other = planes(folder)
        if len(other) != len(reference):
            print(f"{folder}: {len(other)} planes, {folders[0]}: {len(reference)}")
            failed = True
            continue
        worst = 0.0
        for p in reference:
            best = 180.0
            for q in other:
                c = p["nx"] * q["nx"] + p["ny"] * q["ny"] + p["nz"] * q["nz"]
                offset = q["offset"] if c >= 0 else -q["offset"]
                if abs(p["offset"] - offset) > 0.01 * size:
                    continue
                best = min(best, math.degrees(math.acos(min(1.0, abs(c)))))
            worst = max(worst, best)
        print(f"{folder}: {len(other)} planes, largest normal difference {worst:.4f} deg")
        failed = failed or worst > 0.5
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
