#!/usr/bin/env bash
# The cloth's implicit integrator on the GPU machine (issue 17), from the checkout root after
# ../shared/gpu/bundle.sh put the CUDA build in .device/. Results under $OUT:
#   implicit_np{1,2}.csv    the hanging sheet (8x8 cells, 50 implicit steps of 10 ms) on 1 and 2
#                           ranks, to compare with each other and with the OpenMP build's;
#   cantilever.csv          the cantilever (tests/cloth/data) at 2 ms steps, brought to rest;
#   large.txt               inputs/cloth_large.yaml (1M vertices) to t = 0.2 ms, explicit
#                           (cfl 0.5) against implicit at 10 and 40 us: step-loop time, steps,
#                           CG iterations.
set -uo pipefail
source .device/env.sh
out=${OUT:-gpu-out}; mkdir -p "$out"
work=$(mktemp -d)
implicit=(--set cloth.integrator=implicit --set cloth.implicit.max_iterations=1000)
for n in 1 2; do
  mpirun -n $n .device/apron run inputs/cloth_hanging.yaml --set "cloth.grid.cells=[8, 8, 0]" \
      --set time.max_steps=50 --set time.end=100 --set output.every=0 "${implicit[@]}" \
      --set cloth.implicit.dt=0.01 --set cloth.implicit.tolerance=1e-8 \
      --set output.dir="$work/np$n" > /dev/null && cp "$work/np$n/diagnostics.csv" "$out/implicit_np$n.csv"
done
.device/apron run tests/cloth/data/cantilever.yaml "${implicit[@]}" --set cloth.implicit.dt=0.002 \
    --set output.dir="$work/cantilever" > /dev/null && cp "$work/cantilever/diagnostics.csv" "$out/cantilever.csv"
report() {  # the run's step-loop line and its integrator figures
  grep "step loop" "$1.log"
  python3 -c "import json; c = json.load(open('$1/run_report.json'))['cloth']; \
print({k: c[k] for k in c if k.startswith('cg') or k in ('integrator', 'dt')})"
}
{
  .device/apron run inputs/cloth_large.yaml --set time.end=2e-4 --set time.max_steps=0 \
      --set output.dir="$work/explicit" > "$work/explicit.log" 2>&1 && report "$work/explicit"
  for dt in 1e-5 4e-5; do
    .device/apron run inputs/cloth_large.yaml --set time.end=2e-4 --set time.max_steps=0 \
        --set cloth.precision=float64 "${implicit[@]}" --set cloth.implicit.dt=$dt \
        --set output.dir="$work/implicit_$dt" > "$work/implicit_$dt.log" 2>&1 && report "$work/implicit_$dt"
  done
} | tee "$out/large.txt"
rm -rf "$work"
