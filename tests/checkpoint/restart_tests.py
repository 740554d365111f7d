#!/usr/bin/env python3
"""Checkpoint/restart tests of the apron executable (issue 3), one scenario per ctest.

usage: restart_tests.py SCENARIO --apron EXE --case CASE.yaml --work DIR [--mpiexec "mpirun ..."]

Scenarios:
  bitwise      2N steps straight and N steps + restart + N steps on 2 ranks: identical ids,
               positions, velocities and densities (sorted by id), and the output series holds
               every step of the whole run.
  background   checkpoints every 10 steps, written on a thread while the run goes on: each one
               complete and verified, the older pruned, and continuing from one written mid-run
               ends bitwise where the straight run ends.
  ranks        checkpoint on 4 ranks, continue on 2 and on 3: same particle count and mass,
               diagnostics within the multi-rank tolerances of the 4-rank run (compare_runs.py).
  signal       SIGTERM to mpirun mid-run (and SIGUSR1): a complete, verified checkpoint, no .tmp
               file, exit status 3 with SIGUSR1, and the run continues from it.
  bad          truncated, altered, non-HDF5 and foreign-workload checkpoints and a changed physics
               key are refused (exit 2, a clear message) and no earlier output changes.
  forged       issue 19: damaged header values (step, time, dt, ranks, /state, per-table counts,
               case text), a removed dataset, a damaged 'format', an (N, 0) dataset, format 1,
               resealed rank_rows [2^62, 5] and a NaN in the partition: refused by --restart and
               by inspect --verify (the header checksum, range checks), the last two on 2 ranks
               too (exit 2 on each rank, no hang);
               a case file over 64 KiB checkpoints and restarts; stale .tmp files are removed.
"""
import argparse
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_digest  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SHORT = ["--set", "output.every=0.004", "--set", "output.progress_every=100",
         "--set", "output.diagnostics_every=10"]


class Runner:
    def __init__(self, args):
        self.apron, self.case, self.mpiexec = args.apron, args.case, args.mpiexec.split()
        self.env = dict(os.environ, OMP_NUM_THREADS="1")

    def command(self, ranks, out_dir, *extra):
        return self.mpiexec + ["-n", str(ranks), self.apron, "run", self.case, *SHORT,
                               "--set", f"output.dir={out_dir}", *extra]

    def run(self, ranks, out_dir, *extra, expect=0):
        done = subprocess.run(self.command(ranks, out_dir, *extra), env=self.env,
                              capture_output=True, text=True)
        output = done.stdout + done.stderr
        if expect is not None and done.returncode != expect:
            sys.exit(f"FAIL: exit status {done.returncode}, expected {expect}:\n{output}")
        return output

    def run_each_rank(self, ranks, out_dir, *extra, timeout=120):
        """Each rank's own exit status (a shell around apron reports it) and the output; None for
        the statuses when the run outlives `timeout` (a rank waiting for another)."""
        command = self.command(ranks, out_dir, *extra)
        at = command.index(self.apron)
        report = '"$0" "$@"; echo "apron rank $OMPI_COMM_WORLD_RANK exit status $?"'
        command[at:at] = ["sh", "-c", report]
        with subprocess.Popen(command, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True) as p:
            try:
                output, _ = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                return None, p.communicate()[0]
        statuses = dict(re.findall(r"apron rank (\d+) exit status (\d+)", output))
        return [int(statuses.get(str(k), -1)) for k in range(ranks)], output


def particles(path):
    """Every field of a particle output file, rows sorted by id."""
    with h5py.File(path, "r") as f:
        order = np.argsort(f["id"][...])
        return {name: f[name][...][order] for name in f}


def check(condition, message):
    print(("ok    " if condition else "FAIL  ") + message)
    if not condition:
        sys.exit(1)


def steps_in_series(xmf):
    with open(xmf) as f:
        return f.read().count("<Grid Name=\"particles_")


