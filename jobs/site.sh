# jobs/site.sh: EVERYTHING SITE-SPECIFIC FOR THE BATCH TEMPLATES LIVES HERE.
# The templates (jobs/one_node.sbatch, jobs/multi_node.sbatch) source this file on the compute
# node before starting apron. Edit the marked block for your cluster; leave the rest alone.
# Partition, account and QOS are not set here: pass them to sbatch (sbatch -p gpu -A myproj ...)
# or export SBATCH_PARTITION / SBATCH_ACCOUNT / SBATCH_QOS in your shell (sbatch reads them).
#
# Every variable below can also be set in the environment before sbatch (it exports the
# submitting shell's environment), which is how tests/jobs/slurm_cluster.sh runs the templates on
# a 2-core machine without GPUs.

# ======================= BEGIN SITE-SPECIFIC ENVIRONMENT ==================================
# Modules: the compiler, CUDA, MPI and HDF5 that apron was built with. For example:
#   module purge
#   module load gcc/12 cuda/12.4 openmpi/4.1 hdf5/1.14-mpi
# (Debian packages need no modules.)

# The apron executable (default: the CUDA build of the checkout the job was submitted from).
APRON_EXE=${APRON_EXE:-${APRON_HOME}/build-cuda/src/apron}

# The MPI launcher. Open MPI's mpirun reads the SLURM allocation (hosts, slots) by itself and
# forwards SIGUSR1/SIGUSR2 to the ranks, which the checkpoint-on-signal path relies on. Do not
# replace it with srun unless your srun forwards USR1 to the tasks (srun --signal does not).
APRON_MPIRUN=${APRON_MPIRUN:-mpirun}

# CPU binding: each rank (one per GPU) gets --cpus-per-task cores next to each other, and its
# OpenMP threads stay on them. Put cores near their GPU's NUMA node first if your nodes need it
# (e.g. --map-by ppr:${SLURM_NTASKS_PER_NODE}:node:PE=N with a rankfile).
APRON_MPI_BIND=${APRON_MPI_BIND:---map-by ppr:${SLURM_NTASKS_PER_NODE:-1}:node:PE=${SLURM_CPUS_PER_TASK:-1} --bind-to core --report-bindings}

# Extra mpirun options (transport tuning, --mca ...). Example for InfiniBand with UCX:
#   APRON_MPI_EXTRA="--mca pml ucx -x UCX_TLS=rc,sm,cuda_copy,cuda_ipc"
APRON_MPI_EXTRA=${APRON_MPI_EXTRA:-}

# Threads per rank: the cores SLURM gave each task.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}
export OMP_PLACES=${OMP_PLACES:-cores}
export OMP_PROC_BIND=${OMP_PROC_BIND:-close}

# Halo transport between GPUs: unset (MPI staged through pinned host memory) or nccl.
# export APRON_TRANSPORT=nccl

# How many times one job may requeue itself after a checkpoint stop (a runaway guard).
APRON_MAX_REQUEUES=${APRON_MAX_REQUEUES:-20}
# ======================= END SITE-SPECIFIC ENVIRONMENT ====================================
