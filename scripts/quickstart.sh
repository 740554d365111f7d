#!/usr/bin/env bash
# The README's first command: installs what is missing, builds the OpenMP backend and runs the
# small dam break on 2 MPI ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build=$(scripts/build.sh omp)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
root_flag=""; [[ $(id -u) -eq 0 ]] && root_flag=--allow-run-as-root
mpirun --oversubscribe $root_flag -n 2 "$build/src/apron" run inputs/dam_break.yaml "$@"
echo
echo "Open out/dam_break/particles.xmf in ParaView; diagnostics.csv holds the surge front;"
echo "plot it against the experiments with:"
echo "  python3 tests/validation/plot_dam_break.py out/dam_break/diagnostics.csv --a 0.146 -o surge_front.png"