def scenario_bitwise(r, work):
    n = 40
    r.run(2, f"{work}/straight", "--set", f"time.max_steps={2 * n}")
    r.run(2, f"{work}/split", "--set", f"time.max_steps={n}")
    log = r.run(2, f"{work}/split", "--set", f"time.max_steps={2 * n}", "--restart", "latest")
    check("restarted from" in log, "the second part restarted from the checkpoint")
    final = f"particles_{2 * n:06d}.h5"
    a, b = particles(f"{work}/straight/{final}"), particles(f"{work}/split/{final}")
    check({"id", "position", "velocity"} <= set(a) and set(a) == set(b),
          f"both runs wrote the same particle fields ({sorted(a)})")
    for name in a:  # every field the workload writes (SPH: density, pressure, ...)
        check(np.array_equal(a[name], b[name]), f"{name}: bitwise identical after restart")
    straight_steps = steps_in_series(f"{work}/straight/particles.xmf")
    split_steps = steps_in_series(f"{work}/split/particles.xmf")
    # The split run has one more output: the final one of its first part, at step n.
    check(split_steps == straight_steps + 1,
          f"the restarted series lists the whole run ({split_steps} steps, {straight_steps} + 1)")
    with open(f"{work}/straight/diagnostics.csv") as f1, open(f"{work}/split/diagnostics.csv") as f2:
        check(f1.read() == f2.read(), "diagnostics.csv identical, no duplicated rows")


def scenario_background(r, work):
    """Checkpoints whose rows go to disk on a thread while the run goes on (every 10 steps, keep
    2): each finished one is complete, the older ones are pruned, and a run continued from one
    written mid-run ends bit for bit where the uninterrupted run ends."""
    out = f"{work}/run"
    log = r.run(2, out, "--set", "time.max_steps=60", "--set", "checkpoint.every_steps=10",
                "--set", "checkpoint.keep=2")
    check(log.count("checkpoint: ") == 6, "six checkpoints finished (steps 10 to 50, and the end)")
    files = sorted(os.listdir(f"{out}/checkpoints"))
    check(files == ["checkpoint_000000050.h5", "checkpoint_000000060.h5"],
          f"the newest two are kept, no .tmp left ({files})")
    for name in files:
        inspect = subprocess.run([r.apron, "inspect", f"{out}/checkpoints/{name}", "--verify"],
                                 capture_output=True, text=True)
        check(inspect.returncode == 0 and "MISMATCH" not in inspect.stdout,
              f"{name}: complete, its checksums verify")
    r.run(2, f"{work}/continued", "--set", "time.max_steps=60",
          "--restart", f"{out}/checkpoints/checkpoint_000000050.h5")
    final = "particles_000060.h5"
    a, b = particles(f"{out}/{final}"), particles(f"{work}/continued/{final}")
    for name in a:
        check(np.array_equal(a[name], b[name]), f"{name}: continued from step 50, bitwise identical")


def scenario_ranks(r, work):
    end = ["--set", "time.end=0.06"]
    r.run(4, f"{work}/np4", *end)
    r.run(4, f"{work}/np4_half", "--set", "time.end=0.03")
    for ranks in (2, 3):
        target = f"{work}/np4_to_{ranks}"
        shutil.copytree(f"{work}/np4_half", target)
        log = r.run(ranks, target, *end, "--restart", "latest")
        check(f"on {ranks} rank(s)" in log, f"4 ranks -> {ranks}: continued on {ranks} ranks")
    compare = subprocess.run([sys.executable, os.path.join(HERE, "..", "mpi", "compare_runs.py"),
                              f"{work}/np4", f"{work}/np4_to_2", f"{work}/np4_to_3"],
                             capture_output=True, text=True)
    print(compare.stdout)
    check(compare.returncode == 0, "counts and mass exact, diagnostics within tolerance")


def wait_for_steps(out_dir, rows, timeout=120):
    table = f"{out_dir}/diagnostics.csv.tmp"
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(table) and sum(1 for _ in open(table)) > rows:
            return
        time.sleep(0.2)
    sys.exit(f"FAIL: no progress in {out_dir}")


