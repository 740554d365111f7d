#!/usr/bin/env bash
# Nsight Compute on a workload's hot kernels (GPU machine, checkout root, after bundling), with the
# figures bench/NOTES.md discusses:
#   sph [PARTICLES]  one launch each of the two neighbour passes (density, acceleration) in a
#                    dam break of 1M particles: issue rate, lane efficiency, occupancy, local memory;
#   cloth            the gradient's four passes at 1M vertices: time, registers, warps, DRAM bytes.
# Usage: [APRON=binary] bash bench/profile.sh sph|cloth [PARTICLES]; the report goes to
# $OUT/profile_WORKLOAD.txt (APRON=binary compares builds).
set -uo pipefail
source .device/env.sh
out=${OUT:-gpu-out}; mkdir -p "$out"
workload=${1:?usage: bash bench/profile.sh sph|cloth [PARTICLES]}
apron=${APRON:-.device/apron}  # the binary to profile
report=$out/profile_$workload.txt
ncu_run() {  # ncu_run PATTERN NCU_ARGS... APRON_COMMAND...: the lines of ncu's report that PATTERN matches
  local pattern=$1; shift
  ncu --kernel-name-base demangled "$@" --set output.dir="$out/profile_run" \
      --set output.progress_every=1000 2>&1 | grep -E "$pattern" | grep -v "^==PROF=="
}
case $workload in
  sph)
    particles=${2:-1e6}
    spacing=$(python3 -c "print(f'{(0.146 * 0.292 * 0.292 / $particles) ** (1 / 3):.9g}')")
    metrics=smsp__inst_executed.sum,smsp__thread_inst_executed_per_inst_executed.ratio
    metrics+=,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
    metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread
    metrics+=,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum
    metrics+=,lts__t_bytes.sum,dram__bytes.sum,l1tex__t_sector_hit_rate.pct
    for kernel in DensityKernel AccelerationKernel; do
      ncu_run "Kernel|$kernel|smsp__|sm__|gpu__|launch__|l1tex__|lts__|dram__" \
          --kernel-name "regex:$kernel" --launch-skip 5 --launch-count 1 --metrics "$metrics" \
          "$apron" run inputs/dam_break_large.yaml --set sph.spacing="$spacing" \
          --set time.max_steps=8 --set output.every=0
    done ;;
  cloth)
    metrics=gpu__time_duration.sum,launch__registers_per_thread,dram__bytes.sum
    metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active
    ncu_run "Kernel|gpu__|launch__|dram__|sm__" --launch-skip 40 --launch-count 12 --metrics "$metrics" \
        --kernel-name "regex:NormalsKernel|VertexAdjointKernel|NormalSumAdjointKernel|GatherKernel" \
        "$apron" run inputs/cloth_large.yaml --set time.max_steps=12 ;;
  *) echo "profile.sh: no profile for '$workload' (sph, cloth)" >&2; exit 2 ;;
esac | tee -a "$report"
rm -rf "$out/profile_run"
