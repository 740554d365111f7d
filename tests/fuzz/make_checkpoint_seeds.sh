#!/usr/bin/env bash
# tests/fuzz/make_checkpoint_seeds.sh APRON [OUT]: writes small valid HDF5 files apron made into
# OUT (default tests/fuzz/corpus/fuzz_checkpoint): a 2-step dam break at a coarse spacing gives
# checkpoints (1 and 2 ranks) and particle output files of a few kB each, and forged copies
# (tests/fuzz/forge_checkpoint_seeds.py). Blind mutation of HDF5 rarely gets past the superblock:
# these seeds are what fuzz_checkpoint starts from.
set -euo pipefail
apron=$(realpath "$1")
cd "$(dirname "$0")/../.."
out=${2:-tests/fuzz/corpus/fuzz_checkpoint}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
run=(run inputs/dam_break.yaml --set sph.spacing=0.02 --set boundary.layers=1 --set time.max_steps=2
     --set checkpoint.every_steps=1 --set checkpoint.keep=3)
export OMP_NUM_THREADS=1
"$apron" "${run[@]}" --set output.every=0.0001 --set "output.dir=$work/np1" >/dev/null
mpiexec --oversubscribe --allow-run-as-root -n 2 "$apron" "${run[@]}" --set output.every=0 \
  --set "output.dir=$work/np2" >/dev/null
cp "$work/np1/checkpoints/checkpoint_000001.h5" "$out/checkpoint_np1_step1.h5" 2>/dev/null ||
  cp "$(ls "$work"/np1/checkpoints/*.h5 | head -1)" "$out/checkpoint_np1.h5"
cp "$(ls "$work"/np2/checkpoints/*.h5 | tail -1)" "$out/checkpoint_np2.h5"
cp "$(ls "$work"/np1/particles_*.h5 | tail -1)" "$out/particles_np1.h5"
# Forged from checkpoint_np2.h5, resealed past their checksums: the range checks' seeds.
python3 tests/fuzz/forge_checkpoint_seeds.py "$out" >/dev/null
ls -l "$out"
