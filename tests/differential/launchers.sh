#!/bin/sh
# tests/differential/launchers.sh BIN COUNT [SEED] — make differential's
# external-launcher families (tests/differential/extlaunch.c, BIN): COUNT
# configurations through real OpenMPI mpirun and COUNT through real srun,
# the two families side by side (mpirun costs CPU, srun mostly waits on
# slurmctld). mpirun runs 2 launches at a time, each with a session folder
# of its own (OMPI_MCA_orte_tmpdir_base: two that share /tmp/ompi.HOST.UID
# race to create it, and one fails with "File exists").
#
# srun needs a cluster. One that answers already (SLURM_CONF) is used one
# launch at a time; otherwise, as root with SLURM installed, a private
# single-node cluster is started for the run (tests/slurm/start.sh, 64 CPUs
# declared so that 8 launches at a time never queue: a queued job waits on
# the scheduler's interval) and stopped at the end. Without either the family
# says "skipped: ..." (exit 0). Exit 1 when either family disagrees.
bin=$1 count=${2:-10000} seed=${3:-41}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddpsim-extlaunch.XXXXXX") || exit 2
cluster=
cleanup() {
    [ -z "$cluster" ] || sh "$here/../slurm/stop.sh" "$cluster" >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$bin" mpirun "$count" "$seed" 2 >"$tmp/mpirun" 2>&1 &
mpi=$!

jobs=1
if ! sinfo -h -o %T 2>/dev/null | grep -q idle && [ "$(id -u)" -eq 0 ] &&
    command -v slurmctld >/dev/null 2>&1; then
    cluster=$tmp/slurm
    if env DDPSIM_SLURM_CPUS=64 sh "$here/../slurm/start.sh" "$cluster" >"$tmp/env" 2>"$tmp/start"; then
        . "$tmp/env"
        jobs=8
    else
        echo "srun         could not start a private SLURM cluster (tests/slurm/start.sh):" >&2
        cat "$tmp/start" >&2
        cluster=
    fi
fi
"$bin" srun "$count" "$seed" "$jobs"
srun_rc=$?
wait "$mpi"
mpi_rc=$?
cat "$tmp/mpirun"
[ "$srun_rc" -eq 0 ] && [ "$mpi_rc" -eq 0 ]
