#!/usr/bin/env bash
# Nsight Compute on the two SPH neighbour passes (GPU machine, checkout root, after bundling):
# one launch each of the density and acceleration kernels in a 1M-particle dam break, with the
# figures bench/NOTES.md discusses (issue rate, lane efficiency, occupancy, local memory).
# Usage: [APRON=binary] bash bench/sph_profile.sh [PARTICLES]; the report goes to
# $OUT/sph_profile.txt.
set -uo pipefail
source .device/env.sh
out=${OUT:-gpu-out}; mkdir -p "$out"
particles=${1:-1e6}
apron=${APRON:-.device/apron}  # the binary to profile
spacing=$(python3 -c "print(f'{(0.146 * 0.292 * 0.292 / $particles) ** (1 / 3):.9g}')")
metrics=smsp__inst_executed.sum,smsp__thread_inst_executed_per_inst_executed.ratio
metrics+=,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread
metrics+=,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum
metrics+=,lts__t_bytes.sum,dram__bytes.sum,l1tex__t_sector_hit_rate.pct
for kernel in DensityKernel AccelerationKernel; do
  ncu --kernel-name-base demangled --kernel-name "regex:$kernel" --launch-skip 5 --launch-count 1 \
      --metrics "$metrics" "$apron" run inputs/dam_break_large.yaml \
      --set sph.spacing="$spacing" --set time.max_steps=8 --set output.every=0 \
      --set output.dir="$out/profile_run" --set output.progress_every=1000 2>&1 |
    grep -E "Kernel|$kernel|smsp__|sm__|gpu__|launch__|l1tex__|lts__|dram__" | grep -v "^==PROF=="
done | tee -a "$out/sph_profile.txt"