def interrupt(r, out_dir, sig, env=None):
    process = subprocess.Popen(r.command(2, out_dir, "--set", "time.end=10"), env=env or r.env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_for_steps(out_dir, 3)
    process.send_signal(sig)
    output, _ = process.communicate(timeout=120)
    return process.returncode, output


def verified_checkpoint(r, out_dir):
    files = os.listdir(f"{out_dir}/checkpoints")
    check(not [f for f in files if f.endswith(".tmp")], f"{out_dir}: no .tmp file left")
    check(len(files) == 1, f"{out_dir}: one checkpoint written ({files})")
    inspect = subprocess.run([r.apron, "inspect", f"{out_dir}/checkpoints/{files[0]}", "--verify"],
                             capture_output=True, text=True)
    print(inspect.stdout)
    check(inspect.returncode == 0 and "MISMATCH" not in inspect.stdout,
          "the checkpoint is complete and its checksums verify")


def scenario_signal(r, work):
    status, output = interrupt(r, f"{work}/usr1", signal.SIGUSR1)
    check("stopping on signal 10" in output, "SIGUSR1: every rank stopped after its step")
    check(status == 3, f"SIGUSR1: exit status 3 (stopped early with a checkpoint), got {status}")
    verified_checkpoint(r, f"{work}/usr1")
    # On SIGTERM, Open MPI's mpirun sends the ranks SIGCONT, then SIGTERM
    # odls_base_sigkill_timeout (1 s) later, then SIGKILL as long again after that. One second
    # is enough for this case on an idle machine, not always on CI's two cores with other MPI
    # tests running: the test gives 5 s, as the README advises raising it in batch scripts.
    patient = dict(r.env, OMPI_MCA_odls_base_sigkill_timeout="5")
    status, output = interrupt(r, f"{work}/term", signal.SIGTERM, patient)
    check(status != 0, f"SIGTERM: non-zero exit ({status})")
    verified_checkpoint(r, f"{work}/term")
    log = r.run(2, f"{work}/term", "--set", "time.max_steps=400", "--restart", "latest")
    check("restarted from" in log, "the interrupted run continues from its checkpoint")


def snapshot(out_dir):
    digests = {}
    for root, _, files in os.walk(out_dir):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                digests[path] = hashlib.sha256(f.read()).hexdigest()
    return digests


def scenario_bad(r, work):
    out = f"{work}/good"
    r.run(1, out, "--set", "time.max_steps=20")
    good = f"{out}/checkpoints/checkpoint_000000020.h5"
    bad_dir = f"{work}/bad"
    os.makedirs(bad_dir, exist_ok=True)
    truncated, altered, foreign, text = (f"{bad_dir}/{n}" for n in
                                         ("truncated.h5", "altered.h5", "foreign.h5", "text.h5"))
    data = open(good, "rb").read()
    open(truncated, "wb").write(data[: len(data) // 2])
    shutil.copy(good, altered)
    with h5py.File(altered, "r+") as f:
        f["tables/particles/columns/position"][5, 2] += 1e-3
    shutil.copy(good, foreign)
    with h5py.File(foreign, "r+") as f:
        f.attrs["workload"] = np.bytes_("flip")
    ckpt_digest.reseal(foreign)  # a sound checkpoint of another workload, not a damaged one
    open(text, "w").write("step: 20\n")
    before = snapshot(out)
    cases = [
        (truncated, "truncated or damaged|not an HDF5 file|cannot"),
        (altered, "dataset 'position' fails its checksum"),
        (foreign, "a checkpoint of the 'flip' workload"),
        (text, "not an HDF5 file"),
        (f"{bad_dir}/missing.h5", "no such file"),
    ]
    for path, pattern in cases:
        output = r.run(2, out, "--set", "time.max_steps=40", "--restart", path, expect=2)
        check(re.search(pattern, output) is not None,
              f"{os.path.basename(path)} refused: {pattern}")
    output = r.run(1, out, "--set", "time.max_steps=40", "--set", "sph.alpha=0.05",
                   "--restart", "latest", expect=2)
    check("sph.alpha: 0.02 in the checkpoint, 0.05 now" in output,
          "a physics key changed on restart is refused, naming the key")
    check(snapshot(out) == before, "no output of the earlier run changed")


def inspect_file(r, path):
    done = subprocess.run([r.apron, "inspect", path, "--verify"], capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def scenario_forged(r, work):
    out = f"{work}/good"
    r.run(2, out, "--set", "time.max_steps=30", "--set", "checkpoint.every_steps=15")
    good = f"{out}/checkpoints/checkpoint_000000030.h5"
    status, text = inspect_file(r, good)
    check(status == 0 and "header checksum" in text and "(verified)" in text,
          "the good checkpoint verifies, header included")
    forged_dir = f"{work}/forged"
    os.makedirs(forged_dir, exist_ok=True)

    def attr(name, value):
        return lambda f: f.attrs.__setitem__(name, value)

    def drop(name):
        return lambda f: f.__delitem__(name)

    def shift_rank_rows(f):  # the same sum: only the header checksum sees it
        counts = f["tables/particles/rank_rows"]
        counts[0], counts[1] = counts[0] - 7, counts[1] + 7

    def set_rank_rows(f):
        counts = f["tables/particles/rank_rows"]
        counts[0] = counts[0] - 7

    def negative_rank_rows(f):
        counts = f["tables/particles/rank_rows"]
        counts[1] = counts[1] + counts[0] + 1
        counts[0] = -1

    def set_config(f):
        text = f["config"][...].tobytes().replace(b"alpha: 0.02", b"alpha: 0.09")
        del f["config"]
        f["config"] = np.frombuffer(text, dtype=np.uint8)

    def partition_nan(f):  # resealed with the dataset's own checksum: only the values tell
        f["arrays/partition"][0, 2] = np.nan

    def rank_rows_huge(f):  # 2^62 + 5 rows: the sum fails, and so does the first on its own
        f["tables/particles/rank_rows"][...] = [2**62, 5]

    def empty_columns(f):
        del f["tables/particles/columns/id"]
        d = f.create_dataset("tables/particles/columns/id", shape=(4800, 0), dtype=np.int64)
        d.attrs["checksum"] = np.uint64(0)

    # (name, change, reseal the header checksum afterwards (a name: that dataset's checksum
    # first), message on restart and inspect)
    header_bad = "header fails its checksum"
    cases = [
        ("step_flipped", attr("step", np.int64(14)), False, header_bad),
        ("step_negative", attr("step", np.int64(-5)), True, "the step is -5, must be >= 0"),
        ("time_flipped", attr("time", np.float64(0.001)), False, header_bad),
        ("time_nan", attr("time", np.float64("nan")), True, "the time is nan"),
        ("dt_zero", attr("dt", np.float64(0)), True, "dt is 0, must be finite and > 0"),
        ("dt_inf", attr("dt", np.float64("inf")), True, "dt is inf"),
        ("ranks_flipped", attr("ranks", np.int64(3)), False,
         "the per-rank row counts of table 'particles' is 2 entries, must be one per writing rank (3)"),
        ("ranks_flipped_resealed", attr("ranks", np.int64(3)), True, "must be one per writing rank"),
        ("ranks_zero", attr("ranks", np.int64(0)), True, "the rank count is 0"),
        ("state_scalar", lambda f: f["state"].attrs.__setitem__("next_output_time",
                                                                np.float64(1.0)), False, header_bad),
        ("rank_rows_shifted", shift_rank_rows, False, header_bad),
        ("rank_rows_negative", negative_rank_rows, True,
         "the row count of rank 0 in table 'particles' is -1, must be >= 0"),
        ("rank_rows_sum", set_rank_rows, False, "the per-rank row counts of table 'particles' is a sum of 4793, must be its 4800 rows"),
        ("rank_rows_huge", rank_rows_huge, True,
         "the row count of rank 0 in table 'particles' is 4611686018427387904, must be at most the table's 4800 rows"),
        ("partition_nan", partition_nan, "arrays/partition",
         "value 2 of array 'partition' is nan, must be finite"),
        ("case_text", set_config, False, header_bad),
        ("dataset_removed", drop("tables/particles/columns/velocity"), False, header_bad),
        ("format_1", attr("format_version", np.int64(1)), False, "checkpoint format version 1"),
    ]
    # A /state scalar the workload needs is missing (resealed: only the workload can tell): the
    # restart is bad input (exit 2), not a map::at failure and MPI_Abort.
    path = f"{forged_dir}/state_missing.h5"
    shutil.copy(good, path)
    with h5py.File(path, "r+") as f:
        del f["state"].attrs["next_output_time"]
    ckpt_digest.reseal(path)
    output = r.run(2, out, "--set", "time.max_steps=60", "--restart", path, expect=2)
    check("the checkpoint has no state 'next_output_time'" in output and "MPI_ABORT" not in output,
          "state_missing: --restart refused on 2 ranks (exit 2), naming the missing value")
    before = snapshot(out)
    for name, change, reseal, pattern in cases:
        path = f"{forged_dir}/{name}.h5"
        shutil.copy(good, path)
        with h5py.File(path, "r+") as f:
            change(f)
        if isinstance(reseal, str):
            ckpt_digest.reseal_dataset(path, reseal)
        elif reseal:
            ckpt_digest.reseal(path)
        output = r.run(1, out, "--set", "time.max_steps=60", "--restart", path, expect=2)
        check(re.search(re.escape(pattern), output) is not None,
              f"{name}: --restart refused: {pattern}")
        status, text = inspect_file(r, path)
        check(status == 2 and re.search(re.escape(pattern), text) is not None,
              f"{name}: inspect --verify fails (status {status}): {pattern}")
    # On 2 ranks, the checkpoint's own rank count: every rank refuses them (exit 2) in time, none
    # waits in a collective call for another.
    for name, pattern in (("partition_nan", "value 2 of array 'partition' is nan"),
                          ("rank_rows_huge", "the row count of rank 0 in table 'particles'")):
        statuses, output = r.run_each_rank(2, out, "--set", "time.max_steps=60",
                                           "--restart", f"{forged_dir}/{name}.h5")
        check(statuses == [2, 2] and pattern in output and "MPI_ABORT" not in output,
              f"{name}: --restart on 2 ranks: exit status {statuses} (2 on each rank, no hang)"
              + ("" if statuses == [2, 2] else "\n" + output))
    check(snapshot(out) == before, "no output of the earlier run changed")

    # Resealed by hand, a step or time passes every checksum; the series on disk contradicts it
    # (step 14 at the time of step 30 would rewrite the earlier run's files after step 14).
    for name, change in (("step_resealed", attr("step", np.int64(14))),
                         ("time_resealed", attr("time", np.float64(1e9)))):
        path = f"{forged_dir}/{name}.h5"
        shutil.copy(good, path)
        with h5py.File(path, "r+") as f:
            change(f)
        ckpt_digest.reseal(path)
        output = r.run(2, out, "--set", "time.max_steps=60", "--restart", path, expect=2)
        check("disagrees with the output series on disk" in output,
              f"{name}: --restart refused on 2 ranks: the series on disk contradicts it")
    check(snapshot(out) == before, "no output of the earlier run changed by a resealed checkpoint")

    # A damaged 'format' attribute is not "particle output, no checksums".
    for name, value in (("format_damaged", np.bytes_("apron checkpoinT")), ("format_gone", None)):
        path = f"{forged_dir}/{name}.h5"
        shutil.copy(good, path)
        with h5py.File(path, "r+") as f:
            if value is None:
                del f.attrs["format"]
            else:
                f.attrs["format"] = value
        status, text = inspect_file(r, path)
        check(status == 2 and "damaged apron checkpoint" in text,
              f"{name}: inspect --verify fails (status {status})")
        output = r.run(1, out, "--set", "time.max_steps=60", "--restart", path, expect=2)
        check("not an apron checkpoint" in output, f"{name}: --restart refused")
    # A dataset of shape (N, 0): refused, no SIGFPE.
    path = f"{forged_dir}/empty_columns.h5"
    shutil.copy(good, path)
    with h5py.File(path, "r+") as f:
        empty_columns(f)
    status, text = inspect_file(r, path)
    check(status == 2 and "0 components per row" in text,
          f"(N, 0) dataset: inspect fails cleanly (status {status}, no signal)")
    output = r.run(1, out, "--set", "time.max_steps=60", "--restart", path, expect=2)
    check("0 components per row" in output, "(N, 0) dataset: --restart refused")
    # A particle output file still inspects as one.
    status, text = inspect_file(r, f"{out}/particles_000030.h5")
    check(status == 0 and "particle output" in text, "particle output: inspect still reads it")

    # A case file over 64 KiB: checkpoints are written (the case is a dataset) and restart.
    big = os.path.join(HERE, "data", "case_over_64KiB.yaml")
    big_out = f"{work}/big_case"
    os.makedirs(f"{big_out}/checkpoints", exist_ok=True)
    stale = f"{big_out}/checkpoints/checkpoint_000000007.h5.tmp"
    open(stale, "w").write("left by a killed run")
    runner = Runner(argparse.Namespace(apron=r.apron, case=big, mpiexec=" ".join(r.mpiexec)))
    log = runner.run(2, big_out, "--set", "time.max_steps=10")
    files = sorted(os.listdir(f"{big_out}/checkpoints"))
    check(files == ["checkpoint_000000010.h5"], f"case over 64 KiB: checkpoint written, no .tmp ({files})")
    status, text = inspect_file(r, f"{big_out}/checkpoints/{files[0]}")
    size = re.search(r"case file: (\d+) bytes", text)
    check(status == 0 and size is not None and int(size.group(1)) > 65536,
          f"its case text ({size and size.group(1)} bytes) is whole and verifies")
    log = runner.run(2, big_out, "--set", "time.max_steps=12", "--restart", "latest")
    check("restarted from" in log, "case over 64 KiB: the run continues from its checkpoint")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", choices=["bitwise", "background", "ranks", "signal", "bad", "forged"])
    p.add_argument("--apron", required=True)
    p.add_argument("--case", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--mpiexec", default="mpirun --oversubscribe")
    args = p.parse_args()
    work = os.path.join(args.work, args.scenario)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    globals()["scenario_" + args.scenario](Runner(args), work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
