#!/bin/sh
# tests/real/mpirun-test.sh — ddpsim under a real OpenMPI `mpirun` (4
# processes on this node): the MPI environment is detected and derived as
# docs/cluster-environments.md says, and the training script connects.
#
#   sh tests/real/mpirun-test.sh     (openmpi-bin: sh scripts/deps.sh --real;
#                                      DDPSIM=path overrides ./ddpsim)
#
# Checks, against the values mpirun itself gives each rank:
#  1. mpirun -np 4 ddpsim env (no --cluster): mpi detected (no TorchElastic,
#     SLURM or LSF variables, so priority 4 wins), world 4, global rank =
#     OMPI_COMM_WORLD_RANK, local rank = OMPI_COMM_WORLD_LOCAL_RANK, node rank
#     0, main_address 127.0.0.1 (all ranks on one node), main_port = 10000 +
#     FNV-1a-64(job id) mod 10000 with the job id = the first non-empty of
#     PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid, OMPI_MCA_orte_hnp_uri (computed
#     here independently), the same in every rank; --cluster mpi agrees.
#  2. mpirun -x MASTER_ADDR -x MASTER_PORT: those win.
#  3. mpirun -np 4 ddpsim train --accelerator ddp_hpc --devices 4: 4 ranks ok.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
test=mpirun-test
. "$root/tests/real/lib.sh"
need mpirun "sh scripts/deps.sh --real"

# No other launcher's variables may decide the detection here.
scrub_env 'SLURM_[A-Z_]*\|LSB_[A-Z_]*\|JSM_[A-Z_]*'

mpirun_() { timeout -k 5 90 mpirun --allow-run-as-root --oversubscribe "$@"; }

# fnv_port STRING: 10000 + FNV-1a-64(STRING) mod 10000, in 32-bit halves so
# that sh arithmetic never overflows: h * (2^40 + 0x1b3) mod 2^64.
fnv_port() {
    hi=$((0xcbf29ce4)) lo=$((0x84222325))
    for b in $(printf '%s' "$1" | od -An -v -tu1); do
        lo=$((lo ^ b))
        m=$((lo * 0x1b3))
        hi=$(((hi * 0x1b3 + (m >> 32) + (lo << 8)) & 0xffffffff))
        lo=$((m & 0xffffffff))
    done
    echo $((10000 + ((hi % 10000) * 7296 + lo) % 10000)) # 2^32 mod 10000 = 7296
}

# 1. ddpsim env in every rank, beside what mpirun gave the rank.
out=$work/env
mkdir -p "$out"
# shellcheck disable=SC2016
mpirun_ -np 4 sh -c '
    r=$OMPI_COMM_WORLD_RANK
    "$1" env > "$0/env.$r" 2>&1; echo "$?" > "$0/rc.$r"
    "$1" env --cluster mpi > "$0/cenv.$r" 2>&1
    for v in PMIX_NAMESPACE OMPI_MCA_ess_base_jobid OMPI_MCA_orte_hnp_uri; do
        eval "x=\${$v:-}"; [ -n "$x" ] && { printf "%s\n" "$x" > "$0/job.$r"; break; }
    done
    printf "%s %s %s\n" "$OMPI_COMM_WORLD_LOCAL_RANK" "$OMPI_COMM_WORLD_LOCAL_SIZE" \
        "$OMPI_COMM_WORLD_SIZE" > "$0/ompi.$r"
