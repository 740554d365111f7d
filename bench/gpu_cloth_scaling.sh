#!/usr/bin/env bash
# Cloth (issue 17) on two GPUs of one host (`nvidia-h200-x2`), from the checkout root, after
# ../shared/gpu/bundle.sh put the CUDA build in .device/ (apron, test_cloth_geometry).
# Results under $OUT; bench/cloth_scaling.py prints the table from the run reports.
#   1. the kernel tests under CUDA on this machine;
#   2. whole steps of a 100 x 100 sheet on one GPU (the seed's size; 2000 steps, 3 runs);
#   3. weak scaling at 4M vertices per GPU: a 1 x 1 m sheet of 2000 x 2000 cells on one GPU
#      against a 2 x 1 m sheet of 4000 x 2000 cells (the same 0.5 mm cells) on two, 3 runs each,
#      alternating; then strong scaling: the 4M sheet on two GPUs (2 runs);
#   4. the hanging sheet (200 steps) on 1 rank and on 2 ranks with a GPU each (NCCL halo), whose
#      diagnostics must be identical.
set -uo pipefail
source bench/gpu_common.sh
large() {  # large NAME RANKS SIZE_X CELLS_X CELLS_Y [MAX_STEPS]
  run mpirun -n "$2" .device/apron run inputs/cloth_large.yaml \
      --set "cloth.grid.size=[$3, 1, 0]" --set "cloth.grid.cells=[$4, $5, 0]" \
      --set "time.max_steps=${6:-200}" --set output.dir="$out/$1" \
      --set output.progress_every=100 > "$out/$1.log" 2>&1
  grep -E "step loop|forces|integrate|halo " "$out/$1.log"
}
run .device/test_cloth_geometry > "$out/test_cloth_geometry.log" 2>&1
tail -3 "$out/test_cloth_geometry.log"
for r in 1 2 3; do large "small_$r" 1 1 100 100 2000; done
for r in 1 2 3; do
  large "weak1_$r" 1 1 2000 2000
  large "weak2_$r" 2 2 4000 2000
done
for r in 1 2; do large "strong2_$r" 2 1 2000 2000; done
hanging_sheet_runs
if cmp "$out/hanging_np1/diagnostics.csv" "$out/hanging_np2/diagnostics.csv"; then
  echo "hanging sheet: 1 and 2 GPUs identical"
else
  echo "FAILED: hanging sheet differs between 1 and 2 GPUs"; status=1
fi
# Keep the logs and run reports, not the runs' other files.
find "$out" -mindepth 2 -type f ! -name run_report.json ! -name diagnostics.csv -delete
exit $status
