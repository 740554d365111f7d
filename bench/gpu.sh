#!/usr/bin/env bash
# The GPU machine's one command, from the checkout root, after ../shared/gpu/bundle.sh put the
# CUDA build (apron and the test binaries) in .device/:
#   source .device/env.sh; bash bench/gpu.sh SUITE|CASE... [bench/run.py options]
# e.g. `bash bench/gpu.sh all`, or "no speed lost" against a bundle of the build before a change:
#   bash bench/gpu.sh regression --baseline .device-base/apron --runs 5
# Everything bench/run.py writes goes into one tarball, $OUT/bench.tar.gz (only a few files come
# back from that machine); its table comes back in the command's output.
set -uo pipefail
cd "$(dirname "$0")/.."
source .device/env.sh  # again, harmless: the bundle's libraries, mpirun as root, NCCL's settings
out=${OUT:-gpu-out}
work=$(mktemp -d)
mkdir -p "$out" "$work/bench"
nvidia-smi -L 2>&1 | tee "$work/bench/gpus.txt"
args=("$@")
[[ " $* " == *" --apron"* ]] || args+=(--apron .device/apron)
# Stop before the machine's 10-minute limit, so that what was measured still gets packed.
timeout -s INT -k 30 "${BENCH_SECONDS:-540}" python3 bench/run.py "${args[@]}" --out "$work/bench"
status=$?
tar -czf "$out/bench.tar.gz" -C "$work" bench
rm -rf "$work"
exit $status
