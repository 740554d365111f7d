#!/usr/bin/env python3
"""A checksum-valid checkpoint whose carried density is not positive is refused.

usage: forge_density.py --apron EXE --case CASE.yaml --run DIR

With sph.density: continuity the fourth value of each particle's velocity is its density. The
newest checkpoint in DIR/checkpoints (a continuity run of CASE) is copied, the first row's
density set to -1 and to 0, and resealed; a restart from it must end with exit status 2 and a
message naming the column and the row (the declared table's check, engine/state_tables).
"""
import argparse
import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "checkpoint"))
import ckpt_digest  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--apron", required=True)
    p.add_argument("--case", required=True)
    p.add_argument("--run", required=True)
    a = p.parse_args()
    # The newest: an earlier run in the same folder may have left others.
    latest = max(glob.glob(os.path.join(a.run, "checkpoints", "checkpoint_*.h5")),
                 key=os.path.getmtime)
    failures = 0
    for density in (-1.0, 0.0):
        forged = os.path.join(a.run, f"forged_density_{density:g}.h5")

        def change(f, density=density):
            name = "tables/particles/columns/velocity"
            row = f[name][0]
            row[3] = density
            f[name][0] = row
            return name
        ckpt_digest.forge(latest, forged, change)
        done = subprocess.run([a.apron, "run", a.case, "--restart", forged, "--set",
                               f"output.dir={a.run}/forged_out"],
                              capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, OMP_NUM_THREADS="1"))
        said = done.stdout + done.stderr
        ok = (done.returncode == 2 and "column 'velocity' of table 'particles', row 0" in said
              and "not positive" in said)
        print(("ok   " if ok else "FAIL ") + f"density {density:g}: exit {done.returncode}")
        if not ok:
            print(said[-2000:])
            failures += 1
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
