# Sourced by the bench/gpu_*.sh scripts on the GPU machine, from the checkout root: the bundled
# CUDA build's environment (.device/, ../shared/gpu/bundle.sh), the results folder ($OUT, or
# ./gpu-out) as $out with the GPUs listed in it, and run, which echoes a command and runs it,
# setting $status to 1 (the script's exit status) when it fails.
source .device/env.sh
out=${OUT:-gpu-out}; mkdir -p "$out"
nvidia-smi -L | tee "$out/gpus.txt"
status=0
run() { echo "== $*"; "$@" || { echo "FAILED: $*"; status=1; }; }
