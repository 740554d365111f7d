#!/usr/bin/env bash
# Issue 18 on one GPU: the kokkos backend on Kokkos' Cuda space against the native cuda backend.
# Bundle the kokkos-cuda build (preset kokkos-cuda) as .device/ (apron and the test binaries) and
# the cuda build's apron as .device/apron-cuda. Then, in one call:
#   1. `apron info` of both builds;
#   2. every GPU test of bench/gpu_algorithms.sh on the kokkos build, 1-4 ranks;
#   3. SPH at 10M particles, the two builds alternating (so that drift hits both), 3 rounds;
#   4. the bunny pair (bench/meshdist_cold.sh, lazy module loading), the two builds alternating.
# Usage: bash bench/gpu_kokkos.sh [tests|bench|all]. Results in $OUT.
set -uo pipefail
source .device/env.sh
out=${OUT:-gpu-out}; mkdir -p "$out"
part=${1:-all}
status=0
for build in apron-cuda apron; do .device/$build info > "$out/info_$build.txt" 2>&1; done
if [[ $part != bench ]]; then
  bash bench/gpu_algorithms.sh tests || status=1
fi
[[ $part == tests ]] && exit $status

sph() { python3 bench/sph_throughput.py --apron ".device/$1" --steps 100 --repeat 3 "${@:2}" 2>&1 | tail -1; }
for round in 1 2 3; do
  for build in apron-cuda apron; do
    echo "round $round $build: $(sph $build --particles 10e6 --json $out/sph_${build}_$round.json)"
  done
done
BINARIES="apron-cuda apron" LOADING=LAZY bash bench/meshdist_cold.sh | grep "repeat 5"
exit $status
