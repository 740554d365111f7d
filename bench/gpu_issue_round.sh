#!/usr/bin/env bash
# One GPU-machine call (nvidia-h200-x2): the GPU test suite (halos through NCCL by default now),
# then SPH throughput: 1M, 10M and 50M on 1 GPU, weak (10M per GPU) and strong (10M, 50M) on 2 GPUs
# with the default transport. Results in $OUT.
set -uo pipefail
source .device/env.sh
out=${OUT:-gpu-out}; mkdir -p "$out"
OUT=$out/check bash bench/gpu_check.sh > "$out/check.txt" 2>&1; echo "gpu_check: exit $?"
grep -E "FAILED" "$out/check.txt"
grep -h '"halo_transport"' "$out"/check/np2/run_report.json
bench() { python3 bench/sph_throughput.py --apron .device/apron --steps 100 --repeat 3 "$@" 2>&1 | tail -2; }
mpirun -n 2 .device/halo_transport | tee "$out/halo_transport.txt"
bench --particles 1e6 10e6 50e6 --json "$out/sph_1gpu.json"
bench --ranks 2 --per-rank --particles 10e6 --json "$out/sph_2gpu_weak.json"
bench --ranks 2 --particles 10e6 50e6 --json "$out/sph_2gpu_strong.json"
