# Sourced by the bench/gpu_*.sh scripts on the GPU machine, from the checkout root: the bundled
# CUDA build's environment (.device/, ../shared/gpu/bundle.sh), the results folder ($OUT, or
# ./gpu-out) as $out with the GPUs listed in it, and run, which echoes a command and runs it,
# setting $status to 1 (the script's exit status) when it fails.
source .device/env.sh
out=${OUT:-gpu-out}; mkdir -p "$out"
nvidia-smi -L | tee "$out/gpus.txt"
status=0
run() { echo "== $*"; "$@" || { echo "FAILED: $*"; status=1; }; }

# Cloth: the hanging sheet (8x8 cells, 200 steps) on 1 and on 2 ranks, into $out/hanging_np1 and
# hanging_np2, whose diagnostics.csv the caller compares with each other and with the OpenMP
# build's (the same case and steps).
hanging_sheet_runs() {
  for n in 1 2; do
    run mpirun -n $n .device/apron run inputs/cloth_hanging.yaml --set "cloth.grid.cells=[8, 8, 0]" \
        --set time.max_steps=200 --set time.end=100 --set output.every=0 \
        --set output.dir="$out/hanging_np$n" --set output.progress_every=100 \
        > "$out/hanging_np$n.log" 2>&1
  done
}
