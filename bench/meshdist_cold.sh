#!/usr/bin/env bash
# Where the first analysis of a process spends its time (issue 19, "timings a one-shot user sees"):
# the bunny pair in fresh processes, 3 each, with one analysis (its phase times are the cold
# breakdown) and with five (cold against warm), under CUDA's default lazy module loading and with
# CUDA_MODULE_LOADING=EAGER (kernels loaded when the context is made, not at their first launch).
# Usage (GPU machine, checkout root, CUDA build bundled as .device/): bash bench/meshdist_cold.sh
# BINARIES="apron-base apron" compares builds bundled side by side in .device/ (alternating, so
# that drift hits both); LOADING="LAZY" leaves out the eager runs; DEVICE=dir takes the bundle
# from another folder than .device.
set -uo pipefail
dev=${DEVICE:-.device}
source "$dev/env.sh"
out=${OUT:-gpu-out}/meshdist_cold; mkdir -p "$out"
for loading in ${LOADING:-LAZY EAGER}; do
  for repeat in 1 5; do
    for round in 1 2 3; do
      for binary in ${BINARIES:-apron}; do
        name=${binary}_${loading}_r${repeat}_$round
        start=$EPOCHREALTIME
        CUDA_MODULE_LOADING=$loading "$dev/$binary" run inputs/meshdist_bunny.yaml \
            --set output.dir="$out/$name" --set meshdist.repeat=$repeat > "$out/$name.log" 2>&1
        wall=$(python3 -c "print($EPOCHREALTIME - $start)")
        python3 - "$out/$name/run_report.json" "$binary" "$loading" "$repeat" "$wall" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); m = r["meshdist"]
ph = {k: round(v["max_seconds"] * 1e3, 2) for k, v in r["phases"].items()}
print(f"{sys.argv[2]:10} {sys.argv[3]:5} repeat {sys.argv[4]}: process {float(sys.argv[5]):.2f} s, "
      f"cold {m['cold_analysis_seconds'] * 1e3:.2f} ms, "
      f"warm {m.get('warm_analysis_seconds', float('nan')) * 1e3:.2f} ms; phases (ms) {ph}")
PY
      done
    done
  done
done
