#!/usr/bin/env python3
"""compare_meshdist_runs.py DIR...: the meshdist run reports of the same case on different rank
counts must agree: maxima, their sample indices, closest points and histograms exactly; float64
sums, means and RMS to 1e-12 relative."""
import json
import sys

EXACT = ["samples", "vertex_samples", "area_samples", "hausdorff", "max_sample_index",
         "max_sample", "closest_point", "closest_triangle", "histogram"]
SUMS = ["sum", "sum_squares", "mean", "rms", "mean_squared"]


def load(directory):
    with open(directory + "/run_report.json") as f:
        return json.load(f)


def main(dirs):
    reports = [load(d) for d in dirs]
    reference, failures = reports[0]["meshdist"], []
    print("ranks:", [r["ranks"] for r in reports])
    for d, report in zip(dirs[1:], reports[1:]):
        md = report["meshdist"]
        for name, ref in reference["directions"].items():
            got = md["directions"][name]
            for key in EXACT:
                if got[key] != ref[key]:
                    failures.append(f"{d}: {name}.{key} = {got[key]}, expected {ref[key]} exactly")
            for key in SUMS:
                scale = max(abs(ref[key]), 1e-300)
                if abs(got[key] - ref[key]) > 1e-12 * scale:
                    failures.append(f"{d}: {name}.{key} = {got[key]!r}, expected {ref[key]!r} "
                                    "within 1e-12 relative")
        if md["symmetric"]["hausdorff"] != reference["symmetric"]["hausdorff"]:
            failures.append(f"{d}: symmetric Hausdorff differs")
    for name, ref in reference["directions"].items():
        print(f"{name}: hausdorff {ref['hausdorff']!r} at sample {ref['max_sample_index']}, "
              f"mean {ref['mean']!r}, rms {ref['rms']!r}")
    if failures:
        print("\n".join(failures))
        return 1
    print(f"{len(dirs)} runs agree")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
