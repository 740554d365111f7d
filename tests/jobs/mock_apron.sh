#!/usr/bin/env bash
# A stand-in for `apron run` with the checkpoint interface, to test the batch templates' signal
# and requeue handling without depending on the solver: `run CASE [--restart auto] --set
# output.dir=DIR ...` "computes" for MOCK_WORK_SECONDS (default 36) one-second steps; on SIGUSR1 or
# SIGTERM it writes DIR/checkpoints/checkpoint_<step>.h5 (rank 0) and exits 3; with --restart
# auto it continues from the newest checkpoint; at the end it writes DIR/run_report.json, exit 0.
set -uo pipefail
if [[ ${1:-} == --help ]]; then
  echo "usage: apron run CASE.yaml [--restart latest|auto|FILE.h5] [--set key=value ...]"
  exit 0
fi
[[ ${1:-} == run ]] || { echo "mock apron: only 'run'" >&2; exit 2; }
shift
dir="" restart=""
while (($#)); do
  case $1 in
    --restart) restart=$2; shift ;;
    --set) [[ $2 == output.dir=* ]] && dir=${2#output.dir=}; shift ;;
  esac
  shift
done
[[ -n $dir ]] || { echo "mock apron: no output.dir" >&2; exit 2; }
rank=${OMPI_COMM_WORLD_RANK:-0}
total=${MOCK_WORK_SECONDS:-36}
step=0
if [[ $restart == auto ]]; then
  latest=$(ls "$dir"/checkpoints/checkpoint_*.h5 2>/dev/null | sort | tail -n 1)
  if [[ -n $latest ]]; then
    step=$(<"$latest")
    ((rank == 0)) && echo "mock apron: restart from checkpoint $latest at step $step"
  fi
fi
stop=""
trap 'stop=1' USR1 TERM
while ((step < total)); do
  sleep 1 &
  wait $! 2>/dev/null
  [[ -n $stop ]] && break
  step=$((step + 1))
done
if [[ -n $stop ]]; then
  if ((rank == 0)); then
    mkdir -p "$dir/checkpoints"
    printf -v name "%s/checkpoints/checkpoint_%06d.h5" "$dir" "$step"
    echo "$step" >"$name"
    echo "mock apron: signal: checkpoint $name written at step $step; continue with --restart"
  fi
  exit 3
fi
((rank == 0)) && mkdir -p "$dir" && echo "{\"steps\": $step}" >"$dir/run_report.json" && echo "mock apron: done, $step steps"
exit 0
