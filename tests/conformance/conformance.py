#!/usr/bin/env python3
"""The conformance suite: what every registered workload must do, one check per ctest.

usage: conformance.py CHECK --apron EXE [--spec SPEC.yaml] [--case CASE.yaml] --work DIR
                      [--mpiexec "mpirun ..."] [--pvpython pvpython]

A workload states its small case in tests/<workload>/conformance.yaml (the spec, below); --case
runs the checks on another case of it, with the spec's `set` (without --spec, the spec of the
case's `workload:`).
Checks (runs in DIR/<name>; a check reuses the runs of the one before it, as ctest's fixtures
order them, and makes them itself when they are missing):
  ranks          the case on each rank count (np1, np2, np4), compared with the first: the
                 spec's columns of diagnostics.csv (every row) and values of run_report.json
                 within their tolerances, or its script's comparison (one-shot workloads);
                 `bitwise: true`: diagnostics.csv identical and the last output's arrays equal
                 by id.
  restart        on each rank count, `steps` straight against `checkpoint.step` steps and a
                 checkpoint, then `--restart latest` to `steps`: diagnostics.csv identical, the
                 last output's arrays (by id) and the compared report values equal bit for bit,
                 the continued series' XDMF valid.
  restart_ranks  the 4-rank checkpoint continued on 2 and 1 ranks: against the 4-rank straight
                 run within the rank tolerances (bit for bit where the workload promises it).
  unknown_key    a key that does not exist, in the workload's own section and at the top level:
                 exit status 2, a message naming the key, no output folder.
  outputs        every .xmf the runs wrote parsed; every HDF DataItem's dataset exists with the
                 DataItem's shape and type (a hyperslab within it); the spec's series all there.
  catalyst       a run with the built-in Catalyst writer, its extracts checked by the spec's
                 pvpython scripts (tests/catalyst, ...).
  forged         a checkpoint whose every table is forged in turn and resealed (a NaN, a
                 position outside the domain, a narrower column, a row short): each restart on
                 1 and 2 ranks refused with exit 2 naming table, column and row
                 (checkpoint/forge_tables.py).
Exit status 0: passed, 1: failed, 77 (ctest's SKIP_RETURN_CODE): not run, because the spec turns
the feature off or the build has no Catalyst.

Spec keys: workload; case (from the repository root); set ({key: value} for --set); ranks
([1, 2, 4]); one_shot (true: no time steps, no restart checks); steps (time.max_steps of a
run); section (the workload's own section, default its name); checkpoint ({step: N}, or false:
no checkpoints yet); agreement ({diagnostics: {column: tolerance}, report: {dotted.path:
tolerance}, script: a comparison under tests/ with main(folders), bitwise: true}; a tolerance is
exact, zero, {relative: r} or {absolute: a}); outputs (the XDMF series, or false); catalyst
({ranks, steps, every, checks: [[script under tests/, args...]] with {dir} the extract folder},
or false); forged ({counted: [tables whose row count a state scalar holds], inside_domain:
[table/column positions that must lie in the domain]}, or false).
"""
import argparse
import csv
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import h5py
import numpy as np
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
sys.path[:0] = [os.path.join(TESTS, "mpi"), os.path.join(TESTS, "checkpoint")]
from compare_runs import exact, within, zero  # noqa: E402  (the rank tests' tolerances)
from restart_tests import check  # noqa: E402
SKIP = 77
SPEC_KEYS = {"workload", "case", "set", "ranks", "one_shot", "steps", "section", "checkpoint",
             "agreement", "outputs", "catalyst", "forged"}
NO_CATALYST = "built without ParaView Catalyst"


def skip(why):
    print(f"skipped: {why}")
    sys.exit(SKIP)


def feature(s, name):
    """The spec's part for a feature, or a skip when the spec turns it off."""
    if name == "checkpoint" and s.spec.get("one_shot"):
        skip(f"{s.spec['workload']} is one-shot: no steps to restart")
    if not s.spec.get(name):
        skip(f"the spec says {name}: false")
    return s.spec[name]


