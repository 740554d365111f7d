#!/usr/bin/env bash
# One GPU-machine call for issue 15 (FLIP on sparse bricks): the FLIP tests under CUDA, CUDA against
# the CI's OpenMP figures on a short dam break, then the paper's dam break (8M particles on 256^3)
# on one GPU with per-phase times, and weak and strong scaling on two GPUs when the machine has
# them. Results in $OUT.
# Usage: bash bench/gpu_flip.sh [tests|bench|all|mgpcg|weak]
#   mgpcg: the tests, then the multigrid preconditioner's figures: iteration counts at two
#   resolutions, the paper's case at 256^3 and 384^3 with preconditioner mgpcg (3 runs each).
#   weak: (2 GPUs) the weak-scaling pair only, 150 steps and no checkpoint at the end, 3 runs each.
set -uo pipefail
source .device/env.sh
out=${OUT:-gpu-out}; mkdir -p "$out"
scratch=${TMPDIR:-/tmp}/apron-gpu-flip; rm -rf "$scratch"; mkdir -p "$scratch"
nvidia-smi -L | tee "$out/gpus.txt"
export APRON_SOURCE_DIR=$PWD APRON_BINARY_DIR=$out
part=${1:-all}
status=0
run() {  # run NAME COMMAND...: log to $out/NAME.log, one line of verdict
  local name=$1; shift
  if "$@" > "$out/$name.log" 2>&1; then echo "ok     $name"; else echo "FAILED $name"; status=1; fi
}
gpus=$(nvidia-smi -L | wc -l)
if [[ $part != bench && $part != weak ]]; then
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
  # The run's files go to scratch (checkpoints are GBs); its log and report come back in $out.
  mpirun -n "$ranks" .device/apron run inputs/flip_dam_break_large.yaml \
      --set output.dir=$scratch/$name --set output.progress_every=30 "$@" > "$out/$name.log" 2>&1
  cp "$scratch/$name/run_report.json" "$out/$name.json"
  python3 - "$out/$name.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
steps, loop = r["steps"], r["loop_seconds"]
phases = {k: v["max_seconds"] / steps * 1e3 for k, v in r["phases"].items()}
order = ["topology", "topology replan", "topology build", "particle sort", "p2g", "apron", "pressure", "g2p+advection", "migration"]
steady = r["items"] / r["steady_item_steps_per_second"] * 1e3  # steps 11.., no warm-up
print(f'{r["ranks"]} rank(s): {r["items"]:.3g} particles, {loop / steps * 1e3:.1f} ms/step '
      f'({steady:.1f} after the first 10), '
      f'CG {r["flip"]["cg_iterations"]} it, {r["flip"]["device_bytes_per_particle"]:.0f} B/particle; '
      + ", ".join(f"{k} {phases[k]:.1f}" for k in order if k in phases)
      + (f'; brick halo {h["messages"] / steps:.0f} messages/step, {h["bytes_sent"] / steps / 1e6:.2f} MB/step'
         f' ({h["transport"]})' if (h := r["flip"].get("brick_halo")) and r["ranks"] > 1 else ""))
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
# Scaling on two GPUs. Weak: the tank twice as deep (z) holding the 1-GPU case and its mirror
# image across z = 1, so each rank (RCB cuts z at 1) runs the 1-GPU case's 8.4M particles; with
# free-slip walls the mirror plane acts as the wall the 1-GPU case has there.
# Strong: the 27M case (384^3) on one GPU and on two.
weak2=(--set 'domain={lo: [0, 0, 0], hi: [1.0, 1.0, 2.0]}'
       --set 'fluid=[{lo: [0, 0, 0], hi: [0.25, 0.5, 0.5]}, {lo: [0, 0, 1.5], hi: [0.25, 0.5, 2.0]}]')
fine=(--set flip.voxel_size=0.0026041666666666665)
if [[ $part == weak ]]; then
  long=(--set time.max_steps=150 --set checkpoint.at_end=false)
  for round in 1 2 3; do large long_1gpu_$round 1 "${long[@]}"; done
  for round in 1 2 3; do large long_weak_2gpu_$round 2 "${weak2[@]}" "${long[@]}"; done
  exit $status
fi
for round in 1 2 3; do large large_1gpu_$round 1; done
if [[ $gpus -ge 2 ]]; then
  for round in 1 2 3; do large weak_2gpu_$round 2 "${weak2[@]}"; done
  for round in 1 2 3; do large strong384_1gpu_$round 1 "${fine[@]}"; done
  for round in 1 2 3; do large strong384_2gpu_$round 2 "${fine[@]}"; done
fi
exit $status
