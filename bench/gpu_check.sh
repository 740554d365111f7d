#!/usr/bin/env bash
# On the GPU machine, from the checkout root, after ../shared/gpu/bundle.sh put the CUDA build in
# .device/: runs the unit, MPI and validation tests and the short dam break on 1-2 ranks with the
# CUDA backend. Results go to $OUT (or ./gpu-out).
set -uo pipefail
source bench/gpu_common.sh
export APRON_SOURCE_DIR=$PWD APRON_BINARY_DIR=$out
run .device/test_sph_kernels
run .device/test_config
for n in 1 2 3 4; do run mpirun -n $n .device/test_exchange; done
for n in 1 2 3; do run mpirun -n $n .device/test_particle_output; done
run .device/test_hydrostatic
[[ -x .device/test_meshdist ]] && run .device/test_meshdist
run mpirun -n 2 .device/apron run inputs/dam_break.yaml --set output.dir=$out/dam_break \
    --set output.every=0.05 --set output.progress_every=10
run python3 tests/validation/surge_front.py $out/dam_break/diagnostics.csv --a 0.146 --tolerance 0.10
for n in 1 2 3 4; do
  run mpirun -n $n .device/apron run inputs/dam_break.yaml --set time.end=0.06 --set output.every=0 \
      --set output.dir=$out/np$n --set output.progress_every=100
done
# The paper's 27-cell search (no neighbour record) on 2 ranks.
run mpirun -n 2 .device/apron run inputs/dam_break.yaml --set time.end=0.06 --set output.every=0 \
    --set output.dir=$out/np2cells27 --set output.progress_every=100 --set sph.cell_divisions=1
run python3 tests/mpi/compare_runs.py $out/np1 $out/np2 $out/np3 $out/np4 $out/np2cells27
# The OpenMP build of the same source (bundled as apron-omp), on the same case: the backends
# agree within round-off.
if [[ -x .device/apron-omp ]]; then
  run mpirun -n 1 .device/apron-omp run inputs/dam_break.yaml --set time.end=0.06 --set output.every=0 \
      --set output.dir=$out/omp_np1 --set output.progress_every=100
  run python3 tests/mpi/compare_runs.py $out/np1 $out/omp_np1
fi
exit $status