def describe(tol):
    return tol if isinstance(tol, str) else " ".join(f"{k} {v}" for k, v in tol.items())


def tolerance(spec):
    """A tolerance of the spec as compare_runs' check (got, want) -> bool."""
    if spec in ("exact", "zero"):
        return exact() if spec == "exact" else zero()
    if "relative" in spec:  # within() divides by the reference: a zero (energy at rest) is exact
        rel = within(spec["relative"])
        return lambda got, want: got == want or (want != 0 and rel(got, want))
    return lambda got, want: abs(got - want) <= spec["absolute"]


class Suite:
    def __init__(self, args):
        case = args.case and os.path.abspath(args.case)
        spec_path = args.spec
        if spec_path is None:
            with open(case) as f:
                spec_path = os.path.join(TESTS, yaml.safe_load(f)["workload"], "conformance.yaml")
        with open(spec_path) as f:
            self.spec = yaml.safe_load(f)
        unknown = set(self.spec) - SPEC_KEYS  # a misspelt feature would be skipped unseen
        if unknown:
            sys.exit(f"FAIL: {spec_path}: unknown key(s) {sorted(unknown)}")
        self.case = case or os.path.join(ROOT, self.spec["case"])
        self.apron, self.mpiexec = os.path.abspath(args.apron), shlex.split(args.mpiexec)
        self.work, self.pvpython = os.path.abspath(args.work), args.pvpython
        # GOMP_SPINCOUNT: apron's own default, given here so that it does not restart itself to
        # apply it (README, "Running"): a second start-up per run.
        self.env = dict(os.environ, OMP_NUM_THREADS="1", GOMP_SPINCOUNT="10000")
        self.ranks = self.spec.get("ranks", [1, 2, 4])
        self.agreement = self.spec.get("agreement", {})
        self.series = self.spec.get("outputs") or []

    def command(self, ranks, out, steps=None, sets=None, restart=False):
        """apron run on `ranks` ranks, or apron validate in one process for ranks 0."""
        values = dict(self.spec.get("set", {}), **(sets or {}), **{"output.dir": out})
        if steps:
            values["time.max_steps"] = steps
        cmd = ([self.apron, "validate"] if ranks == 0 else
               self.mpiexec + ["-n", str(ranks), self.apron, "run"]) + [self.case]
        for key, value in values.items():  # JSON is YAML: lists and strings go through --set
            cmd.append(f"--set={key}={value if isinstance(value, str) else json.dumps(value)}")
        return cmd + (["--restart", "latest"] if restart else [])

    def run(self, ranks, out, steps=None, sets=None, restart=False, expect=0):
        """Runs apron (from the repository root: cases name files relative to it); returns
        (exit status, output)."""
        if not restart:
            shutil.rmtree(out, ignore_errors=True)
        steps = None if self.spec.get("one_shot") else steps or self.spec["steps"]
        start = time.time()
        done = subprocess.run(self.command(ranks, out, steps, sets, restart), cwd=ROOT,
                              env=self.env, capture_output=True, text=True)
        output = done.stdout + done.stderr
        what = f"run on {ranks} rank(s)" if ranks else "validate"
        to = f" to step {steps}" if steps else ""
        print(f"{what} -> {os.path.relpath(out, self.work)}{to}{' --restart' if restart else ''}"
              f": exit {done.returncode}, {time.time() - start:.1f} s")
        if expect is not None and done.returncode != expect:
            sys.exit(f"FAIL: exit status {done.returncode}, expected {expect}:\n{output[-4000:]}")
        return done.returncode, output

    def straight(self, ranks):
        """The full run on `ranks` ranks (the ranks check's), made if missing."""
        out = f"{self.work}/np{ranks}"
        if not os.path.exists(f"{out}/run_report.json"):
            self.run(ranks, out)
        return out

    def agree(self, ref, other, bitwise, what):
        """`other` against `ref` by the spec's agreement (every value exact when bitwise)."""
        diagnostics, report = self.agreement.get("diagnostics"), self.agreement.get("report", {})
        if bitwise and os.path.exists(f"{ref}/diagnostics.csv"):
            with open(f"{ref}/diagnostics.csv") as a, open(f"{other}/diagnostics.csv") as b:
                want, got = a.readlines(), b.readlines()
            first = next((i for i, (x, y) in enumerate(zip(want, got)) if x != y), None)
            check(want == got, f"{what}: diagnostics.csv identical" + (
                f" (line {first + 1}: {got[first].strip()} vs {want[first].strip()})"
                if first is not None else f" ({len(got)} lines vs {len(want)})"))
        elif diagnostics:
            compare_tables(f"{ref}/diagnostics.csv", f"{other}/diagnostics.csv", diagnostics, what)
        for path, tol in report.items():
            got, want = report_value(other, path), report_value(ref, path)
            ok = (exact() if bitwise else tolerance(tol))(got, want)
            check(ok, f"{what}: run_report {path} {got!r} vs {want!r} ({describe(tol)})")
        if bitwise:
            for name in self.series:
                compare_last_outputs(f"{ref}/{name}", f"{other}/{name}", what)


