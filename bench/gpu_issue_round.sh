#!/usr/bin/env bash
# One GPU-machine call (nvidia-h200-x2) after merging: the GPU test suite, the SPH throughput at
# 10M on 1 GPU and 10M per GPU on 2 (no regression), and NCCL's own account of its transport
# (NCCL_DEBUG=INFO), which bench/NOTES.md found slow. Results under $OUT.
set -uo pipefail
source .device/env.sh
out=${OUT:-gpu-out}; mkdir -p "$out"
nvidia-smi topo -m > "$out/topology.txt" 2>&1; cat "$out/topology.txt"
OUT=$out/check bash bench/gpu_check.sh > "$out/check.txt" 2>&1; echo "gpu_check: exit $?"
grep -E "FAILED|PASSED" "$out/check.txt" | sed 's/\x1b\[[0-9;]*m//g' | sort | uniq -c
.device/test_meshdist 2>&1 | tail -1
python3 bench/sph_throughput.py --apron .device/apron --particles 10e6 --steps 100 --repeat 3 \
    --json "$out/sph_1gpu.json" 2>&1 | tail -2
python3 bench/sph_throughput.py --apron .device/apron --ranks 2 --per-rank --particles 10e6 \
    --steps 100 --repeat 3 --json "$out/sph_2gpu_weak.json" 2>&1 | tail -2
S=$(python3 -c "print((0.146 * 0.292 * 0.292 / 20e6) ** (1 / 3))")
APRON_TRANSPORT=nccl NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P,SHM,NET mpirun -n 2 .device/apron run \
    inputs/dam_break_large.yaml --set sph.spacing=$S --set time.max_steps=100 --set output.every=0 \
    --set output.dir=/tmp/nccl --set output.progress_every=1000 > "$out/nccl.txt" 2>&1
grep -E "NCCL INFO (Channel|.*via|Using|P2P|comm .* rank|cudaDev|NVLS|CUMEM)" "$out/nccl.txt" | sort | uniq -c | head -30
grep -E "^halo|step loop|transport" "$out/nccl.txt"
