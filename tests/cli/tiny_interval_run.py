#!/usr/bin/env python3
"""tiny_interval_run.py {output|checkpoint} --apron EXE --case CASE.yaml --out DIR [--mpiexec ...]
[-- EXTRA ARGS]: a case whose output.every or checkpoint.every_time is 1e-20, far below dt
(issue 19: `next += every` never passed t and the run hung at its first output), runs to its end
on 2 ranks within the timeout, exit status 0, and writes once per step, no more:
  output      particles_<step>.h5 for steps 0..N and the series lists each once;
  checkpoint  the run report counts one checkpoint per step (N), the checkpoint folder keeps the
              newest, the last at step N, and it verifies.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys

TIMEOUT = 150


def check(ok, message):
    print(("ok    " if ok else "FAIL  ") + message)
    if not ok:
        sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("kind", choices=["output", "checkpoint"])
    p.add_argument("--apron", required=True)
    p.add_argument("--case", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--mpiexec", default="mpirun --oversubscribe")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = p.parse_args(argv[:cut])
    args.extra = argv[cut + 1:]
    shutil.rmtree(args.out, ignore_errors=True)
    command = args.mpiexec.split() + ["-n", "2", args.apron, "run", args.case,
                                      "--set", f"output.dir={args.out}", *args.extra]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, start_new_session=True) as run:
        try:
            output, _ = run.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            check(False, f"the run ends within {TIMEOUT} s (it hangs)")
    print(output[-2000:])
    check(run.returncode == 0, f"exit status {run.returncode}, expected 0")
    with open(f"{args.out}/run_report.json") as f:
        report = json.load(f)
    steps = report["steps"]
    check(steps > 10, f"{steps} steps run")
    if args.kind == "output":
        files = sorted(n for n in os.listdir(args.out) if re.fullmatch(r"particles_\d+\.h5", n))
        want = [f"particles_{s:06d}.h5" for s in range(steps + 1)]
        check(files == want, f"one particle file per step, 0..{steps}: {len(files)} files")
        with open(f"{args.out}/particles.xmf") as f:
            listed = f.read().count('<Grid Name="particles_')
        check(listed == steps + 1, f"the series lists {listed} steps, expected {steps + 1}")
    else:
        count = report["checkpoints"]["count"]
        check(count == steps, f"{count} checkpoints written, one per step ({steps})")
        kept = sorted(os.listdir(f"{args.out}/checkpoints"))
        check(kept and kept[-1] == f"checkpoint_{steps:09d}.h5" and len(kept) <= 3,
              f"the newest kept, the last at step {steps}: {kept}")
        verify = subprocess.run([args.apron, "inspect", f"{args.out}/checkpoints/{kept[-1]}",
                                 "--verify"], capture_output=True, text=True, timeout=60)
        check(verify.returncode == 0, f"the last checkpoint verifies (status {verify.returncode})")


if __name__ == "__main__":
    main()
