#!/usr/bin/env bash
# Voting paths (sort | atomic) on one H200: the room benchmark at 1M and 20M points with each
# path, alternating (vote stage medians; issue 16).
# Builds nothing. Usage (GPU machine, checkout root, CUDA build bundled as .device/ or $BUNDLE
# with apron): bash bench/gpu_planes_vote.sh. Results under $OUT.
set -uo pipefail
source ${BUNDLE:-.device}/env.sh
out=${OUT:-gpu-out}; mkdir -p "$out"
nvidia-smi -L | tee "$out/gpus.txt"
k=0
b() { timeout 120 python3 bench/planes_bench.py --apron ${BUNDLE:-.device}/apron "$@"; }
for pts in 1e6 20e6; do
  rep=12; [[ $pts == 20e6 ]] && rep=9
  for v in sort atomic sort atomic; do
    b --points $pts --repeat $rep --set planes.accumulator.voting=$v --json "$out/vote_${pts}_${v}_$((++k)).json" > "$out/bench_${pts}_${v}_$k.log" 2>&1
    echo "$pts $v rc $?: $(tail -n 1 "$out/bench_${pts}_${v}_$k.log")"
    python3 -c "import json;d=json.load(open('$out/vote_${pts}_${v}_$k.json'));print('  vote %.4f ms, total %.3f ms, planes %d, votes %d, f1 %s' % (d['stage_ms_median']['vote'], d['stage_ms_median']['total'], d['planes'], d['votes'], d['f1']))"
  done
done
