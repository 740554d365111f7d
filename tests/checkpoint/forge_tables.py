#!/usr/bin/env python3
"""Forged checkpoint tables are refused, for any time-stepping workload.

usage: forge_tables.py --apron EXE --case CASE.yaml --work DIR [--mpiexec "mpirun ..."]
                       [--set KEY=VALUE ...] [--inside-domain TABLE/COLUMN ...] [--counted TABLE ...]

Writes a checkpoint of the case on 2 ranks, then for every table it holds forges one damage at a
time and reseals it (the dataset's checksum and the header's: ckpt_digest), so that only the
checks of the table's declaration can tell:
  - a NaN in the first row of each floating-point column;
  - a position outside the domain (the columns named by --inside-domain);
  - a column one component narrower than declared;
  - a table one row short of the state's count (its last rank's rows; the tables named by
    --counted, whose row count a state scalar holds).
Each restart, on 1 and on 2 ranks, must end with exit status 2 and a message naming the column
(or table) and, for values, the row.
"""
import argparse
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_digest  # noqa: E402

failures = []


def check(ok, message):
    print(("ok   " if ok else "FAIL ") + message)
    if not ok:
        failures.append(message)


def rewrite(f, path, data):
    """Replaces dataset `path` with `data`, keeping its attributes (resealed afterwards)."""
    attrs = dict(f[path].attrs)
    del f[path]
    f[path] = data
    for k, v in attrs.items():
        f[path].attrs[k] = v


def forgeries(good, inside, counted):
    """(label, function(h5py.File) -> dataset to reseal or None, expected message part)."""
    out = []
    with h5py.File(good, "r") as f:
        tables = {t: sorted(f[f"tables/{t}/columns"].keys()) for t in f["tables"].keys()}
        kinds = {(t, c): f[f"tables/{t}/columns/{c}"].dtype.kind for t in tables for c in tables[t]}
        shapes = {(t, c): f[f"tables/{t}/columns/{c}"].shape for t in tables for c in tables[t]}
    for table, columns in tables.items():
        for column in columns:
            path = f"tables/{table}/columns/{column}"
            if kinds[(table, column)] == "f":
                def nan(f, path=path):
                    f[path][0] = np.nan
                    return path
                out.append((f"{table}/{column} NaN", nan, f"column '{column}' of table '{table}', row 0"))
            if f"{table}/{column}" in inside:
                def outside(f, path=path):
                    row = f[path][0]
                    row[0] = 1e6
                    f[path][0] = row
                    return path
                out.append((f"{table}/{column} outside the domain", outside,
                            f"column '{column}' of table '{table}', row 0: a position outside"))
            shape = shapes[(table, column)]
            if len(shape) == 2 and shape[1] > 1:
                def narrow(f, path=path):
                    rewrite(f, path, f[path][:, :-1])
                    return path
                out.append((f"{table}/{column} narrower", narrow,
                            f"column '{column}' of table '{table}' holds"))

        def short(f, table=table):
            t = f[f"tables/{table}"]
            counts = t["rank_rows"][...]
            last = int(np.nonzero(counts)[0][-1])
            counts[last] -= 1
            t["rank_rows"][...] = counts
            t.attrs["rows"] = int(t.attrs["rows"]) - 1
            for column in t["columns"].keys():
                path = f"tables/{table}/columns/{column}"
                rewrite(f, path, f[path][:-1])
                f[path].attrs["checksum"] = np.uint64(ckpt_digest.dataset_checksum(f[path]))
            return None
        if table in counted:
            out.append((f"{table} one row short", short, f"table '{table}'"))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--apron", required=True)
    p.add_argument("--case", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--mpiexec", default="mpirun --oversubscribe")
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--inside-domain", nargs="*", default=[])
    p.add_argument("--counted", nargs="*", default=[])
    a = p.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    sets = [x for kv in a.set for x in ("--set", kv)] + ["--set", "output.progress_every=100"]

    def run(ranks, out, *extra):
        cmd = a.mpiexec.split() + ["-n", str(ranks), a.apron, "run", a.case, *sets,
                                   "--set", f"output.dir={out}", *extra]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)

    good_dir = f"{a.work}/good"
    done = run(2, good_dir, "--set", "checkpoint.at_end=true")
    if done.returncode != 0:
        print(done.stdout + done.stderr)
        sys.exit(1)
    good = sorted(os.listdir(f"{good_dir}/checkpoints"))[-1]
    good = f"{good_dir}/checkpoints/{good}"
    for k, (label, forge, expected) in enumerate(forgeries(good, set(a.inside_domain), set(a.counted))):
        forged_dir = f"{a.work}/forged_{k}"
        os.makedirs(f"{forged_dir}/checkpoints")
        forged = f"{forged_dir}/checkpoints/checkpoint_000000001.h5"
        ckpt_digest.forge(good, forged, forge)
        for ranks in (1, 2):
            done = run(ranks, forged_dir, "--restart", forged)
            text = done.stdout + done.stderr
            check(done.returncode == 2 and expected in text,
                  f"{label}, restart on {ranks} rank(s): exit {done.returncode}"
                  + ("" if expected in text else f", no '{expected}' in:\n{text[-600:]}"))
    print("forged tables:", "ok" if not failures else f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
