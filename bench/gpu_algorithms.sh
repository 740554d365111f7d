#!/usr/bin/env bash
# One GPU-machine call (one GPU) for issue 18's algorithms layer: every device algorithm that
# workload code called through Thrust now goes through kernels/common/algorithms.hpp, and the
# radix-sort fallback, run lengths, cell starts and the halo plan's grouping changed. The GPU tests
# of every workload on 1-4 ranks, then "no speed lost": the CUDA build before the change
# (.device/apron-base) against the one after (.device/apron), alternating, SPH at 10M particles.
# Usage: bash bench/gpu_algorithms.sh [tests|bench|all]. Results in $OUT.
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
if [[ $part != bench ]]; then
  for t in primitives sph_kernels meshdist config flip planes cloth_geometry hydrostatic; do
    run $t .device/test_$t
  done
  for n in 1 2 3 4; do
    for t in exchange halo_plan brick_halo mesh_halo; do run ${t}_np$n mpirun -n $n .device/test_$t; done
    run dam_break_np$n mpirun -n $n .device/apron run inputs/dam_break.yaml --set time.end=0.06 \
        --set output.every=0 --set output.dir=$out/np$n --set output.progress_every=100
  done
  run rank_consistency python3 tests/mpi/compare_runs.py $out/np1 $out/np2 $out/np3 $out/np4
  run flip_np2 mpirun -n 2 .device/apron run inputs/flip_dam_break.yaml --set time.end=0.05 \
      --set output.dir=$out/flip
  run planes_room .device/apron run inputs/planes_room.yaml --set output.dir=$out/planes
  run cloth_drape mpirun -n 2 .device/apron run inputs/cloth_drape.yaml --set output.dir=$out/cloth
  run bunny .device/apron run inputs/meshdist_bunny.yaml --set output.dir=$out/bunny
fi
[[ $part == tests ]] && exit $status

# Before and after, the same calls, alternating so that drift hits both (after only, when no
# apron-base was bundled: then against the figures in bench/NOTES.md).
sph() { python3 bench/sph_throughput.py --apron ".device/$1" --steps 100 --repeat 3 "${@:2}" 2>&1 | tail -1; }
builds=apron
[[ -x .device/apron-base ]] && builds="apron-base apron"
for round in 1 2; do
  for build in $builds; do
    echo "round $round $build 1 GPU: $(sph $build --particles 10e6 --json $out/sph1_${build}_$round.json)"
  done
done
exit $status