def report_value(folder, path):
    with open(f"{folder}/run_report.json") as f:
        value = json.load(f)
    for key in path.split("."):
        value = value[key]
    return value


def compare_tables(ref, other, columns, what):
    with open(ref) as a, open(other) as b:
        want, got = list(csv.DictReader(a)), list(csv.DictReader(b))
    check([r["step"] for r in got] == [r["step"] for r in want],
          f"{what}: diagnostics.csv has the same {len(want)} rows (steps)")
    for column, tol in columns.items():
        ok = tolerance(tol)
        rows = [(r["step"], float(g[column]), float(r[column])) for g, r in zip(got, want)]
        bad = [row for row in rows if not ok(row[1], row[2])]
        worst = max(abs(g - w) for _, g, w in rows)
        check(not bad, f"{what}: {column} {describe(tol)} on every row (largest difference "
                       f"{worst:.3g}){'; step, got, expected: ' + str(bad[:3]) if bad else ''}")


def last_files(xmf):
    """The HDF5 files the series' last time step names."""
    series = ET.parse(xmf).getroot().find("Domain/Grid")
    last = (series.findall("Grid") or [series])[-1]  # a temporal collection's last step
    return sorted({item.text.strip().split(":")[0] for item in last.iter("DataItem")
                   if item.get("Format") == "HDF"})


def arrays(path, by_id_only):
    """Every dataset of an output file, rows in id order where the file has ids. by_id_only
    (runs on other rank counts): only the per-id datasets, each id once (a vertex two ranks
    write is written alike by both; rows without ids are laid out by the partition)."""
    found = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: found.__setitem__(name, obj[...])
                     if isinstance(obj, h5py.Dataset) else None)
    if "id" not in found:
        return {} if by_id_only else found
    ids = found["id"]
    order = np.argsort(ids, kind="stable")
    if by_id_only:
        order = order[np.unique(ids[order], return_index=True)[1]]
    return {name: (a[order] if a.shape[:1] == ids.shape else a) for name, a in found.items()
            if not by_id_only or a.shape[:1] == ids.shape}


def compare_last_outputs(ref_xmf, other_xmf, what):
    files = last_files(ref_xmf)
    check(last_files(other_xmf) == files, f"{what}: the series' last step is {files}")
    folder, other = os.path.dirname(ref_xmf), os.path.dirname(other_xmf)
    by_id_only = report_value(folder, "ranks") != report_value(other, "ranks")
    for name in files:
        a, b = arrays(f"{folder}/{name}", by_id_only), arrays(f"{other}/{name}", by_id_only)
        check(a.keys() == b.keys() and len(a) > 0, f"{what}: {name} holds {sorted(a)}")
        for key in a:
            same = np.array_equal(a[key], b[key])
            differ = "" if same or a[key].shape != b[key].shape else \
                f" ({np.count_nonzero(a[key] != b[key])} of {a[key].size} values differ)"
            check(same, f"{what}: {name}:/{key} bitwise equal{differ}")


