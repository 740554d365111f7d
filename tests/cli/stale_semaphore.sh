#!/usr/bin/env bash
# stale_semaphore.sh APRON CASE MPIEXEC...: a semaphore that Open MPI's MPI-IO ("sharedfp sm")
# left locked in /dev/shm under the name of apron's first particle file (a run killed inside
# it) must not hang the next run: apron leaves that component out (src/runtime/runtime.cpp). In a
# private /dev/shm (a mount namespace: root or user namespaces; exits 77, skipped, without one),
# so that no other test meets the planted semaphore.
set -u
source "$(dirname "$0")/private_namespace.sh" "$@"
apron=$1
case_file=$2
shift 2
mpiexec=("$@")
if ! mount -t tmpfs -o size=256m tmpfs /dev/shm; then
  echo "cannot mount a private /dev/shm: skipped"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() {  # run SECONDS [VAR=value]: the 2-rank dam break's exit status (124: it hung)
  local seconds=$1
  shift
  # A locked POSIX semaphore, as glibc stores it: 32 zero bytes.
  head -c 32 /dev/zero > /dev/shm/sem.OMPIO_particles_000000.h5.tmp
  rm -rf "$work/out"
  env "$@" OMP_NUM_THREADS=1 timeout "$seconds" "${mpiexec[@]}" -n 2 "$apron" run "$case_file" \
      --set time.max_steps=5 --set "output.dir=$work/out" > "$work/log" 2>&1
}
# The control: with the component forced back in, the planted semaphore hangs the run.
run 10 OMPI_MCA_sharedfp=sm
control=$?
[[ $control -eq 124 ]] && echo "control (sharedfp sm forced): the stale semaphore hangs the run"
[[ $control -ne 124 ]] && echo "control (sharedfp sm forced): exit $control, no hang with this Open MPI"
run 60 APRON_UNUSED=1
got=$?
if [[ $got -ne 0 ]]; then
  tail -15 "$work/log"
  echo "apron's default: expected exit status 0 with the stale semaphore, got $got (124: a hang)"
  exit 1
fi
echo "apron's default: exit 0, the stale semaphore is not used"
