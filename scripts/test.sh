#!/usr/bin/env bash
# The README's second command (and CI's): installs what is missing, builds the OpenMP backend
# with warnings as errors and runs every test; then, where nvcc exists, compiles the CUDA backend
# (sm_90) too. GPU tests run on a GPU machine: see bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh ci-omp >/dev/null
ctest --preset ci-omp -j "${APRON_JOBS:-2}"
nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
if [[ -x $nvcc ]]; then
  echo "apron: compiling the CUDA backend with $nvcc"
  scripts/build.sh ci-cuda >/dev/null
else
  echo "apron: no nvcc: the CUDA backend was not compiled"
fi
