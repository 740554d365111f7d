#!/usr/bin/env bash
# One GPU-machine call for issue 15 (FLIP on sparse bricks): the FLIP tests under CUDA, CUDA against
# the CI's OpenMP figures on a short dam break, then the paper's dam break (8M particles on 256^3)
# on one GPU with per-phase times, and on two GPUs when the machine has them. Results in $OUT.
# Usage: bash bench/gpu_flip.sh [tests|bench|all|mgpcg]
#   mgpcg: the tests, then the multigrid preconditioner's figures: iteration counts at two
#   resolutions, the paper's case at 256^3 and 384^3 with preconditioner mgpcg (3 runs each).
set -uo pipefail
source .device/env.sh
out=${OUT:-gpu-out}; mkdir -p "$out"
nvidia-smi -L | tee "$out/gpus.txt"
export APRON_SOURCE_DIR=$PWD APRON_BINARY_DIR=$out
part=${1:-all}
status=0
run() {  # run NAME COMMAND...: log to $out/NAME.log, one line of verdict
  local name=$1; shift
  if "$@" > "$out/$name.log" 2>&1; then echo "ok     $name"; else echo "FAILED $name"; status=1; fi
}
gpus=$(nvidia-smi -L | wc -l)
if [[ $part != bench ]]; then
  run flip_np1 .device/test_flip
  run flip_dense .device/test_flip_dense
  run flip_multigrid .device/test_flip_multigrid
  run wall_friction .device/test_wall_friction
  [[ $gpus -ge 2 ]] && run flip_np2 mpirun -n 2 .device/test_flip
  run dam_break mpirun -n 1 .device/apron run inputs/flip_dam_break.yaml --set output.dir=$out/dam_break \
      --set output.every=0 --set output.progress_every=30
  run surge_front python3 tests/validation/surge_front.py $out/dam_break/diagnostics.csv --a 0.146 \
      --source koshizuka_oka_1996
  grep -h "max relative" "$out/surge_front.log"
  # The finer resolution of the validation (a/40: 307,200 particles), too slow for CI.
  run dam_break_fine mpirun -n 1 .device/apron run inputs/flip_dam_break.yaml \
      --set flip.voxel_size=0.00365 --set output.dir=$out/dam_break_fine --set output.every=0 \
      --set output.progress_every=100
  run surge_front_fine python3 tests/validation/surge_front.py $out/dam_break_fine/diagnostics.csv \
      --a 0.146 --source koshizuka_oka_1996
  grep -h "max relative" "$out/surge_front_fine.log"
fi
[[ $part == tests ]] && exit $status

# The paper's case: 50 steps, 3 runs; the report holds per-phase times and steps per second.
large() {  # large NAME RANKS [--set ...]
  local name=$1 ranks=$2; shift 2
  mpirun -n "$ranks" .device/apron run inputs/flip_dam_break_large.yaml \
      --set output.dir=$out/$name --set output.progress_every=30 "$@" > "$out/$name.log" 2>&1
  python3 - "$out/$name/run_report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
steps, loop = r["steps"], r["loop_seconds"]
phases = {k: v["max_seconds"] / steps * 1e3 for k, v in r["phases"].items()}
order = ["topology", "topology replan", "particle sort", "p2g", "apron", "pressure", "g2p+advection", "migration"]
print(f'{r["ranks"]} rank(s): {r["items"]:.3g} particles, {loop / steps * 1e3:.1f} ms/step, '
      f'CG {r["flip"]["cg_iterations"]} it, {r["flip"]["device_bytes_per_particle"]:.0f} B/particle; '
      + ", ".join(f"{k} {phases[k]:.1f}" for k in order if k in phases))
PY
}
if [[ $part == mgpcg ]]; then
  python3 tests/flip/mgpcg_iterations.py --apron .device/apron --case inputs/flip_dam_break.yaml \
      --work $out/iterations | tee "$out/iterations.txt"
  for round in 1 2 3; do large mg256_$round 1 --set flip.pressure.preconditioner=mgpcg; done
  for round in 1 2 3; do
    large mg384_$round 1 --set flip.pressure.preconditioner=mgpcg --set flip.voxel_size=0.0026041666666666665
  done
  exit $status
fi
for round in 1 2 3; do large large_1gpu_$round 1; done
if [[ $gpus -ge 2 ]]; then
  for round in 1 2 3; do large large_2gpu_strong_$round 2; done
fi
exit $status
