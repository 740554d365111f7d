#!/usr/bin/env python3
"""The table of bench/gpu_cloth_scaling.sh: per group of runs (small_N, weak1_N, weak2_N,
strong2_N), the median steady vertex-steps/s of the run reports, the steps per second, device
bytes per vertex and halo transport; then weak-scaling efficiency (2-GPU rate / twice the 1-GPU
rate) and the strong-scaling speed-up.

    python3 bench/cloth_scaling.py OUT_DIR
"""
import argparse
import json
import pathlib
import re
import statistics


def groups(out):
    found = {}
    for report in sorted(pathlib.Path(out).glob("*/run_report.json")):
        name = re.sub(r"_\d+$", "", report.parent.name)
        found.setdefault(name, []).append(json.loads(report.read_text()))
    return found


def summary(reports):
    rates = [r["steady_item_steps_per_second"] for r in reports]
    first = reports[0]
    halo = first["phases"].get("halo", {}).get("max_seconds", 0.0)
    return {
        "runs": len(reports),
        "ranks": first["ranks"],
        "vertices": first["cloth"]["vertices"],
        "rate": statistics.median(rates),
        "low": min(rates),
        "high": max(rates),
        "bytes": first["cloth"]["device_bytes_per_vertex"],
        "transport": first["cloth"]["halo_transport"],
        "halo_ms": 1e3 * halo / max(first["steps"], 1),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    args = parser.parse_args()
    table = {name: summary(reports) for name, reports in groups(args.out).items()}
    print("| runs | ranks | vertices | vertex-steps/s (median, range) | steps/s | B/vertex | halo |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, s in table.items():
        print(f"| {name} ({s['runs']}) | {s['ranks']} | {s['vertices']:,} | "
              f"{s['rate']:.4g} ({s['low']:.4g}-{s['high']:.4g}) | "
              f"{s['rate'] / s['vertices']:.0f} | {s['bytes']:.0f} | "
              f"{s['transport']}, {s['halo_ms']:.3f} ms/step |")
    if "weak1" in table and "weak2" in table:
        efficiency = table["weak2"]["rate"] / (2 * table["weak1"]["rate"])
        print(f"weak scaling, 2 GPUs: efficiency {100 * efficiency:.1f}%")
    if "weak1" in table and "strong2" in table:
        print(f"strong scaling, 2 GPUs: speed-up {table['strong2']['rate'] / table['weak1']['rate']:.2f}")


if __name__ == "__main__":
    main()
