#!/usr/bin/env bash
# ctest jobs_scaling_slurm: on a real one-node SLURM cluster (slurm_cluster.sh), jobs/scaling
# submits jobs/one_node.sbatch for a strong and a weak study on 1, 2 and 4 ranks (chained by
# dependencies), waits for the jobs and gathers their reports; the CSV and plots are checked
# against the reports, every job log against the template's lines; a second run of the same
# command submits nothing; jobs/multi_node.sbatch runs a 2-rank job on the one node.
# usage: slurm_study.sh PYTHON APRON_EXE SOURCE_DIR WORK_DIR
set -euo pipefail
python=$1 apron=$2 src=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
if [[ -z ${SLURM_CONF:-} ]]; then  # start the cluster, and come back here inside it
  rm -rf "$work"
  mkdir -p "$work"
  exec "$here/slurm_cluster.sh" "$work" "$0" "$@"
fi
fail() { echo "slurm_study: FAIL: $*"; exit 1; }

# The site settings for this 2-core machine without GPUs, through the environment (sbatch
# exports it to the jobs): no core binding (4 ranks on 2 cores), one thread per rank, Open MPI
# as root.
export APRON_MPI_BIND="--oversubscribe --bind-to none" OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
study=("$python" "$src/jobs/scaling" "$src/inputs/dam_break.yaml" --ranks 1 2 4 --steps 8
       --out "$work/study" --apron "$apron" --launcher slurm --poll 1
       --sbatch-args "--cpus-per-task=1 --time=00:30:00")
"${study[@]}"
"$python" "$here/check_study.py" "$work/study" --ranks 1 2 4 --steps 8

previous=""
for run in strong_r1 strong_r2 strong_r4 weak_r1 weak_r2 weak_r4; do
  dir=$work/study/runs/$run
  job=$(cat "$dir/slurm_job_id")
  out=$dir/slurm-$job.out
  [[ -f $out ]] || fail "$run: no job log $out"
  grep -q "apron-job: start: job $job " "$out" || fail "$run: $out has no start line"
  grep -q "apron-job: apron exited with status 0" "$out" || fail "$run: $out: apron did not exit 0"
  grep -q -- "--gpus-per-node" "$dir/command.txt" || fail "$run: no GPUs requested"
  if [[ -n $previous ]]; then
    grep -q -- "--dependency=afterany:$previous" "$dir/command.txt" || fail "$run: not chained after job $previous"
  fi
  state=$(scontrol show job "$job" | grep -o "JobState=[A-Z]*")
  [[ $state == JobState=COMPLETED ]] || fail "$run: job $job $state"
  ranks=${run#*_r}
  grep -q "NumTasks=$ranks " <(scontrol show job "$job") || fail "$run: job $job did not have $ranks tasks"
  previous=$job
done

echo "--- again: nothing may be submitted"
"${study[@]}" | tee "$work/second.log"
[[ $(grep -c "finished before, skipped" "$work/second.log") == 6 ]] || fail "the second run did not skip all 6 runs"
grep -q "submitted job" "$work/second.log" && fail "the second run submitted jobs"

echo "--- the several-node template, on one node"
"$python" "$src/jobs/scaling" "$src/inputs/dam_break.yaml" --ranks 2 --series strong --steps 4 \
  --out "$work/multi" --apron "$apron" --launcher slurm --poll 1 \
  --template "$src/jobs/multi_node.sbatch" --sbatch-args "--cpus-per-task=1 --time=00:30:00"
grep -q "apron exited with status 0" "$work"/multi/runs/strong_r2/slurm-*.out || fail "multi_node.sbatch did not run"
echo "slurm_study: PASS"
