#!/usr/bin/env bash
# Cloth (issue 17) on the GPU machine, from the checkout root, after ../shared/gpu/bundle.sh put
# the CUDA build in .device/ (apron, test_cloth_geometry, cloth_kernels). Results under $OUT.
#   1. the kernel tests under CUDA;
#   2. the kernels' speed (bench/cloth_kernels: the seed's 100x100 tensor step, the energy and
#      its gradient) at 100^2, 1000^2 and 2000^2 vertices;
#   3. whole steps of inputs/cloth_large.yaml at 1M and 4M vertices, 3 runs each (the run
#      report's steady vertex-steps/s and device bytes per vertex), and 2 runs at 1M with the
#      float64 gradient (cloth.precision) for comparison;
#   4. the hanging sheet for 200 steps on 1 and 2 ranks sharing the GPU, whose diagnostics the
#      caller compares with each other and with the OpenMP build's (same case, same steps);
#   5. Nsight Compute on one gradient at 1M vertices: each pass's time, registers, active warps
#      and DRAM bytes (cloth_profile.txt).
set -uo pipefail
source bench/gpu_common.sh
run .device/test_cloth_geometry > "$out/test_cloth_geometry.log" 2>&1
tail -3 "$out/test_cloth_geometry.log"
run .device/cloth_kernels 100 1000 2000 | tee "$out/cloth_kernels.txt"
for cells in 1000 2000; do
  for r in 1 2 3; do
    run .device/apron run inputs/cloth_large.yaml --set "cloth.grid.cells=[$cells, $cells, 0]" \
        --set output.dir="$out/large_${cells}_$r" --set output.progress_every=100 \
        > "$out/large_${cells}_$r.log" 2>&1
    grep -E "step loop|forces|integrate|halo " "$out/large_${cells}_$r.log"
  done
done
for r in 1 2; do
  run .device/apron run inputs/cloth_large.yaml --set cloth.precision=float64 \
      --set output.dir="$out/large_f64_$r" --set output.progress_every=100 > "$out/large_f64_$r.log" 2>&1
  grep -E "step loop|forces" "$out/large_f64_$r.log"
done
hanging_sheet_runs
metrics=gpu__time_duration.sum,launch__registers_per_thread,dram__bytes.sum
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active
ncu --kernel-name-base demangled --launch-skip 40 --launch-count 12 --metrics "$metrics" \
    --kernel-name "regex:NormalsKernel|VertexAdjointKernel|NormalSumAdjointKernel|GatherKernel" \
    .device/apron run inputs/cloth_large.yaml --set time.max_steps=12 \
    --set output.dir="$out/profile_run" --set output.progress_every=1000 2>&1 |
  grep -E "Kernel|gpu__|launch__|dram__|sm__" | grep -v "^==PROF==" > "$out/cloth_profile.txt"
rm -rf "$out/profile_run" "$out"/large_*/  # keep the logs, not the runs' files
exit $status
