#!/usr/bin/env bash
# Mesh-distance benchmarks of issue 5 on the GPU machine: the checks first, then the bunny pair end
# to end (target < 2 ms on one H200/H100) and samples/s against 1M and 10M-triangle targets
# (target >= 1e8), on one GPU and, with GPUS >= 2, two (the 2-GPU speed-up).
# Usage (GPU machine, checkout root, CUDA build bundled as .device/): bash bench/meshdist_gpu.sh [GPUS]
# The bunny pair ships in inputs/meshes/. Results under $OUT.
set -uo pipefail
source .device/env.sh
out=${OUT:-gpu-out}; gpus=${1:-1}
mkdir -p "$out"
# Correctness on the device: grid search == brute force, analytic cases (CUDA build of the tests).
if [[ -x .device/test_meshdist ]]; then
  .device/test_meshdist > "$out/meshdist_check.log" 2>&1; echo "test_meshdist: exit $?"
  grep -E "PASSED|FAILED" "$out/meshdist_check.log"
fi
# The bunny pair with all numbers, per-vertex error fields included.
.device/apron run inputs/meshdist_bunny.yaml --set output.dir="$out/meshdist_bunny" \
    --set meshdist.repeat=5 > "$out/meshdist_bunny.log" 2>&1; echo "bunny run: exit $?"
grep -A8 "^mesh distance" "$out/meshdist_bunny.log"; grep "analysis" "$out/meshdist_bunny.log"
python3 bench/meshdist_throughput.py --apron .device/apron --samples 1e7 --repeat 3 \
    --json "$out/meshdist_one_gpu.json"
if ((gpus >= 2)); then
  python3 bench/meshdist_throughput.py --apron .device/apron --ranks 2 --samples 2e7 --repeat 3 \
      --json "$out/meshdist_two_gpu.json"
fi
