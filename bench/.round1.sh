set -uo pipefail
source .device/env.sh
mpirun -n 2 .device/halo_transport
NCCL_MAX_CTAS=8 mpirun -n 2 .device/halo_transport | tail -5
NCCL_PROTO=LL128 mpirun -n 2 .device/halo_transport | tail -5
APRON_TRANSPORT=mpi mpirun -n 2 .device/halo_transport