' "$out" "$ddpsim" >"$work/out1" 2>&1
rc=$?
bad=0
[ $rc -eq 0 ] || {
    fail "mpirun -np 4 ddpsim env: mpirun exited $rc"
    show "$work/out1"
    bad=1
}
ports=
for r in 0 1 2 3; do
    read -r lrank lsize size <"$out/ompi.$r" 2>/dev/null || {
        fail "rank $r: no output"
        bad=1
        continue
    }
    job=$(cat "$out/job.$r" 2>/dev/null)
    [ -n "$job" ] || {
        fail "rank $r: mpirun set none of PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid, OMPI_MCA_orte_hnp_uri"
        bad=1
    }
    port=$(fnv_port "$job")
    ports="$ports $port"
    [ "$lsize" = "$size" ] || {
        fail "rank $r: OMPI_COMM_WORLD_LOCAL_SIZE=$lsize != SIZE=$size on one node?"
        bad=1
    }
    for line in "selection: detected" "cluster: mpi" "detected: yes" \
        "main_address: 127.0.0.1" "main_port: $port" "world_size: 4" "global_rank: $r" \
        "local_rank: $lrank" "node_rank: 0" "creates_processes_externally: yes" "validate: ok"; do
        grep -qxF "$line" "$out/env.$r" || {
            fail "mpirun ddpsim env, rank $r (job id \"$job\"): expected \"$line\""
            show "$out/env.$r"
            bad=1
        }
    done
    for line in "cluster: mpi" "main_port: $port" "global_rank: $r"; do
        grep -qxF "$line" "$out/cenv.$r" || {
            fail "mpirun ddpsim env --cluster mpi, rank $r: expected \"$line\""
            show "$out/cenv.$r"
            bad=1
        }
    done
done
nports=$(echo "$ports" | tr ' ' '\n' | sed '/^$/d' | sort -u | wc -l)
[ "$nports" -eq 1 ] || {
    fail "ranks derived different main ports:$ports"
    bad=1
}
[ $bad -eq 0 ] && ok "mpirun -np 4 ddpsim env: mpi detected (and --cluster mpi), ranks 0-3, local = OMPI_COMM_WORLD_LOCAL_RANK, main 127.0.0.1:$port (= 10000 + FNV-1a(\"$job\") mod 10000) in all ranks"

# 2. MASTER_ADDR / MASTER_PORT exported with -x win.
MASTER_ADDR=127.0.0.1 MASTER_PORT=23998 mpirun_ -x MASTER_ADDR -x MASTER_PORT -np 2 \
    sh -c '"$1" env > "$0/menv.$OMPI_COMM_WORLD_RANK"' "$out" "$ddpsim" >"$work/out2" 2>&1
bad=0
for r in 0 1; do
    for line in "cluster: mpi" "main_address: 127.0.0.1" "main_port: 23998" "global_rank: $r"; do
        grep -qxF "$line" "$out/menv.$r" 2>/dev/null || {
            fail "mpirun -x MASTER_ADDR -x MASTER_PORT, rank $r: expected \"$line\""
            [ -f "$out/menv.$r" ] && show "$out/menv.$r"
            bad=1
        }
    done
done
[ $bad -eq 0 ] && ok "mpirun -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=23998: both win"

# 3. The training script.
t0=$(date +%s)
mpirun_ -np 4 "$ddpsim" train --accelerator ddp_hpc --devices 4 --timeout 60 \
    >"$work/out3" 2>&1
rc=$?
t=$(($(date +%s) - t0))
n=$(grep -c '^rank [0-3]/4 (local [0-3], node 0) ddp_hpc tcp: ok, connected' "$work/out3")
ranks=$(sed -n 's|^rank \([0-9]*\)/4 .* ok, connected.*|\1|p' "$work/out3" | sort -n | tr '\n' ' ')
sums=$(sed -n 's/.*checksum \([0-9a-f]*\)$/\1/p' "$work/out3" | sort -u | wc -l)
if [ $rc -eq 0 ] && [ "$n" -eq 4 ] && [ "$ranks" = "0 1 2 3 " ] && [ "$sums" -eq 1 ]; then
    ok "mpirun -np 4 ddpsim train --accelerator ddp_hpc --devices 4: 4 ranks ok, one checksum ($t s)"
else
    fail "mpirun ddpsim train: rc $rc, $n of 4 ranks ok as ddp_hpc (ranks: $ranks; checksums: $sums)"
    show "$work/out3"
fi

finish
