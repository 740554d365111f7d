#!/usr/bin/env bash
# OpenMP waiting policies on a small CPU machine (issue 19; bench/NOTES.md "OpenMP waiting"): the
# bunny analysis idle and beside two busy processes, and a 150-step SPH dam break idle, 3 runs each
# per policy, OpenMP build, 2 threads. Prints the cold analysis in ms and the SPH step loop in s.
# Usage (checkout root, after cmake --preset omp && cmake --build build-omp):
#   bash bench/omp_waiting.sh [path/to/apron]
set -uo pipefail
apron=$(realpath "${1:-build-omp/src/apron}")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd inputs
export OMP_NUM_THREADS=2
policies=("apron:" "libgomp:GOMP_SPINCOUNT=300000" "spin1000:GOMP_SPINCOUNT=1000"
          "passive:OMP_WAIT_POLICY=passive")
field() { python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print(round(eval(sys.argv[2]), 3), end=' ')" "$@"; }
bunny() {  # bunny [VAR=value]
  for round in 1 2 3; do
    env "$@" "$apron" run meshdist_bunny.yaml --set output.dir="$work/b" > /dev/null 2>&1
    field "$work/b/run_report.json" "r['meshdist']['cold_analysis_seconds'] * 1e3"
  done
  echo
}
sph() {
  for round in 1 2 3; do
    env "$@" "$apron" run dam_break.yaml --set output.dir="$work/s" --set output.every=0 \
        --set time.max_steps=150 > /dev/null 2>&1
    field "$work/s/run_report.json" "r['loop_seconds']"
  done
  echo
}
each() {  # each LABEL FUNCTION: one line per policy
  for p in "${policies[@]}"; do
    local name=${p%%:*} setting=${p#*:}
    echo -n "$1 $name: "
    $2 ${setting:+"$setting"}
  done
}
each "bunny idle (ms)" bunny
each "sph idle (s)" sph
( while :; do :; done ) & busy1=$!
( while :; do :; done ) & busy2=$!
each "bunny beside 2 busy (ms)" bunny
kill $busy1 $busy2