NUMBER_TYPES = {"Float": "f", "Int": "i", "UInt": "u", "UChar": "u", "Char": "i"}


def check_xdmf(xmf):
    """Every HDF DataItem of the file: its dataset exists, with the DataItem's shape and type
    (in a hyperslab, the selection lies within it)."""
    parents = {child: parent for parent in ET.parse(xmf).iter() for child in parent}
    items = [i for i in parents if i.tag == "DataItem" and i.get("Format") == "HDF"]
    problems, opened = [] if items else ["names no HDF5 dataset"], {}
    for item in items:
        name, _, path = item.text.strip().partition(":")
        where = f"{name}:{path}"
        if name not in opened:
            opened[name] = h5py.File(os.path.join(os.path.dirname(xmf), name), "r")
        dataset = opened[name].get(path)
        if not isinstance(dataset, h5py.Dataset):
            problems.append(f"{where}: no such dataset")
            continue
        shape = tuple(int(d) for d in item.get("Dimensions").split())
        kind, size = NUMBER_TYPES[item.get("NumberType", "Float")], int(item.get("Precision", 4))
        if dataset.shape != shape or dataset.dtype.kind != kind or dataset.dtype.itemsize != size:
            problems.append(f"{where}: {dataset.dtype}{list(dataset.shape)}, the DataItem says "
                            f"{item.get('NumberType')} of {size} bytes, {list(shape)}")
        slab = parents[item]
        if slab.get("ItemType") == "HyperSlab":  # rows start, stride, count; one column per axis
            start, stride, count = np.array(slab.find("DataItem").text.split(), dtype=int
                                            ).reshape(3, -1)
            if np.any(start + stride * (count - 1) >= shape):
                problems.append(f"{where}: hyperslab {start} + {stride} x {count} outside {shape}")
    for f in opened.values():
        f.close()
    check(not problems, f"{xmf}: {len(items)} HDF5 DataItems, each dataset there with its shape"
                        + "".join(f"\n      {p}" for p in problems[:10]))


def check_ranks(s):
    runs = [f"{s.work}/np{n}" for n in s.ranks]
    for n, out in zip(s.ranks, runs):
        s.run(n, out)
    script = s.agreement.get("script")
    if script:  # a comparison of its own (one-shot workloads' reports)
        path = os.path.join(TESTS, script)
        module_spec = importlib.util.spec_from_file_location("compare", path)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        check(module.main(runs) == 0, f"{script}: runs on {s.ranks} ranks agree")
    for n, out in zip(s.ranks[1:], runs[1:]):
        s.agree(runs[0], out, s.agreement.get("bitwise", False), f"{n} ranks vs {s.ranks[0]}")


def check_restart(s):
    step = feature(s, "checkpoint")["step"]
    for n in s.ranks:
        straight, half, split = s.straight(n), f"{s.work}/half_np{n}", f"{s.work}/split_np{n}"
        s.run(n, half, step, {"checkpoint.at_end": True})
        shutil.rmtree(split, ignore_errors=True)
        shutil.copytree(half, split)
        _, log = s.run(n, split, restart=True)
        check(f"on {n} rank(s)" in log and "restarted from" in log,
              f"{n} ranks: continued from the checkpoint of step {step}")
        s.agree(straight, split, True, f"{n} ranks, {step} + {s.spec['steps'] - step} steps")
        for name in s.series:
            check_xdmf(f"{split}/{name}")


def check_restart_ranks(s):
    step, top = feature(s, "checkpoint")["step"], max(s.ranks)
    half = f"{s.work}/half_np{top}"
    if not os.path.exists(f"{half}/checkpoints"):
        s.run(top, half, step, {"checkpoint.at_end": True})
    for n in sorted(set(s.ranks) - {top}, reverse=True):
        out = f"{s.work}/np{top}_to_{n}"
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(half, out)
        _, log = s.run(n, out, restart=True)
        check(f"on {n} rank(s)" in log, f"{top} ranks -> {n}: continued on {n} ranks")
        s.agree(s.straight(top), out, s.agreement.get("bitwise", False), f"{top} ranks -> {n}")


