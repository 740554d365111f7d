#!/usr/bin/env bash
# Where the first analysis of a process spends its time (issue 19, "timings a one-shot user sees"):
# the bunny pair in fresh processes, 3 each, with one analysis (its phase times are the cold
# breakdown) and with five (cold against warm), under CUDA's default lazy module loading and with
# CUDA_MODULE_LOADING=EAGER (kernels loaded when the context is made, not at their first launch).
# Usage (GPU machine, checkout root, CUDA build bundled as .device/): bash bench/meshdist_cold.sh
set -uo pipefail
source .device/env.sh
out=${OUT:-gpu-out}/meshdist_cold; mkdir -p "$out"
for loading in LAZY EAGER; do
  for repeat in 1 5; do
    for round in 1 2 3; do
      name=${loading}_r${repeat}_$round
      start=$EPOCHREALTIME
      CUDA_MODULE_LOADING=$loading .device/apron run inputs/meshdist_bunny.yaml \
          --set output.dir="$out/$name" --set meshdist.repeat=$repeat > "$out/$name.log" 2>&1
      wall=$(python3 -c "print($EPOCHREALTIME - $start)")
      python3 - "$out/$name/run_report.json" "$loading" "$repeat" "$wall" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); m = r["meshdist"]
ph = {k: round(v["max_seconds"] * 1e3, 2) for k, v in r["phases"].items()}
print(f"{sys.argv[2]:5} repeat {sys.argv[3]}: process {float(sys.argv[4]):.2f} s, "
      f"cold {m['cold_analysis_seconds'] * 1e3:.2f} ms, "
      f"warm {m.get('warm_analysis_seconds', float('nan')) * 1e3:.2f} ms; phases (ms) {ph}")
PY
    done
  done
done
