#!/usr/bin/env python3
"""apron's benchmark harness: named suites of cases, every result in one JSON schema.

  python3 bench/run.py SUITE|CASE [...] --apron EXE [--baseline EXE] [--runs 3] [--out DIR]
                       [--smoke] [--set KEY=VALUE ...] [--max-ranks N] [--tests DIR] [--list]

Suites: sph, flip, cloth, planes, meshdist, scaling, regression, gpu-tests and all (`--list`
names their cases). A case is an input file, --set overrides, a rank count and the figure read
from each run's run_report.json; its value is the median of --runs runs. With --baseline the two
builds run alternately (baseline first), so that drift hits both, and each record also holds the
baseline's runs, median and the ratio new / baseline. gpu-tests runs the test binaries found
beside EXE (or in --tests DIR) and the checks that compare runs; it uses the new build only.

Writes DIR/results.json (a list of records, rewritten after every case), DIR/reports/ (every
run's run_report.json), DIR/logs/ and DIR/tests/ (the checks' logs, reports and diagnostics);
the table goes to stdout, progress to stderr. --smoke shrinks every case so that the whole
harness runs on a CPU in a minute or two: it checks the harness, its figures mean nothing.
The record's schema: bench/README.md.
"""
import argparse
import datetime
import glob
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SCHEMA_VERSION = 1


def dig(tree, path, default=None):
    """tree["a"]["b"] for "a.b"; default where a key is missing."""
    for key in path.split("."):
        if not isinstance(tree, dict) or key not in tree:
            return default
        tree = tree[key]
    return tree


