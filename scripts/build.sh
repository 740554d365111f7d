#!/usr/bin/env bash
# scripts/build.sh [PRESET]: configures and builds one CMake preset (default: omp) with -j2 by
# default (APRON_JOBS overrides). Prints the build directory.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-omp}
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "${APRON_JOBS:-2}" >&2
echo "build-$preset"
