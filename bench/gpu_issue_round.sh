#!/usr/bin/env bash
# One GPU-machine call for this session's changes (meshdist upload, background checkpoints,
# pinned staging): the mesh-distance benchmarks on 1 and 2 GPUs, checkpoint bandwidth and cost at
# 10M and 50M particles, then the GPU test suite. Results under $OUT.
set -uo pipefail
source .device/env.sh
out=${OUT:-gpu-out}; mkdir -p "$out"
if [[ ! -f ../shared/data/meshes/stanford-bunny.obj && -d .device/meshes ]]; then
  mkdir -p ../shared/data/meshes && cp .device/meshes/* ../shared/data/meshes/
fi
OUT=$out bash bench/meshdist_gpu.sh 2 2>&1 | tee "$out/meshdist.txt"
python3 bench/checkpoint_bandwidth.py --apron .device/apron --particles 10e6 --steps 400 \
    --every 100 --repeat 3 --dir /tmp/ck --json "$out/checkpoint_10M.json" 2>&1 | tee "$out/checkpoint.txt"
OUT=$out/check bash bench/gpu_check.sh > "$out/check.txt" 2>&1; echo "gpu_check: exit $?"
grep -E "FAILED|PASSED|passed|failed" "$out/check.txt" | tail -20
python3 bench/checkpoint_bandwidth.py --apron .device/apron --particles 50e6 --steps 200 \
    --every 100 --repeat 1 --dir /tmp/ck --json "$out/checkpoint_50M.json" 2>&1 | tee -a "$out/checkpoint.txt"