def check_unknown_key(s):
    section = s.spec.get("section", s.spec["workload"])
    out = f"{s.work}/unknown_key"
    # The workload's key on 2 ranks (every rank refuses it), the shared one by `apron validate`
    # (the same parser; Open MPI adds about a second to winding up a job that exits non-zero).
    for ranks, key in ((2, f"{section}.conformance_no_such_key"), (0, "conformance_no_such_key")):
        _, log = s.run(ranks, out, sets={key: 1}, expect=2)
        check(f"unknown key '{key}'" in log and "MPI_ABORT" not in log,
              f"--set {key}=1 refused (exit 2) naming the key")
        check(not os.path.exists(out), f"--set {key}=1: nothing written")


def check_outputs(s):
    feature(s, "outputs")
    for n in s.ranks:
        out = s.straight(n)
        written = sorted(f for f in os.listdir(out) if f.endswith(".xmf"))
        check(set(s.series) <= set(written), f"{n} ranks: wrote {written}, the spec {s.series}")
        for name in written:
            check_xdmf(f"{out}/{name}")


def check_catalyst(s):
    spec = feature(s, "catalyst")
    out = f"{s.work}/catalyst"
    status, log = s.run(spec.get("ranks", 2), out, spec.get("steps"),
                        {"catalyst.every": spec["every"]}, expect=None)
    if status == 2 and NO_CATALYST in log:
        skip(f"this apron was {NO_CATALYST}")
    check(status == 0, f"the run with the built-in Catalyst writer finished\n{log[-3000:]}")
    for script, *args in spec["checks"]:
        args = [str(a).replace("{dir}", f"{out}/catalyst") for a in args]
        done = subprocess.run([s.pvpython, os.path.join(TESTS, script), *args],
                              capture_output=True, text=True)
        print(done.stdout + done.stderr)
        check(done.returncode == 0, f"{script} {' '.join(args)}")


def check_forged(s):
    """Every declared table forged and resealed (checkpoint/forge_tables.py): refused on 1 and 2
    ranks with exit 2, naming the table, column and row."""
    spec = feature(s, "forged")
    sets = dict(s.spec.get("set", {}), **{"time.max_steps": feature(s, "checkpoint")["step"]})
    args = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in sets.items()]
    cmd = [sys.executable, os.path.join(TESTS, "checkpoint", "forge_tables.py"), "--apron",
           s.apron, "--case", s.case, "--work", f"{s.work}/forged", "--mpiexec",
           shlex.join(s.mpiexec)] + [x for a in args for x in ("--set", a)]
    cmd += ["--counted", *spec.get("counted", [])]
    cmd += ["--inside-domain", *spec.get("inside_domain", [])]
    done = subprocess.run(cmd, cwd=ROOT, env=s.env, capture_output=True, text=True)
    print(done.stdout + done.stderr)
    check(done.returncode == 0, "every forged table refused")


CHECKS = {"ranks": check_ranks, "restart": check_restart, "restart_ranks": check_restart_ranks,
          "unknown_key": check_unknown_key, "outputs": check_outputs, "catalyst": check_catalyst,
          "forged": check_forged}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("check", choices=CHECKS)
    p.add_argument("--apron", required=True)
    p.add_argument("--spec")
    p.add_argument("--case")
    p.add_argument("--work", required=True)
    p.add_argument("--mpiexec", default="mpirun --oversubscribe")
    p.add_argument("--pvpython", default="pvpython")
    args = p.parse_args()
    if not (args.spec or args.case):
        p.error("give --spec, --case or both")
    suite = Suite(args)
    print(f"{args.check}: {suite.spec['workload']}, {suite.case}, {suite.apron}")
    os.makedirs(suite.work, exist_ok=True)
    CHECKS[args.check](suite)
    print(f"{suite.spec['workload']} {args.check}: ok")


if __name__ == "__main__":
    main()
