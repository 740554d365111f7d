#!/usr/bin/env bash
# One GPU-machine call (nvidia-h200-x2) for issue 14 (engine foundations): the GPU tests of the new
# device primitives, halo plan, brick and mesh halos and the reworked exchange, the SPH checks on
# 1-4 ranks, then "no speed lost": the CUDA build before the change (.device/apron-base, 36126c6)
# against the one after (.device/apron), same calls: SPH at 10M on one GPU, 2-GPU weak scaling at
# 10M per GPU, the bunny mesh distance. Results in $OUT.
# Usage: bash bench/gpu_foundations.sh [tests|bench|all] (two calls fit the 10-minute limit).
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
run primitives .device/test_primitives
run sph_kernels .device/test_sph_kernels
run meshdist .device/test_meshdist
run config .device/test_config
for n in 1 2 3 4; do
  for t in exchange halo_plan brick_halo mesh_halo; do run ${t}_np$n mpirun -n $n .device/test_$t; done
done
run hydrostatic .device/test_hydrostatic
run dam_break mpirun -n 2 .device/apron run inputs/dam_break.yaml --set output.dir=$out/dam_break \
    --set output.every=0.05 --set output.progress_every=30
run surge_front python3 tests/validation/surge_front.py $out/dam_break/diagnostics.csv --a 0.146
for n in 1 2 3 4; do
  run dam_break_np$n mpirun -n $n .device/apron run inputs/dam_break.yaml --set time.end=0.06 \
      --set output.every=0 --set output.dir=$out/np$n --set output.progress_every=100
done
run rank_consistency python3 tests/mpi/compare_runs.py $out/np1 $out/np2 $out/np3 $out/np4
grep -h "outside_tank\|max relative" "$out/surge_front.log"
fi
[[ $part == tests ]] && exit $status

# Before and after, the same calls, alternating so that drift hits both.
sph() { python3 bench/sph_throughput.py --apron ".device/$1" --steps 100 --repeat 3 "${@:2}" 2>&1 | tail -1; }
for round in 1 2; do
  for build in apron-base apron; do
    echo "round $round $build 1 GPU:  $(sph $build --particles 10e6 --json $out/sph1_${build}_$round.json)"
    echo "round $round $build 2 GPUs: $(sph $build --ranks 2 --per-rank --particles 10e6 \
        --json $out/sph2_${build}_$round.json)"
  done
done
for build in apron-base apron apron-base apron; do
  .device/$build run inputs/meshdist_bunny.yaml --set output.dir=$out/bunny_$build \
      --set meshdist.a.file=inputs/meshes/stanford-bunny.ply \
      --set meshdist.b.file=inputs/meshes/stanford-bunny-low.ply --set meshdist.repeat=10 \
      > "$out/bunny_$build.log" 2>&1
  echo "$build bunny: $(grep -o 'analysis [0-9]* of 10: [0-9.]* ms' "$out/bunny_$build.log" | \
      awk '{print $5}' | sort -n | awk '{a[NR]=$1} END {print "median of 10:", a[int((NR+1)/2)], "ms; first:"}') \
      $(grep -o 'analysis 1 of 10: [0-9.]* ms' "$out/bunny_$build.log" | awk '{print $5}') ms"
done
exit $status
