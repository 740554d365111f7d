#!/usr/bin/env python3
"""Dam-break surge-front comparison against experiment (pure stdlib, no numpy).

Dimensionless variables follow Martin & Moyce (n^2 = 2, column a x 2a):
    T = t * sqrt(2 g / a),   Z = x / a
with x the front distance from the left inner wall. See the header of
inputs/validation/dam_break_surge_front.csv for the data provenance.

CLI: surge_front.py DIAGNOSTICS.csv [--a A] [--g 9.81] [--source S]
         [--t-min 1.0] [--t-max 2.5] [--t-shift 0] [--tolerance 0.10]
Prints the per-point table; exits 1 if the max relative error exceeds the
tolerance, 2 on bad input.
"""
import argparse
import bisect
import csv
import math
import os
import re
import sys

EXP_CSV = os.path.normpath(os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "..", "..", "inputs", "validation", "dam_break_surge_front.csv"))

# Matches "a=0.146" / "a = 0.146" anywhere in a '#' comment line.
_A_RE = re.compile(r"(?:^|[\s,;])a\s*=\s*([-+0-9.eE]+)")


def _data_lines(f, comments):
    """Yield non-comment lines; collect '#' lines into `comments`."""
    for line in f:
        if line.lstrip().startswith("#"):
            comments.append(line.lstrip()[1:].strip())
        elif line.strip():
            yield line


def load_experiment(path=EXP_CSV):
    """Return {source: [(T, Z), ...]} sorted by T."""
    data = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(_data_lines(f, [])):
            data.setdefault(row["source"].strip(), []).append(
                (float(row["T"]), float(row["Z"])))
    return {k: sorted(v) for k, v in data.items()}


def read_diagnostics(path):
    """Return (time[], surge_front[], a or None) from an apron diagnostics CSV.

    `a` comes from a '# a=...' comment line if the file has one.
    """
    comments, times, fronts = [], [], []
    with open(path, newline="") as f:
        reader = csv.DictReader(_data_lines(f, comments))
        # Tolerate "time, surge_front" style headers with padding.
        reader.fieldnames = [n.strip() for n in reader.fieldnames or []]
        for col in ("time", "surge_front"):
            if col not in reader.fieldnames:
                raise ValueError(f"{path}: missing column '{col}'")
        for row in reader:
            times.append(float(row["time"]))
            fronts.append(float(row["surge_front"]))
    a = None
    for c in comments:
        m = _A_RE.search(c)
        if m:
            a = float(m.group(1))
    order = sorted(range(len(times)), key=times.__getitem__)
    return [times[i] for i in order], [fronts[i] for i in order], a


def dimensionless(times, fronts, a, g=9.81, t_shift=0.0):
    """Convert (t [s], x [m]) to (T, Z); t_shift is added to T.

    t_shift exists because the experiments' gate is not removed instantly;
    e.g. the Lethe benchmark compares with t_shift = 0.175.
    """
    if not a or a <= 0:
        raise ValueError("column width a unknown: pass --a or add '# a=' to the CSV")
    s = math.sqrt(2.0 * g / a)
    return [t * s + t_shift for t in times], [x / a for x in fronts]


def _interp(xs, ys, x):
    """Linear interpolation on ascending xs; None outside the range."""
    if not xs or x < xs[0] or x > xs[-1]:
        return None
    i = bisect.bisect_left(xs, x)
    if xs[i] == x:
        return ys[i]
    f = (x - xs[i - 1]) / (xs[i] - xs[i - 1])
    return ys[i - 1] + f * (ys[i] - ys[i - 1])


def surge_front_error(diag_csv, a, g, T_range=(1.0, 2.5),
                      source="koshizuka_oka_1996", exp_csv=EXP_CSV,
                      t_shift=0.0):
    """Max relative error |Z_sim - Z_exp| / Z_exp over experimental T in T_range.

    a=None reads the column width from the CSV's '# a=' comment.
    Returns (max_rel_err, [(T, Z_exp, Z_sim, rel_err), ...]).
    Raises ValueError if the run does not cover an experimental point in range,
    so a run that stopped early cannot pass.
    """
    times, fronts, a_file = read_diagnostics(diag_csv)
    T, Z = dimensionless(times, fronts, a if a else a_file, g, t_shift)
    exp = load_experiment(exp_csv)
    if source not in exp:
        raise ValueError(f"unknown source '{source}'; have {sorted(exp)}")
    table = []
    for te, ze in exp[source]:
        if not T_range[0] <= te <= T_range[1]:
            continue
        zs = _interp(T, Z, te)
        if zs is None:
            span = f"[{T[0]:.3f}, {T[-1]:.3f}]" if T else "(empty)"
            raise ValueError(f"{diag_csv}: simulated T range {span} "
                             f"does not cover experimental T={te}")
        table.append((te, ze, zs, abs(zs - ze) / ze))
    if not table:
        raise ValueError(f"no {source} points in T range {T_range}")
    return max(r[3] for r in table), table


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("diag_csv")
    p.add_argument("--a", type=float, help="column width [m] (default: '# a=' in CSV)")
    p.add_argument("--g", type=float, default=9.81)
    p.add_argument("--source", default="koshizuka_oka_1996")
    p.add_argument("--t-min", type=float, default=1.0)
    p.add_argument("--t-max", type=float, default=2.5)
    p.add_argument("--t-shift", type=float, default=0.0,
                   help="added to simulated T (gate-release correction)")
    p.add_argument("--tolerance", type=float, default=0.10)
    p.add_argument("--exp", default=EXP_CSV, help="experimental CSV")
    args = p.parse_args(argv)
    try:
        err, table = surge_front_error(args.diag_csv, args.a, args.g,
                                       (args.t_min, args.t_max), args.source,
                                       args.exp, args.t_shift)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{'T':>7} {'Z_exp':>7} {'Z_sim':>7} {'rel_err':>8}   [{args.source}]")
    for te, ze, zs, r in table:
        print(f"{te:7.3f} {ze:7.3f} {zs:7.3f} {r:8.4f}")
    ok = err <= args.tolerance
    print(f"max relative error {err:.4f} (tolerance {args.tolerance}): "
          f"{'PASS' if ok else 'FAIL'}")
    leaks = leaked_rows(args.diag_csv)
    if leaks is not None:
        rows, bad = leaks
        print(f"outside_tank: {'0 in all' if not bad else f'> 0 in {len(bad)} of'} {rows} rows "
              f"(the whole run){'' if not bad else ': first at t = ' + bad[0]}")
        ok = ok and not bad
    return 0 if ok else 1


def leaked_rows(path):
    """(rows, times of rows with particles outside the tank) over the whole run; None without
    the column. No particle may leave a closed tank at any time (issue 19)."""
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    if not rows or "outside_tank" not in rows[0]:
        return None
    return len(rows), [r["time"] for r in rows if int(r["outside_tank"]) != 0]


if __name__ == "__main__":
    sys.exit(main())
