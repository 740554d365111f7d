#!/usr/bin/env bash
# Plane detection (issue 16) on the GPU machine, one call: the CUDA build's tests (each stage
# against its sequential reference, the scenes against ground truth, 1-4 ranks, readers), CUDA
# against OpenMP (the planes of bench/results/planes_room_1M_omp, written by the OpenMP build on
# the CPU machine), then the benchmark: the room at 1M and 20M points end to end from host memory
# (targets on one H200: <= 10 ms and <= 100 ms), per-stage medians of 7 repetitions after a
# warm-up, on one GPU and, with GPUS >= 2, two (the 2-GPU speed-up at 20M and 100M).
# Builds nothing. Usage (GPU machine, checkout root, CUDA build bundled as .device/):
#   bash bench/gpu_planes.sh [GPUS] [tests|bench|all]
# Results (logs and JSON) under $OUT.
set -uo pipefail
source .device/env.sh
out=${OUT:-gpu-out}; gpus=${1:-1}; part=${2:-all}
mkdir -p "$out"
nvidia-smi -L | tee "$out/gpus.txt"
status=0
run() {  # run NAME COMMAND...: log to $out/NAME.log, one line of verdict
  local name=$1; shift
  if "$@" > "$out/$name.log" 2>&1; then echo "ok     $name"; else echo "FAILED $name"; status=1; fi
}
if [[ $part != bench ]]; then
  run planes_stages .device/test_planes --gtest_filter=-Ranks.*
  grep -h "planes .* of\|room 1M" "$out/planes_stages.log"
  for n in 1 2 3 4; do run planes_ranks_np$n mpirun -n $n .device/test_planes --gtest_filter=Ranks.*; done
  run point_cloud_reader .device/test_point_cloud_reader
  # CUDA against OpenMP: the same case as bench/results/planes_room_1M_omp.
  run planes_cuda_1M .device/apron run inputs/planes_room.yaml --set output.dir=$out/planes_cuda_1M \
      --set planes.point_output=false
  run cuda_vs_omp python3 tests/planes/compare_planes_runs.py --planes-only bench/results/planes_room_1M_omp \
      $out/planes_cuda_1M
  cat "$out/cuda_vs_omp.log"
fi
[[ $part == tests ]] && exit $status

bench() { python3 bench/planes_bench.py --apron .device/apron --repeat 8 "$@"; }
bench --points 1e6 --json "$out/planes_1M_1gpu.json" || status=1
bench --points 20e6 --json "$out/planes_20M_1gpu.json" || status=1
if ((gpus >= 2)); then
  bench --points 20e6 --ranks 2 --json "$out/planes_20M_2gpu.json" || status=1
  bench --points 100e6 --repeat 4 --json "$out/planes_100M_1gpu.json" || status=1
  bench --points 100e6 --repeat 4 --ranks 2 --json "$out/planes_100M_2gpu.json" || status=1
fi
exit $status