def merge(*lists):
    """KEY=VALUE overrides, one per key: a later list's value replaces an earlier one's in place."""
    merged = {}
    for item in (x for sets in lists for x in sets):
        merged[item.split("=", 1)[0]] = item
    return list(merged.values())


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def say(message):
    print(message, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------- figures

class Metric:
    """What a case measures: its name and unit, which way is better, the value read from one
    run's report, and secondary figures (`extra`, medians over the runs in the record)."""

    def __init__(self, name, unit, better, value, extra=lambda r: {}):
        self.name, self.unit, self.better, self.value, self.extra = name, unit, better, value, extra


def per_step_ms(r):
    return 1e3 * r["loop_seconds"] / r["steps"]


def rate(r, kind):
    # Reports of builds before the workload-neutral keys say "particle" for "item": a baseline
    # may be such a build.
    return r.get(f"{kind}_item_steps_per_second", r.get(f"{kind}_particle_steps_per_second"))


def planes_stages(r):
    """Each stage's median over the repetitions after the first (the warm-up), in ms."""
    reps = r["planes"]["stage_seconds_per_repetition"]
    timed = reps[1:] or reps
    return {k: 1e3 * statistics.median(x[k] for x in timed) for k in timed[0]}


def analyses(r):
    """Each analysis of a meshdist run, the first (cold) included, in seconds."""
    return r["meshdist"]["analysis_seconds"]


def sph_figures(r):
    return {"steady_item_steps_per_second": rate(r, "steady"), "ms_per_step": per_step_ms(r),
            "device_bytes_per_particle": dig(r, "sph.device_bytes_per_particle")}


def flip_figures(r):
    steady = rate(r, "steady")  # steps 11 on: without the first steps' one-time costs
    return {"steady_ms_per_step": 1e3 * r["items"] / steady if steady else None,
            "cg_iterations": dig(r, "flip.cg_iterations"),
            "device_bytes_per_particle": dig(r, "flip.device_bytes_per_particle")}


def cloth_figures(r):
    return {"steps_per_second": rate(r, "steady") / r["items"],
            "device_bytes_per_vertex": dig(r, "cloth.device_bytes_per_vertex")}


def planes_figures(r):
    stages = {f"{k}_ms": v for k, v in planes_stages(r).items() if k != "total"}
    return {**stages, "planes": len(dig(r, "planes.detected", [])), "f1": dig(r, "planes.ground_truth.f1")}


SPH = Metric("loop_item_steps_per_second", "particle-steps/s", "higher", lambda r: rate(r, "loop"),
             sph_figures)
FLIP = Metric("ms_per_step", "ms", "lower", per_step_ms, flip_figures)
CLOTH = Metric("steady_item_steps_per_second", "vertex-steps/s", "higher", lambda r: rate(r, "steady"),
               cloth_figures)
CLOTH_LOOP = Metric("loop_seconds", "s", "lower", lambda r: r["loop_seconds"],
                    lambda r: {"steps": r["steps"],
                               "cg_iterations_per_step": dig(r, "cloth.cg_iterations_per_step")})
PLANES = Metric("total_ms", "ms", "lower", lambda r: planes_stages(r)["total"], planes_figures)
BUNNY = Metric("warm_analysis_ms", "ms", "lower", lambda r: 1e3 * statistics.median(analyses(r)[1:]),
               lambda r: {"cold_analysis_ms": 1e3 * analyses(r)[0],
                          "hausdorff": dig(r, "meshdist.symmetric.hausdorff")})
COLD = Metric("cold_analysis_ms", "ms", "lower", lambda r: 1e3 * analyses(r)[0],
              lambda r: {f"{k}_ms": 1e3 * v["max_seconds"] for k, v in r["phases"].items()})
SAMPLES = Metric("samples_per_second", "samples/s", "higher",
                 lambda r: dig(r, "meshdist.directions.a_to_b.samples_per_second"),
                 lambda r: {"ms": 1e3 * dig(r, "meshdist.directions.a_to_b.seconds"),
                            "triangles": dig(r, "meshdist.mesh_b.triangles")})


# ------------------------------------------------------------------------------------- cases

class Case:
    """One benchmark: `apron run FILE --set ...` on `ranks` ranks; under --smoke the `smoke` sets
    replace those of the same keys."""

    def __init__(self, name, about, file, metric, sets, ranks=1, smoke=(), launcher=False):
        self.name, self.about, self.file, self.metric = name, about, file, metric
        self.sets, self.ranks, self.smoke, self.launcher = list(sets), ranks, list(smoke), launcher


def sph_spacing(particles):
    """The spacing that gives inputs/dam_break_large.yaml this many fluid particles."""
    return (0.146 * 0.292 * 0.292 / particles) ** (1 / 3)  # the case's fluid block [m^3]


def count(n):
    return f"{n / 1e6:g}M" if n >= 1e6 else f"{n / 1e3:g}k"


def sph(name, particles, ranks=1, steps=100, about="", extra=()):
    def sets(n, s):
        return [f"sph.spacing={sph_spacing(n):.9g}", f"time.max_steps={s}", "output.every=0",
                f"output.diagnostics_every={s}", "output.progress_every=1000", *extra]
    about = about or f"dam break, {count(particles)} fluid particles, {steps} steps"
    return Case(name, about, "inputs/dam_break_large.yaml", SPH, sets(particles, steps), ranks,
                sets(2e4, 20))


# The large dam break's tank as an STL of the same box (without a lid): mesh walls' cost.
STL_TANK = ["boundary.tank={mesh: inputs/meshes/dam_break_large_tank_open.stl, open: true}"]


# The 2-GPU weak case: the tank twice as deep (z) holding the 1-GPU case and its mirror image, so
# that each rank (RCB cuts z at 1) runs the 1-GPU case; free-slip walls make the mirror plane act
# as the wall the 1-GPU case has there.
FLIP_WEAK = ["domain={lo: [0, 0, 0], hi: [1.0, 1.0, 2.0]}",
             "fluid=[{lo: [0, 0, 0], hi: [0.25, 0.5, 0.5]}, {lo: [0, 0, 1.5], hi: [0.25, 0.5, 2.0]}]"]
FLIP_384 = ["flip.voxel_size=0.0026041666666666665"]  # 384^3 voxels: 28.3M particles
FLIP_LONG = ["time.max_steps=150", "checkpoint.at_end=false"]


def flip(name, about, sets=(), ranks=1):
    # Under mpirun even on one rank, as the FLIP figures of NOTES.md were taken: mpirun may bind
    # the rank (and the checkpoint's writer thread) to cores, where a plain process is not bound.
    return Case(name, about, "inputs/flip_dam_break_large.yaml", FLIP,
                ["output.progress_every=30", *sets], ranks,
                ["flip.voxel_size=0.03125", "time.max_steps=20"], launcher=True)


def cloth(name, about, cells=1000, width=1, ranks=1, steps=200, sets=(), metric=CLOTH):
    """inputs/cloth_large.yaml: a width x 1 m sheet of (width * cells) x cells cells."""
    def grid(c, s):
        return [f"cloth.grid.size=[{width}, 1, 0]", f"cloth.grid.cells=[{width * c}, {c}, 0]",
                f"time.max_steps={s}"]
    return Case(name, about, "inputs/cloth_large.yaml", metric,
                grid(cells, steps) + ["output.progress_every=100", *sets], ranks,
                grid(max(8, cells // 100), min(steps, 20)))


def planes(name, points, repeat=8, ranks=1, scene="room"):
    def sets(n, k):
        return [f"planes.input.scene={scene}", f"planes.input.points={int(n)}", f"planes.repeat={k}",
                "planes.point_output=false"]
    return Case(name, f"{scene}, {count(points)} points, median of {repeat - 1} analyses after a warm-up",
                "inputs/planes_room.yaml", PLANES, sets(points, repeat), ranks, sets(2e4, 3))


def bunny(name, about, repeat, metric, ranks=1):
    return Case(name, about, "inputs/meshdist_bunny.yaml", metric,
                ["meshdist.per_vertex_output=false", f"meshdist.repeat={repeat}"], ranks,
                [f"meshdist.repeat={min(repeat, 3)}"])


def samples(name, subdivide, n_samples, ranks=1):
    """Area samples on the simplified bunny against the full one with every edge split in
    `subdivide` (4: 1.11M triangles, 12: 10.0M); the process's second analysis is timed."""
    def sets(k, n):
        return [f"meshdist.b.subdivide={k}", f"meshdist.sampling.count={int(n)}"]
    return Case(name, f"{count(n_samples)} samples against the bunny split {subdivide}x per edge",
                "inputs/meshdist_bunny.yaml", SAMPLES,
                ["meshdist.per_vertex_output=false", "meshdist.repeat=2",
                 "meshdist.a.file=inputs/meshes/stanford-bunny-low.ply",
                 "meshdist.b.file=inputs/meshes/stanford-bunny.ply", "meshdist.directions=a_to_b",
                 "meshdist.sampling.vertices=false", *sets(subdivide, n_samples)], ranks, sets(1, 1e4))


IMPLICIT = ["cloth.integrator=implicit", "cloth.implicit.max_iterations=1000"]
TO_200US = ["time.end=2e-4", "time.max_steps=0"]  # the same simulated time for every integrator
# The sheet lowered onto its sphere (1 mm above the offset surface), so that the colliders work
# from the first step; and that sphere as a mesh (5120 triangles): the mesh colliders' cost.
ON_SPHERE = ["cloth.grid.centre=[0, 0, 0.461]"]
# Self-collision on the 0.5 mm cells of 2000 x 2000: a thickness below their jittered gap.
SELF_4M = ["cloth.self_collision.enabled=true", "cloth.thickness=1e-4"]
MESH_SPHERE = ["cloth.colliders=[{kind: mesh, mesh: inputs/meshes/sphere_fine.ply, scale: 0.25, "
               "offset: [0, 0, 0.2]}, {kind: floor, height: 0}]"]

BENCHMARKS = {
    "sph": [
        sph("sph-15k", 15e3, steps=200, about="the paper's sizes: 15k fluid particles, 200 steps"),
        sph("sph-30k", 30e3, steps=200, about="the paper's sizes: 30k fluid particles, 200 steps"),
        sph("sph-70k", 70e3, steps=200, about="the paper's sizes: 70k fluid particles, 200 steps"),
        sph("sph-1M", 1e6),
        sph("sph-10M", 10e6),
        sph("sph-10M-stl-tank", 10e6, about="sph-10M with its tank read from STL", extra=STL_TANK),
        sph("sph-50M", 50e6),
    ],
    "flip": [
        flip("flip-8M", "the paper's dam break, 8.39M particles on 256^3, 50 steps"),
        flip("flip-27M", "28.3M particles on 384^3, 50 steps", FLIP_384),
    ],
    "cloth": [
        cloth("cloth-100", "the seed's 100 x 100 sheet, 2000 steps", cells=100, steps=2000),
        cloth("cloth-1M", "1000 x 1000 cells, 200 steps"),
        cloth("cloth-4M", "2000 x 2000 cells, 200 steps", cells=2000),
        cloth("cloth-1M-float64", "1M vertices, float64 gradient", sets=["cloth.precision=float64"]),
        cloth("cloth-1M-no-hourglass", "1M vertices, hourglass control off",
              sets=["cloth.material.hourglass=0"]),
        cloth("cloth-1M-on-sphere", "1M vertices touching the analytic sphere", sets=ON_SPHERE),
        cloth("cloth-1M-on-mesh-sphere", "1M vertices touching the sphere as a 5120-triangle mesh",
              sets=ON_SPHERE + MESH_SPHERE),
        # Self-collision: the thickness below the gap of the jittered 1 mm cells (non-adjacent parts
        # of the sheet start 0.32 mm apart at least); 0.1 mm above the analytic sphere's offset.
        cloth("cloth-1M-self", "1M vertices, self-collision on (thickness 0.2 mm)",
              sets=["cloth.self_collision.enabled=true", "cloth.thickness=2e-4"]),
        cloth("cloth-1M-self-on-sphere", "1M vertices touching the sphere, self-collision on",
              sets=["cloth.self_collision.enabled=true", "cloth.thickness=2e-4",
                    "cloth.grid.centre=[0, 0, 0.4503]"]),
        cloth("cloth-4M-self", "2000 x 2000 cells, self-collision on (thickness 0.1 mm)", cells=2000,
              sets=SELF_4M),
        cloth("cloth-1M-explicit-200us", "1M vertices to t = 0.2 ms, explicit (cfl 0.5)",
              sets=TO_200US, metric=CLOTH_LOOP),
        cloth("cloth-1M-implicit-10us", "1M vertices to t = 0.2 ms, implicit, dt 10 us",
              sets=TO_200US + ["cloth.precision=float64", *IMPLICIT, "cloth.implicit.dt=1e-5"],
              metric=CLOTH_LOOP),
        cloth("cloth-1M-implicit-40us", "1M vertices to t = 0.2 ms, implicit, dt 40 us",
              sets=TO_200US + ["cloth.precision=float64", *IMPLICIT, "cloth.implicit.dt=4e-5"],
              metric=CLOTH_LOOP),
        # The step for drapes and garments, on the sheet in free fall (no collider reached).
        cloth("cloth-1M-implicit-fall-240", "1M vertices falling, implicit at 1/240 s", steps=48,
              sets=["cloth.colliders=[]", "cloth.precision=float64", *IMPLICIT,
                    f"cloth.implicit.dt={1 / 240!r}"]),
    ],
    "planes": [planes("planes-1M", 1e6), planes("planes-20M", 20e6),
               planes("planes-stairs-1M", 1e6, scene="stairs"),
               planes("planes-shelving-1M", 1e6, scene="shelving")],
    "meshdist": [
        bunny("bunny", "the bunny pair, median of the 10 analyses after the first", 11, BUNNY),
        bunny("bunny-cold", "the bunny pair, the first analysis of a fresh process", 1, COLD),
        samples("meshdist-1M-tri", 4, 1e7),
        samples("meshdist-10M-tri", 12, 1e7),
    ],
}
BY_NAME = {c.name: c for cases in BENCHMARKS.values() for c in cases}  # before the suites that reuse them
# Several GPUs of one host, one rank per GPU (cases with more ranks than GPUs are skipped), with
# the one-GPU cases they are measured against.
BENCHMARKS["scaling"] = [BY_NAME[n] for n in ("sph-10M", "sph-50M")] + [
    sph("sph-weak-10M-x2", 20e6, 2, about="weak: 10M fluid particles per GPU on 2"),
    sph("sph-strong-10M-x2", 10e6, 2, about="strong: 10M fluid particles on 2 GPUs"),
    sph("sph-strong-50M-x2", 50e6, 2, about="strong: 50M on 2 GPUs (= weak, 25M per GPU)"),
    sph("sph-weak-10M-x4", 40e6, 4, about="weak: 10M fluid particles per GPU on 4"),
    sph("sph-weak-50M-x4", 200e6, 4, about="weak: 50M fluid particles per GPU on 4"),
    sph("sph-strong-10M-x4", 10e6, 4, about="strong: 10M fluid particles on 4 GPUs"),
    sph("sph-strong-50M-x4", 50e6, 4, about="strong: 50M fluid particles on 4 GPUs"),
    sph("sph-weak-10M-x8", 80e6, 8, about="weak: 10M fluid particles per GPU on 8"),
    sph("sph-strong-50M-x8", 50e6, 8, about="strong: 50M fluid particles on 8 GPUs"),
    BY_NAME["flip-8M"],
    flip("flip-weak-8M-x2", "weak: 8.39M particles per GPU (mirrored tank), 50 steps", FLIP_WEAK, 2),
    BY_NAME["flip-27M"],
    flip("flip-strong-27M-x2", "strong: 28.3M particles on 2 GPUs, 50 steps", FLIP_384, 2),
    flip("flip-8M-150", "8.39M particles, 150 steps, no checkpoint at the end", FLIP_LONG),
    flip("flip-weak-8M-x2-150", "weak: 8.39M per GPU, 150 steps, no end checkpoint",
         FLIP_WEAK + FLIP_LONG, 2),
    BY_NAME["cloth-4M"],
    cloth("cloth-weak-4M-x2", "weak: 4000 x 2000 cells of the same size on 2 GPUs", cells=2000,
          width=2, ranks=2),
    cloth("cloth-strong-4M-x2", "strong: 2000 x 2000 cells on 2 GPUs", cells=2000, ranks=2),
    BY_NAME["cloth-4M-self"],
    cloth("cloth-weak-4M-self-x2", "weak: 4000 x 2000 cells on 2 GPUs, self-collision on",
          cells=2000, width=2, ranks=2, sets=SELF_4M),
    BY_NAME["planes-20M"],
    planes("planes-20M-x2", 20e6, ranks=2),
    planes("planes-100M", 100e6, repeat=4),
    planes("planes-100M-x2", 100e6, repeat=4, ranks=2),
    BY_NAME["bunny"],
    bunny("bunny-x2", "the bunny pair on 2 GPUs, warm", 11, BUNNY, ranks=2),
    BY_NAME["meshdist-1M-tri"],
    samples("meshdist-1M-tri-x2", 4, 2e7, ranks=2),
    BY_NAME["meshdist-10M-tri"],
    samples("meshdist-10M-tri-x2", 12, 2e7, ranks=2),
]
# Figures derived from two cases of the scaling suite: the speed of `case` over that of `one`,
# divided by `ideal` (efficiency; 1 gives the speed-up). Speed is the value, or 1 / value where
# lower is better.
DERIVED = [("weak_scaling_efficiency", "sph-weak-10M-x2", "sph-10M", 2),
           ("speed_up", "sph-strong-10M-x2", "sph-10M", 1),
           ("speed_up", "sph-strong-50M-x2", "sph-50M", 1),
           ("weak_scaling_efficiency", "sph-weak-10M-x4", "sph-10M", 4),
           ("weak_scaling_efficiency", "sph-weak-50M-x4", "sph-50M", 4),
           ("speed_up", "sph-strong-10M-x4", "sph-10M", 1),
           ("speed_up", "sph-strong-50M-x4", "sph-50M", 1),
           ("weak_scaling_efficiency", "sph-weak-10M-x8", "sph-10M", 8),
           ("speed_up", "sph-strong-50M-x8", "sph-50M", 1),
           ("weak_scaling_efficiency", "flip-weak-8M-x2", "flip-8M", 1),  # ms per step: same work per GPU
           ("weak_scaling_efficiency", "flip-weak-8M-x2-150", "flip-8M-150", 1),
           ("speed_up", "flip-strong-27M-x2", "flip-27M", 1),
           ("weak_scaling_efficiency", "cloth-weak-4M-x2", "cloth-4M", 2),
           ("speed_up", "cloth-strong-4M-x2", "cloth-4M", 1),
           ("weak_scaling_efficiency", "cloth-weak-4M-self-x2", "cloth-4M-self", 2),
           ("speed_up", "planes-20M-x2", "planes-20M", 1),
           ("speed_up", "planes-100M-x2", "planes-100M", 1),
           ("speed_up", "bunny-x2", "bunny", 1),
           ("speed_up", "meshdist-1M-tri-x2", "meshdist-1M-tri", 1),  # twice the samples
           ("speed_up", "meshdist-10M-tri-x2", "meshdist-10M-tri", 1)]
# "No speed lost": the cases a change to shared code must keep within a few percent, one GPU.
BENCHMARKS["regression"] = [BY_NAME[n] for n in ("sph-10M", "flip-8M", "cloth-1M", "planes-20M",
                                                  "bunny")]


# ------------------------------------------------------------------------------------ checks

class Skipped(Exception):
    pass


class Failed(Exception):
    pass


class Check:
    """A test of the gpu-tests suite: `steps(c)` runs commands through the CheckRun c; it
    passes when every command exits with 0."""

    def __init__(self, name, about, steps, gpus=1):
        self.name, self.about, self.steps, self.gpus = name, about, steps, gpus


class CheckRun:
    def __init__(self, args, build, work):
        self.args, self.build, self.work, self.smoke = args, build, work, args.smoke
        self.commands, self.ranks, self.extra = [], 1, {}
        self.env = dict(build.env, APRON_SOURCE_DIR=ROOT, APRON_BINARY_DIR=work)

    def run(self, *cmd, ranks=1):
        cmd = mpirun(self.args, ranks) + [str(c) for c in cmd]
        self.commands.append(shlex.join(cmd))
        self.ranks = max(self.ranks, ranks)
        with open(os.path.join(self.work, "log.txt"), "a") as log:
            log.write(f"== {shlex.join(cmd)}\n")
            log.flush()
            if subprocess.run(cmd, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT).returncode:
                raise Failed(shlex.join(cmd))

    def test(self, name, *gtest_args, ranks=1):
        """A test binary beside the build (bundled: flat; a build tree: tests/<dir>/); under
        --smoke only listed, which shows that it loads and starts."""
        found = [p for d in (self.args.tests, os.path.join(self.args.tests, "*"))
                 for p in glob.glob(os.path.join(d, name)) if os.access(p, os.X_OK)]
        if not found:
            raise Skipped(f"no {name} in {self.args.tests}")
        self.run(found[0], *(["--gtest_list_tests"] if self.smoke else gtest_args), ranks=ranks)

    def apron(self, name, file, *sets, ranks=1, smoke=(), exe=None):
        """`apron run FILE` into WORK/NAME; returns that folder."""
        out = os.path.join(self.work, name)
        sets = merge(sets, smoke if self.smoke else (), [f"output.dir={out}"])
        self.run(exe or self.build.exe, "run", file, *[x for s in sets for x in ("--set", s)], ranks=ranks)
        return out

    def python(self, script, *args):
        self.run(sys.executable, script, *args)


def unit_test(binary, *gtest_args, ranks=(1,), gpus=1, name=None):
    about = f"{shlex.join([binary, *gtest_args])} on {', '.join(map(str, ranks))} rank(s)"
    return Check(name or binary, about, lambda c: [c.test(binary, *gtest_args, ranks=n) for n in ranks], gpus)


SHORT_SPH = ["time.end=0.06", "output.every=0", "output.progress_every=100"]
SMOKE_TIME = ["time.end=0.01"]


def sph_ranks_agree(c):
    runs = [c.apron(f"np{n}", "inputs/dam_break.yaml", *SHORT_SPH, ranks=n, smoke=SMOKE_TIME)
            for n in (1, 2, 3, 4)]
    # The paper's 27-cell search (no neighbour record).
    runs.append(c.apron("np2cells27", "inputs/dam_break.yaml", *SHORT_SPH, "sph.cell_divisions=1",
                        ranks=2, smoke=SMOKE_TIME))
    c.python("tests/mpi/compare_runs.py", *runs)


def surge_front(case, validation, spacing_key, spacing=None, ranks=1):
    """The dam break against experiment (surge front, max relative error for 1 <= T <= 2.5);
    the check fails above 10% against Koshizuka & Oka, Martin & Moyce is only printed."""
    def steps(c):
        sets = ["output.every=0", "output.progress_every=100"]
        out = c.apron("run", case, *sets, *([f"{spacing_key}={spacing}"] if spacing else []),
                      ranks=ranks, smoke=SMOKE_TIME)
        if not c.smoke:  # a shortened run has no front to compare
            for source, tolerance in validation:
                c.python("tests/validation/surge_front.py", f"{out}/diagnostics.csv", "--a", 0.146,
                         "--source", source, "--tolerance", tolerance)
    return steps


def cuda_vs_omp(c):
    omp = os.path.join(os.path.dirname(c.build.exe), "apron-omp")
    if not os.access(os.path.join(ROOT, omp), os.X_OK):
        raise Skipped("no apron-omp bundled beside apron")
    runs = [c.apron(name, "inputs/dam_break.yaml", *SHORT_SPH, smoke=SMOKE_TIME, exe=exe)
            for name, exe in (("cuda", c.build.exe), ("omp", omp))]
    c.python("tests/mpi/compare_runs.py", *runs)


def sph_mesh_walls(c):
    """The CI's mesh-wall cases on the GPU, checked by the same scripts: no particle in the
    L-shaped obstacle, the tilted mesh tank's hydrostatic pressure, the piston's force."""
    out = c.apron("mesh", "inputs/dam_break_mesh.yaml", "time.end=0.13", "output.every=0.02")
    c.python("tests/sph/check_obstacle.py", out, "--box", 0.22, 0, 0, 0.32, 0.0438, 0.03,
             "--box", 0.29, 0, 0, 0.32, 0.0438, 0.1)
    out = c.apron("hydrostatic", "tests/sph/hydrostatic_rotated.yaml", "output.every=0.05")
    c.python("tests/sph/check_mesh_tank.py", out, "--box-lo", -0.03, -0.03, -0.05, "--box-hi",
             0.03, 0.03, 0.05, "--rotation", 30, 30, 0, "--offset", 0.1, 0.1, 0.1, "--spacing",
             0.005, "--tolerance", 0.05)
    out = c.apron("flume", "inputs/wave_flume.yaml", "time.end=0.2", "output.every=0",
                  "output.diagnostics_every=2")
    c.python("tests/sph/check_wave_flume.py", out, "--depth", 0.1, "--width", 0.03, "--start",
             0.1, "--period", 0.8)


def planes_vs_omp(c):
    """The same planes as the OpenMP build found on the same 1M-point room (stored)."""
    out = c.apron("run", "inputs/planes_room.yaml", "planes.point_output=false")
    c.python("tests/planes/compare_planes_runs.py", "--planes-only", "bench/results/planes_room_1M_omp", out)


def identical_ranks(file, *sets):
    """1 and 2 ranks must write the same diagnostics, bit for bit."""
    def steps(c):
        runs = [c.apron(f"np{n}", file, *sets, ranks=n) for n in (1, 2)]
        c.run("cmp", *[f"{r}/diagnostics.csv" for r in runs])
    return steps


HANGING = ["cloth.grid.cells=[8, 8, 0]", "time.end=100", "output.every=0"]

CHECKS = [
    *[unit_test(f"test_{t}") for t in ("primitives", "sph_kernels", "meshdist", "config", "hydrostatic",
                                       "flip", "flip_dense", "flip_multigrid", "wall_friction",
                                       "point_cloud_reader", "cloth_geometry", "surface_query",
                                       "flip_mesh_solids")],
    unit_test("test_planes", "--gtest_filter=-Ranks.*"),
    *[unit_test(f"test_{t}", ranks=(1, 2, 3, 4))
      for t in ("exchange", "halo_plan", "brick_halo", "mesh_halo")],
    unit_test("test_particle_output", ranks=(1, 2, 3)),
    unit_test("test_conjugate_gradient", ranks=(1, 2, 3)),
    unit_test("test_planes", "--gtest_filter=Ranks.*", ranks=(1, 2, 3, 4), name="test_planes-ranks"),
    unit_test("test_flip", ranks=(2,), gpus=2, name="test_flip-np2"),
    Check("sph-ranks-agree", "SPH dam break on 1-4 ranks (and the 27-cell search) agree", sph_ranks_agree),
    Check("sph-surge-front", "SPH dam break on 2 ranks against experiment",
          surge_front("inputs/dam_break.yaml", [("koshizuka_oka_1996", 0.10)], "sph.spacing", ranks=2)),
    Check("sph-surge-front-a40", "SPH dam break at a/40 against experiment (resolution study)",
          surge_front("inputs/dam_break.yaml", [("koshizuka_oka_1996", 0.10), ("martin_moyce_1952", 1)],
                      "sph.spacing", 0.00365)),
    Check("sph-mesh-walls", "SPH on mesh walls and a moving piston (the CI's checks)",
          sph_mesh_walls),
    Check("sph-cuda-vs-omp", "the bundled OpenMP build (apron-omp) agrees on the short dam break",
          cuda_vs_omp),
    Check("flip-surge-front", "FLIP dam break against experiment",
          surge_front("inputs/flip_dam_break.yaml", [("koshizuka_oka_1996", 0.10)], "flip.voxel_size")),
    Check("flip-surge-front-a40", "FLIP dam break at a/40 against experiment",
          surge_front("inputs/flip_dam_break.yaml", [("koshizuka_oka_1996", 0.10)], "flip.voxel_size",
                      0.00365)),
    Check("flip-np2", "FLIP dam break on 2 ranks",
          lambda c: c.apron("run", "inputs/flip_dam_break.yaml", "time.end=0.05", ranks=2, smoke=SMOKE_TIME)),
    Check("planes-vs-omp", "planes of the 1M room equal the OpenMP build's", planes_vs_omp),
    Check("cloth-hanging-ranks", "hanging sheet, 200 steps, 1 and 2 ranks identical",
          identical_ranks("inputs/cloth_hanging.yaml", *HANGING, "time.max_steps=200")),
    Check("cloth-implicit-ranks", "implicit hanging sheet, 50 steps, 1 and 2 ranks identical",
          identical_ranks("inputs/cloth_hanging.yaml", *HANGING, "time.max_steps=50", *IMPLICIT,
                          "cloth.implicit.dt=0.01", "cloth.implicit.tolerance=1e-8")),
    Check("cloth-implicit-cantilever", "the cantilever at 2 ms implicit steps, brought to rest",
          lambda c: c.apron("run", "tests/cloth/data/cantilever.yaml", *IMPLICIT, "cloth.implicit.dt=0.002")),
    Check("cloth-drape-np2", "the drape on 2 ranks",
          lambda c: c.apron("run", "inputs/cloth_drape.yaml", "output.every=0", ranks=2,
                            smoke=["time.max_steps=50"])),
]

SUITES = [*BENCHMARKS, "gpu-tests"]
ALL = ["gpu-tests", "sph", "flip", "cloth", "planes", "meshdist", "scaling"]


# ------------------------------------------------------------------------------------ builds

def mpirun(args, ranks, always=False):
    """The launcher for `ranks` ranks; one rank runs without it unless `always`."""
    if ranks == 1 and not always:
        return []
    cmd = shlex.split(args.mpirun)
    if os.geteuid() == 0 and "--allow-run-as-root" not in cmd:
        cmd.append("--allow-run-as-root")  # Open MPI refuses root otherwise
    if args.smoke and "--oversubscribe" not in cmd:
        cmd.append("--oversubscribe")  # more ranks than this machine's cores
    return cmd + ["-n", str(ranks)]


class Build:
    """An apron binary; a bundle's own libraries (BUNDLE/lib) go first in its runs' library path."""

    def __init__(self, label, exe):
        full = os.path.abspath(exe)
        if not os.access(full, os.X_OK):
            sys.exit(f"run.py: {exe} is not an executable")
        self.label = label
        self.exe = os.path.relpath(full, ROOT) if full.startswith(ROOT + os.sep) else full
        self.env = dict(os.environ)
        lib = os.path.join(os.path.dirname(full), "lib")
        if os.path.isdir(lib):
            self.env["LD_LIBRARY_PATH"] = lib + os.pathsep + self.env.get("LD_LIBRARY_PATH", "")
        info = subprocess.run([full, "info"], capture_output=True, text=True, env=self.env, cwd=ROOT)
        self.info_text = info.stdout + info.stderr
        self.info = {"path": self.exe, "version": None, "revision": None, "build_type": None,
                     "backend": None, "device": None}
        for line in info.stdout.splitlines():
            words = line.split()
            if words[:1] == ["apron"] and len(words) >= 4:  # apron 0.1.0 (8907520, Release)
                self.info.update(version=words[1], revision=words[2].strip("(,"),
                                 build_type=words[3].strip(")"))
            elif line.startswith("backend:"):
                self.info["backend"] = line.split(":", 1)[1].strip()
            elif line.startswith("device:"):
                self.info["device"] = line.split(":", 1)[1].strip()


def git_revision():
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=ROOT).returncode != 0
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None  # e.g. a copy of the tree without .git, as on the GPU machine


def gpu_count():
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    except OSError:
        return 0
    return sum(line.startswith("GPU ") for line in listed.splitlines())


# ------------------------------------------------------------------------------------ runs

class Harness:
    def __init__(self, args, builds):
        self.args, self.builds = args, builds  # builds: the baseline first, when there is one
        self.records, self.revision = [], git_revision()
        for sub in ("reports", "logs", "tests"):
            os.makedirs(os.path.join(args.out, sub), exist_ok=True)

    def record(self, suite, name, about, metric, unit, better, ranks, **fields):
        rec = {"schema_version": SCHEMA_VERSION, "suite": suite, "case": name, "about": about,
               "metric": metric, "unit": unit, "better": better, "status": "ok", "value": None,
               "runs": [], "extra": {}, "ranks": ranks, "items": None, "command": None,
               "apron": self.builds[-1].info, "device": None, "git_revision": self.revision,
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "baseline": None, "note": None}
        rec.update(fields)
        self.records.append(rec)
        self.save()
        return rec

    def save(self):
        path = os.path.join(self.args.out, "results.json")
        with open(path + ".tmp", "w") as f:
            json.dump(self.records, f, indent=1)
        os.replace(path + ".tmp", path)

    def run_once(self, case, build, index):
        out = tempfile.mkdtemp(prefix=f"{case.name}-", dir=self.args.scratch)
        sets = merge(case.sets, case.smoke if self.args.smoke else (), self.args.set, [f"output.dir={out}"])
        cmd = mpirun(self.args, case.ranks, case.launcher) + [build.exe, "run", case.file]
        cmd += [x for s in sets for x in ("--set", s)]
        name = f"{case.name}.{build.label}.{index}"
        say(f"run.py: {name}: {shlex.join(cmd)}")
        start = time.perf_counter()
        try:
            with open(os.path.join(self.args.out, "logs", name + ".log"), "w") as log:
                status = subprocess.run(cmd, cwd=ROOT, env=build.env, stdout=log,
                                        stderr=subprocess.STDOUT).returncode
            seconds = time.perf_counter() - start
            report_path = os.path.join(out, "run_report.json")
            if status != 0 or not os.path.exists(report_path):
                raise Failed(f"exit status {status}, log logs/{name}.log")
            kept = os.path.join(self.args.out, "reports", name + ".json")
            shutil.copy(report_path, kept)
            with open(kept) as f:
                report = json.load(f)
        finally:
            shutil.rmtree(out, ignore_errors=True)  # FLIP's checkpoints are GBs
        try:
            value = case.metric.value(report)
            if value is None:
                raise Failed(f"no {case.metric.name} in the report")
            extra = {k: v for k, v in case.metric.extra(report).items() if isinstance(v, (int, float))}
        except (KeyError, IndexError, TypeError, ValueError, statistics.StatisticsError) as e:
            raise Failed(f"reading its report: {e!r}")  # an older build's report may lack a key
        extra["process_seconds"] = seconds
        say(f"run.py: {name}: {value:.4g} {case.metric.unit}")
        return shlex.join(cmd), report, value, extra

    def benchmark(self, suite, case):
        m = case.metric
        if self.args.max_ranks and case.ranks > self.args.max_ranks:
            return self.record(suite, case.name, case.about, m.name, m.unit, m.better, case.ranks,
                               status="skipped", note=f"needs {case.ranks} GPUs")
        got = {b.label: {"runs": [], "extra": [], "error": None} for b in self.builds}
        first = {}
        for index in range(1, self.args.runs + 1):
            for build in self.builds:  # alternating, so that drift hits both builds
                g = got[build.label]
                if g["error"]:
                    continue  # a build that failed once would fail again: save the time
                try:
                    command, report, value, extra = self.run_once(case, build, index)
                except Failed as e:
                    g["error"] = str(e)
                    say(f"run.py: {case.name}.{build.label}.{index}: FAILED: {e}")
                    continue
                first.setdefault(build.label, (command, report))
                g["runs"].append(value)
                g["extra"].append(extra)

        def summary(label):
            g = got[label]
            extra = {k: median(e.get(k) for e in g["extra"]) for k in (g["extra"][0] if g["extra"] else {})}
            return {"value": median(g["runs"]), "runs": g["runs"], "extra": extra,
                    "status": "failed" if g["error"] else "ok", "note": g["error"]}

        new = summary("new")
        command, report = first.get("new", (None, {}))
        baseline = None
        if len(self.builds) == 2:
            base = summary("baseline")
            baseline = {"apron": self.builds[0].info, "value": base["value"], "runs": base["runs"],
                        "extra": base["extra"], "status": base["status"], "note": base["note"],
                        "ratio": new["value"] / base["value"] if new["value"] and base["value"] else None}
        return self.record(suite, case.name, case.about, m.name, m.unit, m.better, case.ranks,
                           status=new["status"], value=new["value"], runs=new["runs"], extra=new["extra"],
                           items=report.get("items"), command=command, device=report.get("devices"),
                           baseline=baseline, note=new["note"])

    def check(self, check):
        build = self.builds[-1]
        work = os.path.join(self.args.out, "tests", check.name)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        c = CheckRun(self.args, build, work)
        status, note, value = "ok", None, 1.0
        if self.args.max_ranks and check.gpus > self.args.max_ranks:
            status, note, value = "skipped", f"needs {check.gpus} GPUs", None
        else:
            say(f"run.py: check {check.name}")
            start = time.perf_counter()
            try:
                check.steps(c)
            except Skipped as e:
                status, note, value = "skipped", str(e), None
            except Failed as e:
                status, note, value = "failed", f"{e} (tests/{check.name}/log.txt)", 0.0
            c.extra["seconds"] = time.perf_counter() - start
        say(f"run.py: check {check.name}: {status}")
        # Keep the logs, reports and diagnostics, not the runs' particle files and checkpoints.
        for path in glob.glob(os.path.join(work, "**", "*"), recursive=True):
            if os.path.isfile(path) and not path.endswith((".txt", ".json", ".csv")):
                os.remove(path)
        return self.record("gpu-tests", check.name, check.about, "passed", "", "higher", c.ranks,
                           status=status, value=value, runs=[] if value is None else [value], extra=c.extra,
                           command=" && ".join(c.commands) or None, device=build.info["device"], note=note)

    def derive(self):
        """The scaling suite's efficiencies and speed-ups, from the medians of this call."""
        done = {r["case"]: r for r in self.records if r["suite"] != "gpu-tests" and r["status"] == "ok"}
        for metric, name, one, ideal in DERIVED:
            if name not in done or one not in done:
                continue
            many, single = done[name], done[one]
            power = 1 if many["better"] == "higher" else -1  # a time: the speed is 1 / value
            value = (many["value"] / single["value"]) ** power / ideal
            baseline = None
            if all(r["baseline"] and r["baseline"]["value"] for r in (many, single)):
                old = (many["baseline"]["value"] / single["baseline"]["value"]) ** power / ideal
                baseline = {"apron": self.builds[0].info, "value": old, "runs": [], "extra": {},
                            "status": "ok", "note": None, "ratio": value / old}
            about = f"{metric.replace('_', ' ')}: {name} against {one}" + (f" x {ideal}" if ideal > 1 else "")
            self.record("scaling", f"{name}/{one}", about, metric, "", "higher", many["ranks"], value=value,
                        extra={"from": [name, one]}, device=many["device"], baseline=baseline)


# ------------------------------------------------------------------------------------ output

def fmt(value):
    return "-" if value is None else f"{value:.4g}"


def table(records):
    lines = [f"{'suite':<10} {'case':<40} {'ranks':>5} {'value':>10} {'unit':<17} {'runs':<19} "
             f"{'baseline':>10} {'ratio':>6}  note"]
    for r in records:
        runs = f"{fmt(min(r['runs']))}-{fmt(max(r['runs']))}" if len(r["runs"]) > 1 else ""
        b = r["baseline"] or {}
        ratio, note = b.get("ratio"), r["note"] or (b.get("note") and f"baseline: {b['note']}") or ""
        if r["status"] != "ok":
            note = f"{r['status'].upper()}: {note}"
        elif ratio and round(abs(ratio - 1), 3):
            faster = ratio > 1 if r["better"] == "higher" else ratio < 1
            note = f"{abs(ratio - 1) * 100:.1f}% {'faster' if faster else 'slower'} " + note
        lines.append(f"{r['suite']:<10} {r['case']:<40} {r['ranks']:>5} {fmt(r['value']):>10} "
                     f"{r['unit'] or r['metric']:<17} {runs:<19} {fmt(b.get('value')):>10} "
                     f"{fmt(ratio):>6}  {note}")
    return "\n".join(lines)


def listing():
    lines = []
    for suite in SUITES:
        lines.append(f"{suite}:")
        for c in BENCHMARKS.get(suite, CHECKS):
            ranks = getattr(c, "ranks", None)
            lines.append(f"  {c.name:<28} {f'{ranks} ranks' if ranks and ranks > 1 else '':<9} {c.about}")
    lines.append(f"all: {' '.join(ALL)}")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="*", metavar="SUITE|CASE")
    p.add_argument("--apron", help="the build to measure")
    p.add_argument("--baseline", help="a build to compare with, run alternately with --apron")
    p.add_argument("--runs", type=int, help="runs per case and build (default 3; 1 with --smoke)")
    p.add_argument("--out", default="bench-out", help="results folder (default bench-out)")
    p.add_argument("--smoke", action="store_true", help="tiny cases: checks the harness on a CPU")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="one more override for every case (repeatable)")
    p.add_argument("--max-ranks", type=int, default=None,
                   help="skip cases with more ranks (default: the GPUs nvidia-smi lists, else no limit)")
    p.add_argument("--mpirun", default="mpirun", help="launcher for several ranks ('-n N' follows)")
    p.add_argument("--tests", help="folder of the test binaries (default: beside --apron)")
    p.add_argument("--scratch", help="where runs write their output (default: the temporary folder)")
    p.add_argument("--list", action="store_true", help="list the suites and cases")
    args = p.parse_args()
    if args.list:
        print(listing())
        return 0
    if not args.names or not args.apron:
        p.error("give suites or cases and --apron")
    known = {c.name: ("gpu-tests", c) for c in CHECKS}
    for suite, cases in BENCHMARKS.items():
        for c in cases:
            known.setdefault(c.name, (suite, c))  # a case's suite: the first that lists it
    todo = []  # (suite, case or check), each once
    for name in args.names:
        if name in known:
            picked = [known[name]]
        elif name in SUITES or name == "all":
            picked = [(s, c) for s in (ALL if name == "all" else [name])
                      for c in (CHECKS if s == "gpu-tests" else BENCHMARKS[s])]
        else:
            p.error(f"unknown suite or case '{name}' (--list names them)")
        todo += [(s, c) for s, c in picked if all(c is not t for _, t in todo)]
    args.runs = args.runs or (1 if args.smoke else 3)
    if args.max_ranks is None:
        args.max_ranks = gpu_count() or None
    args.tests = args.tests or os.path.dirname(os.path.abspath(args.apron))
    args.out = os.path.abspath(args.out)
    builds = ([Build("baseline", args.baseline)] if args.baseline else []) + [Build("new", args.apron)]
    harness = Harness(args, builds)
    for b in builds:
        with open(os.path.join(args.out, f"info_{b.label}.txt"), "w") as f:
            f.write(b.info_text)
    status, done = 0, 0
    try:
        for suite, item in todo:
            rec = harness.check(item) if isinstance(item, Check) else harness.benchmark(suite, item)
            status = status or int("failed" in (rec["status"], (rec["baseline"] or {}).get("status")))
            done += 1
    except KeyboardInterrupt:  # bench/gpu.sh stops us before the machine's time limit
        status = 130
    harness.derive()
    harness.save()
    print(table(harness.records))
    if done < len(todo):
        print(f"interrupted: not measured {' '.join(item.name for _, item in todo[done:])}")
    say(f"run.py: {len(harness.records)} records in {os.path.join(args.out, 'results.json')}")
    return status


if __name__ == "__main__":
    sys.exit(main())
