"""What the SPH checks read of a run's outputs."""
import csv
import os
import re


def series_files(run):
    """The particle files the run's particles.xmf lists (a folder may hold an earlier run's)."""
    with open(os.path.join(run, "particles.xmf")) as f:
        names = sorted(set(re.findall(r"particles_\d+\.h5", f.read())))
    return [os.path.join(run, n) for n in names]


def diagnostics_rows(run):
    """The rows of the run's diagnostics.csv, as dicts by column name."""
    with open(os.path.join(run, "diagnostics.csv"), newline="") as f:
        return list(csv.DictReader(f))


def rows_with_particles_outside(rows):
    """The steps of the diagnostics rows that count particles outside the tank or behind a wall."""
    return [r["step"] for r in rows if int(float(r["outside_tank"])) != 0]
