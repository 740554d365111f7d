#!/usr/bin/env python3
"""A workload registered from the test tree runs through `apron run` (issue 14).

check_toy.py MPIRUN_PREFIX... -- APRON_TOY APRON CASE OUT_DIR
Runs the toy workload on 1 and 2 ranks and checks the run report; checks that `workloads`
lists it, that its schema refuses an unknown key, and that plain apron does not know it.
"""
import json
import os
import subprocess
import sys

sep = sys.argv.index("--")
mpirun = sys.argv[1:sep]
toy, apron, case, out = sys.argv[sep + 1:]
failures = []


def check(ok, message):
    if not ok:
        failures.append(message)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


for ranks in (1, 2):
    d = os.path.join(out, f"toy_np{ranks}")
    p = run(mpirun + ["-n", str(ranks), toy, "run", case, "--set", f"output.dir={d}"])
    check(p.returncode == 0, f"{ranks} rank(s): exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    if p.returncode == 0:
        rep = json.load(open(os.path.join(d, "run_report.json")))
        check(rep["workload"] == "toy" and rep["item"] == "widget", f"report names {rep['item']}")
        check(rep["items"] == 1000 and rep["steps"] == 10, f"items {rep['items']} steps {rep['steps']}")
        check(abs(rep["toy"]["total"] - 1000 * 10 * 0.5) < 1e-9, f"total {rep['toy']['total']}")
        check(rep["item_steps_per_second"] > 0, "no item_steps_per_second")

p = run([toy, "workloads"])
check(p.returncode == 0 and "toy: test-only" in p.stdout and "sph:" in p.stdout,
      f"workloads listing:\n{p.stdout}")
p = run([toy, "validate", case, "--set", "toy.itemz=3"])
check(p.returncode == 2 and "unknown key 'toy.itemz'" in p.stderr, f"unknown key:\n{p.stderr}")
p = run([toy, "validate", case, "--json"])
check(p.returncode == 0 and json.loads(p.stdout)["weak_scaling"] ==
      {"key": "toy.items", "exponent": 1, "value": "1000"}, f"validate --json:\n{p.stdout}")
p = run([apron, "validate", case])
check(p.returncode == 2 and "workload" in p.stderr and "sph" in p.stderr,
      f"plain apron accepted the toy workload:\n{p.stderr}")

for f in failures:
    print("FAIL:", f)
print("toy workload:", "ok" if not failures else f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
