#!/usr/bin/env bash
# Cloth hourglass control and output measures (issue 17, session 16) on the GPU machine, from the
# checkout root, after ../shared/gpu/bundle.sh put the CUDA build in .device/ (apron,
# test_cloth_geometry, cloth_kernels). Results under $OUT (default gpu-out):
#   1. the kernel tests under CUDA (the measures' and the hourglass control's included);
#   2. the kernels' speed at 100^2 and 1000^2 (the gradient without and with hourglass control);
#   3. whole steps of inputs/cloth_large.yaml at 1M vertices, hourglass 0 and 0.1 (the default)
#      alternating, 3 runs each (the run report's steady rate);
#   4. the drape at 32x32 cells on 2 ranks, hourglass 0 and 0.1: its diagnostics (energy gain);
#   5. the hanging sheet (8x8, 200 steps) on 1 and 2 ranks: diagnostics.csv for the caller to
#      compare with each other and with the OpenMP build's.
set -uo pipefail
source bench/gpu_common.sh
run .device/test_cloth_geometry > "$out/test_cloth_geometry.log" 2>&1
grep -E "PASSED|FAILED|interior W|measures vs|adjoint vs" "$out/test_cloth_geometry.log"
run .device/cloth_kernels 100 1000 | tee "$out/cloth_kernels.txt"
for r in 1 2 3; do
  for h in 0 0.1; do
    run .device/apron run inputs/cloth_large.yaml --set cloth.material.hourglass=$h \
        --set output.dir="$out/large_h${h}_$r" --set output.progress_every=100 \
        > "$out/large_h${h}_$r.log" 2>&1
    echo "hourglass $h, run $r: $(grep -E "step loop" "$out/large_h${h}_$r.log")"
  done
done
for h in 0 0.1; do
  run mpirun -n 2 .device/apron run inputs/cloth_drape.yaml --set "cloth.grid.cells=[32, 32, 0]" \
      --set cloth.material.hourglass=$h --set output.every=0 --set output.dir="$out/drape_h$h" \
      --set output.progress_every=100 > "$out/drape_h$h.log" 2>&1
done
hanging_sheet_runs
find "$out" -mindepth 2 -type f ! -name run_report.json ! -name diagnostics.csv -delete
exit $status
