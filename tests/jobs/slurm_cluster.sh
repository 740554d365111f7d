#!/usr/bin/env bash
# A real one-node SLURM cluster on this machine for the tests of jobs/:
#
#   tests/jobs/slurm_cluster.sh WORK_DIR COMMAND [ARGS ...]
#
# starts Debian 12's slurm-wlm (slurmctld + slurmd, authenticated by its own munged) with every
# file under WORK_DIR/slurm (config, keys, state, spool, logs), runs COMMAND with SLURM_CONF
# pointing at it (so sbatch, squeue, scontrol talk to this cluster only), then cancels what is
# left, stops the three daemons it started (by their process ids) and exits with COMMAND's status.
#
# The node: this machine's hostname at 127.0.0.1, 8 CPUs (more than the hardware has:
# config_overrides, so 4-rank jobs fit on a 2-core CI machine) and 4 "GPUs" (gres gpu whose device
# files are links to /dev/null: enough for --gpus-per-node requests and CUDA_VISIBLE_DEVICES).
# Job credentials expire after 10 s (cred_expire, default 120 s), which is also how long SLURM
# holds a requeued job back before it may start again.
# No systemd, no cgroups (proctrack/linuxproc, task/none), no accounting; ports picked free.
# Needs: slurm-wlm, munge (scripts/install-deps.sh installs them); run as root (as CI does) or as
# a user, who then owns the daemons and can run only their own jobs.
set -euo pipefail
(($# >= 2)) || { echo "usage: $0 WORK_DIR COMMAND [ARGS ...]" >&2; exit 2; }
work=$(mkdir -p "$1" && cd "$1" && pwd)/slurm
shift
for exe in munged slurmctld slurmd sbatch; do
  command -v "$exe" >/dev/null || [[ -x /usr/sbin/$exe ]] \
    || { echo "slurm_cluster: FAIL: no $exe: install slurm-wlm and munge (scripts/install-deps.sh)" >&2; exit 1; }
done
export PATH=$PATH:/usr/sbin

rm -rf "$work"
mkdir -p "$work"/{munge,state,spool,log,dev}
chmod 755 "$work" "$work/munge"
host=$(hostname -s)
user=$(id -un)
pids=() ctld_pid=""

stop() {
  local status=$?
  set +e
  if [[ -n ${SLURM_CONF:-} ]] && [[ -n ${ctld_pid:-} ]] && kill -0 "$ctld_pid" 2>/dev/null; then
    timeout 20 scancel --user="$user" 2>/dev/null
    for _ in $(seq 30); do
      [[ -z $(timeout 20 squeue -h 2>/dev/null) ]] && break
      sleep 1
    done
  fi
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$pid" 2>/dev/null
  done
  if ((status != 0)); then
    echo "slurm_cluster: status $status; the daemons' logs end:"
    for f in "$work"/log/*.log "$work"/munge/munged.log; do
      [[ -f $f ]] && { echo "--- $f"; tail -n 15 "$f"; }
    done
  fi
  echo "slurm_cluster: stopped (files in $work)"
  exit "$status"
}
trap stop EXIT
trap 'exit 130' INT TERM

# munge: its own key and socket.
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge/munge.key"
munged -F --force --key-file="$work/munge/munge.key" --socket="$work/munge/munge.socket" \
  --pid-file="$work/munge/munged.pid" --seed-file="$work/munge/munged.seed" \
  --log-file="$work/munge/munged.log" 2>>"$work/log/munged.stderr" &
pids+=($!)
for _ in $(seq 50); do [[ -S $work/munge/munge.socket ]] && break; sleep 0.2; done

read -r ctld_port slurmd_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')

for i in 0 1 2 3; do ln -s /dev/null "$work/dev/nvidia$i"; done
cat >"$work/gres.conf" <<EOF
NodeName=$host Name=gpu File=$work/dev/nvidia[0-3]
EOF
cat >"$work/slurm.conf" <<EOF
# A one-node test cluster (tests/jobs/slurm_cluster.sh).
ClusterName=apron-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge/munge.socket,cred_expire=10
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
# A requeued job may start cred_expire + 1 s after its requeue; the main scheduler's default
# 60 s period started it 20-50 s later than that.
SchedulerParameters=sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
JobRequeue=1
MinJobAge=3600
KillWait=10
InactiveLimit=0
NodeName=$host NodeAddr=127.0.0.1 CPUs=8 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=4000 Gres=gpu:4 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$work/slurm.conf

slurmctld -D -i 2>>"$work/log/slurmctld.stderr" &
ctld_pid=$!
pids+=($ctld_pid)
sleep 1
slurmd -D -N "$host" 2>>"$work/log/slurmd.stderr" &
pids+=($!)

state=""
for _ in $(seq 60); do
  state=$(sinfo -h -o %t 2>/dev/null || true)
  [[ $state == idle ]] && break
  sleep 1
done
[[ $state == idle ]] || { echo "slurm_cluster: FAIL: the node did not come up (state '$state')"; exit 1; }
echo "slurm_cluster: one-node cluster up ($host, SLURM_CONF=$SLURM_CONF)"
sinfo
set +e
"$@"
status=$?
set -e
exit "$status"
