#!/usr/bin/env bash
# ctest jobs_slurm_requeue_mock (APRON_EXE = tests/jobs/mock_apron.sh) and jobs_slurm_requeue
# (the real apron): on a real one-node SLURM cluster, jobs/one_node.sbatch runs a case on 2
# ranks; SLURM sends SIGUSR1 to the batch shell, the template forwards it through mpirun, apron
# writes a checkpoint and exits 3, the job requeues itself, and the requeued job continues from
# the checkpoint to the end (exit 0). SLURM sends the signal through `scancel --batch
# --signal=USR1` once the run is under way: the path from slurmctld to the batch shell that
# --signal=B:USR1@<s> uses, at a moment the test chooses. Not the time limit itself: slurmctld
# checks limits every 30 s, and on this one-node cluster (slurm-wlm 22.05) a requeued job was
# sometimes signalled one second after it started, so each run checkpointed and requeued at once
# until APRON_MAX_REQUEUES (seen in CI).
# usage: slurm_requeue.sh APRON_EXE SOURCE_DIR WORK_DIR [apron run options ...]
set -euo pipefail
apron=$1 src=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
if [[ -z ${SLURM_CONF:-} ]]; then
  if ! "$apron" --help 2>&1 | grep -q -- '--restart'; then
    echo "slurm_requeue: FAIL: '$apron --help' shows no --restart option: this test needs the" \
         "checkpoint/restart change (apron run --restart auto, exit 3 after SIGUSR1)"
    exit 1
  fi
  rm -rf "$work"
  mkdir -p "$work"
  exec "$here/slurm_cluster.sh" "$work" "$0" "$@"
fi
shift 3
fail() { echo "slurm_requeue: FAIL: $*"; [[ -f ${log:-} ]] && { echo "--- $log"; cat "$log"; }; exit 1; }

export APRON_MPI_BIND="--oversubscribe --bind-to none" OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export APRON_HOME=$src APRON_EXE=$apron
export MOCK_WORK_SECONDS=20
out=$work/run
log=$work/job.out
job=$(sbatch --parsable --ntasks=2 --ntasks-per-node=2 --gpus-per-node=2 --cpus-per-task=1 \
        --time=10 --signal=B:USR1@60 --output="$log" --chdir="$work" \
        "$src/jobs/one_node.sbatch" "$src/inputs/dam_break.yaml" --set "output.dir=$out" "$@")
echo "slurm_requeue: job $job"
# Once the run is under way (mpirun started, apron set up), SLURM signals the batch shell.
for _ in $(seq 240); do grep -q "^apron-job: start" "$log" 2>/dev/null && break; sleep 1; done
grep -q "^apron-job: start" "$log" || fail "the job did not start within 240 s"
sleep 6
scancel --batch --signal=USR1 "$job" || fail "scancel --batch --signal=USR1 $job failed"
for _ in $(seq 280); do
  state=$(scontrol show job "$job" | grep -o "JobState=[A-Z_]*" || true)
  [[ $state == JobState=COMPLETED || $state == JobState=FAILED || $state == JobState=CANCELLED \
     || $state == JobState=TIMEOUT ]] && break
  sleep 1
done
scontrol show job "$job" | grep -E "JobState|Restarts"
echo "--- $log"; cat "$log"
[[ $state == JobState=COMPLETED ]] || fail "job $job ended as $state"
starts=$(grep -c "apron-job: start: job $job " "$log")
((starts >= 2)) || fail "the job ran $starts time(s): it was never requeued"
grep -q "SIGUSR1: asking apron to checkpoint" "$log" || fail "the batch shell got no SIGUSR1"
grep -q "apron exited with status 3" "$log" || fail "apron did not stop with status 3 after SIGUSR1"
grep -q "requeueing job $job" "$log" || fail "the job did not requeue itself"
grep -q "restart count 1" "$log" || fail "no run with SLURM_RESTART_COUNT=1"
# After the first requeue, apron must say that it continues from a checkpoint.
awk '/restart count 1/ {after = 1} after' "$log" | grep -v "^apron-job:" | grep -qi "checkpoint" \
  || fail "the requeued run does not mention continuing from a checkpoint"
ls "$out"/checkpoints/*.h5 >/dev/null 2>&1 || fail "no checkpoint in $out/checkpoints"
[[ -f $out/run_report.json ]] || fail "no run_report.json: the requeued run did not finish"
[[ $(tail -n 1 "$log") == "apron-job: apron exited with status 0;"* ]] || fail "the last run did not exit 0"
echo "slurm_requeue: PASS ($starts runs of job $job)"
