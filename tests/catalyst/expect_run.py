"""Runs a command and checks its exit status and output (stdout and stderr together).

usage: expect_run.py --status N [--contains REGEX ...] [--lacks REGEX ...] -- COMMAND...
Each --contains must match somewhere in the output (Python re, multi-line), no --lacks may.
"""
import argparse
import re
import subprocess
import sys

p = argparse.ArgumentParser()
p.add_argument("--status", type=int, required=True)
p.add_argument("--contains", action="append", default=[])
p.add_argument("--lacks", action="append", default=[])
p.add_argument("command", nargs=argparse.REMAINDER)
args = p.parse_args()
command = args.command[1:] if args.command[:1] == ["--"] else args.command

run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
print(run.stdout)
problems = []
if run.returncode != args.status:
    problems.append(f"exit status {run.returncode}, expected {args.status}")
problems += [f"no match for: {r}" for r in args.contains if not re.search(r, run.stdout, re.M)]
problems += [f"unwanted match for: {r}" for r in args.lacks if re.search(r, run.stdout, re.M)]
if problems:
    sys.exit("FAIL: " + "; ".join(problems))
print("ok")
