#!/usr/bin/env bash
# scripts/check-kokkos.sh [--cuda] [--keep]: checks that Kokkos is a working dependency of apron.
#  1. builds Kokkos (core, OpenMP space) through cmake/Kokkos.cmake's FetchContent path, after
#     cmake/Backend.cmake as apron will (tests/kokkos/fetch), in a temporary directory, and
#     installs it into a temporary prefix;
#  2. builds tests/kokkos/consumer against that install with find_package, as a user with a site
#     Kokkos would, and runs it and the same source built in step 1 against the fetched Kokkos
#     with apron's warnings as errors (a parallel_reduce whose sum is checked);
#  3. with --cuda, does 1 and 2 again for APRON_BACKEND=cuda: Kokkos with the Cuda and OpenMP
#     spaces (sm_90, with cmake/patches' CUDA 13 patch), but does not run the consumer, which
#     needs a GPU: this shows that the patched Kokkos compiles, installs and links.
# --keep leaves the temporary directory (its path is printed) instead of removing it.
# APRON_KOKKOS_TARBALL: the release tarball (default: cmake/Kokkos.cmake's, ../shared/vendor).
# APRON_JOBS sets the build parallelism (default 2); CUDACXX the nvcc (default
# /usr/local/cuda/bin/nvcc). Compiler launchers (ccache) come from CMake's usual environment
# variables, CMAKE_CXX_COMPILER_LAUNCHER and CMAKE_CUDA_COMPILER_LAUNCHER.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cuda=0
keep=0
for arg in "$@"; do
  case $arg in
    --cuda) cuda=1 ;;
    --keep) keep=1 ;;
    *) echo "usage: $0 [--cuda] [--keep]" >&2; exit 2 ;;
  esac
done
jobs=${APRON_JOBS:-2}
work=$(mktemp -d "${TMPDIR:-/tmp}/apron-kokkos.XXXXXX")
if [[ $keep == 1 ]]; then
  echo "check-kokkos: working in $work (kept)"
else
  trap 'rm -rf "$work"' EXIT
fi

# stage NAME COMMAND...: runs COMMAND with its output in $work/NAME.log, shown only on failure
# (a Kokkos build is a few thousand lines), and prints how long it took.
stage() {
  local name=$1 start=$SECONDS
  shift
  if ! "$@" >"$work/$name.log" 2>&1; then
    tail -n 60 "$work/$name.log" >&2
    echo "check-kokkos: $name failed (full log: $work/$name.log; rerun with --keep to keep it)" >&2
    [[ $keep == 1 ]] || trap - EXIT
    exit 1
  fi
  echo "check-kokkos: $name: $((SECONDS - start)) s"
}

# check BACKEND RUN: fetch-build-install Kokkos for apron's BACKEND (omp or cuda), then build the
# consumer against the install, and run it when RUN is 1.
check() {
  local backend=$1 run=$2
  local dir=$work/$backend space=$backend
  local nvcc=(-DCMAKE_CUDA_COMPILER="${CUDACXX:-/usr/local/cuda/bin/nvcc}")
  [[ $backend == cuda ]] || nvcc=()
  # CMAKE_DISABLE_FIND_PACKAGE_Kokkos: a Kokkos already installed here must not short-cut the
  # FetchContent path this checks.
  stage "$space-kokkos-configure" cmake -S "$root/tests/kokkos/fetch" -B "$dir/build" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$dir/prefix" \
    -DCMAKE_DISABLE_FIND_PACKAGE_Kokkos=ON -DAPRON_BACKEND="$backend" "${nvcc[@]}" \
    ${APRON_KOKKOS_TARBALL:+-DAPRON_KOKKOS_TARBALL="$APRON_KOKKOS_TARBALL"}
  stage "$space-kokkos-build" cmake --build "$dir/build" -j "$jobs"
  stage "$space-kokkos-install" cmake --install "$dir/build"
  stage "$space-consumer-configure" cmake -S "$root/tests/kokkos/consumer" -B "$dir/consumer" \
    -DCMAKE_BUILD_TYPE=Release -DKokkos_ROOT="$dir/prefix" "${nvcc[@]}"
  stage "$space-consumer-build" cmake --build "$dir/consumer" -j "$jobs"
  if [[ $run == 1 ]]; then
    # Both builds of the consumer: against the fetched Kokkos (tests/kokkos/fetch's
    # kokkos_in_tree) and against its install. OMP_PROC_BIND=false: what Kokkos suggests for tests
    # (it warns when unset); this checks a sum, not thread placement.
    local exe
    for exe in "$dir/build/kokkos_in_tree" "$dir/consumer/kokkos_consumer"; do
      OMP_PROC_BIND=${OMP_PROC_BIND:-false} "$exe" || {
        echo "check-kokkos: $exe failed (exit status $?)" >&2
        exit 1
      }
    done
  else
    echo "check-kokkos: $space consumers built, not run (they need a GPU)"
  fi
}

check omp 1
if [[ $cuda == 1 ]]; then
  check cuda 0
fi
echo "check-kokkos: OK"
