# jobs/apron_job.sh: the part of every batch template that is not site-specific. Sourced by
# jobs/*.sbatch after jobs/site.sh; `apron_job CASE.yaml [apron run options ...]` runs the case
# under mpirun, one rank per task, and handles the end of the time limit:
#
#   1. SLURM sends SIGUSR1 to this batch shell <seconds> before the limit (--signal=B:USR1@...).
#   2. The trap forwards it to mpirun, which forwards it to every rank; apron finishes the
#      current step, writes a checkpoint and exits with status 3 ("stopped early").
#   3. On status 3 the job requeues itself (scontrol requeue); the requeued job runs this script
#      again from the top and apron continues with --restart auto from the newest checkpoint in
#      <output.dir>/checkpoints/ (or starts from the beginning when there is none).
#
# GPUs: one rank per GPU, and every rank sees all GPUs of its node; apron picks
# local_rank % devices. The templates deliberately do not use --gpus-per-task (or
# --gpu-bind): SLURM would then give each task a cgroup/CUDA_VISIBLE_DEVICES with one GPU, and
# CUDA IPC between ranks on the same node (NCCL, CUDA-aware MPI) fails or falls back to slow
# host copies.

apron_log() { echo "apron-job: $*"; }

apron_job() {
  local case_file=$1
  shift
  [[ -x $APRON_EXE ]] || { apron_log "error: no apron executable at '$APRON_EXE' (set APRON_EXE in jobs/site.sh)"; return 2; }
  [[ -f $case_file ]] || { apron_log "error: no case file '$case_file'"; return 2; }

  # Continue from the newest checkpoint when there is one (a requeued job), else start anew.
  local restart=()
  if "$APRON_EXE" --help 2>&1 | grep -q -- '--restart'; then
    restart=(--restart auto)
  else
    apron_log "warning: this apron has no --restart option: a requeued job starts from the beginning"
  fi

  local count=${SLURM_RESTART_COUNT:-0}
  apron_log "start: job ${SLURM_JOB_ID:-none} (restart count $count) on ${SLURM_JOB_NUM_NODES:-1} node(s)," \
            "${SLURM_NTASKS:-1} rank(s), ${OMP_NUM_THREADS:-1} thread(s) each; $(date -Is)"

  if [[ -n ${apron_early_signal:-} ]]; then
    apron_log "error: SIGUSR1 came before apron started: the time limit (--time) must be longer" \
              "than the --signal margin; not starting"
    return 1
  fi
  local stop_signal="" pid status
  # Traps run only between commands, so mpirun runs in the background and we wait for it.
  trap 'stop_signal=USR1; apron_log "SIGUSR1: asking apron to checkpoint and stop"; kill -USR1 "$pid" 2>/dev/null' USR1
  trap 'stop_signal=TERM; apron_log "SIGTERM: job cancelled or out of time"; kill -TERM "$pid" 2>/dev/null' TERM
  # shellcheck disable=SC2086 # the binding and extra options are word lists
  "$APRON_MPIRUN" $APRON_MPI_BIND $APRON_MPI_EXTRA "$APRON_EXE" run "$case_file" "${restart[@]}" "$@" &
  pid=$!
  if [[ -n $stop_signal ]]; then  # it came while mpirun was being started
    sleep 2
    kill -"$stop_signal" "$pid" 2>/dev/null
  fi
  while :; do
    wait "$pid" && status=0 || status=$?
    # A status above 128 with mpirun still alive means a trapped signal interrupted the wait.
    if ((status > 128)) && kill -0 "$pid" 2>/dev/null; then continue; fi
    break
  done
  trap - USR1 TERM
  apron_log "apron exited with status $status; $(date -Is)"
  [[ -n ${APRON_STATUS_FILE:-} ]] && echo "$status" >"$APRON_STATUS_FILE"

  if ((status == 3)) && [[ $stop_signal != TERM ]] && [[ -n ${SLURM_JOB_ID:-} ]]; then
    if ((count >= APRON_MAX_REQUEUES)); then
      apron_log "stopped with a checkpoint, but the job was requeued $count times already (APRON_MAX_REQUEUES): not requeueing"
      return 3
    fi
    apron_log "stopped with a checkpoint: requeueing job $SLURM_JOB_ID to continue from it"
    if ! scontrol requeue "$SLURM_JOB_ID"; then
      apron_log "error: scontrol requeue failed (is the job requeueable? --requeue, JobRequeue)"
      return 3
    fi
    # SLURM now ends this run of the job and queues it again.
    sleep 300
    return 3
  fi
  return "$status"
}
