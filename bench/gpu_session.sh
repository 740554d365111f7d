#!/usr/bin/env bash
# One GPU-machine session: correctness checks, then the SPH benchmarks of bench/NOTES.md.
# Usage (GPU machine, checkout root): bash bench/gpu_session.sh [GPUS]; results under $OUT.
set -uo pipefail
source .device/env.sh
out=${OUT:-gpu-out}; gpus=${1:-1}
bash bench/gpu_check.sh > "$out/check.log" 2>&1; echo "checks: exit $? (log: check.log)"
grep -E "FAILED|max relative" "$out/check.log"
# Resolution study of the dam break: a/20 (the CI case) and a/40.
.device/apron run inputs/dam_break.yaml --set sph.spacing=0.00365 --set output.every=0 \
    --set output.dir="$out/dam_break_a40" --set output.progress_every=100 > /dev/null
for src in koshizuka_oka_1996 martin_moyce_1952; do
  for run in dam_break dam_break_a40; do
    echo -n "$run vs $src: "
    python3 tests/validation/surge_front.py "$out/$run/diagnostics.csv" --a 0.146 --source $src | tail -1
  done
done
# The paper's sizes (15k, 30k, 70k fluid particles).
python3 bench/sph_throughput.py --apron .device/apron --particles 15e3 30e3 70e3 --steps 200 --repeat 3 \
    --json "$out/paper_sizes.json"
python3 bench/sph_throughput.py --apron .device/apron --particles 1e6 10e6 50e6 --steps 100 --repeat 3 \
    --json "$out/one_gpu.json"
if ((gpus >= 2)); then
  python3 bench/sph_throughput.py --apron .device/apron --ranks 2 --particles 10e6 50e6 --steps 100 \
      --repeat 3 --json "$out/two_gpu_strong.json"
  python3 bench/sph_throughput.py --apron .device/apron --ranks 2 --per-rank --particles 10e6 25e6 \
      --steps 100 --repeat 3 --json "$out/two_gpu_weak.json"
fi
