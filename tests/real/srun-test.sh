#!/bin/sh
# tests/real/srun-test.sh — ddpsim under a real SLURM: brings up a single-node
# cluster (tests/slurm/start.sh: munged, slurmctld, slurmd, all in a temporary
# directory), runs ddpsim under real `srun` / `sbatch`, and stops the cluster
# again on every exit path (trap), failed checks and signals included.
#
#   sh tests/real/srun-test.sh       (root; sh scripts/deps.sh --real first;
#                                      DDPSIM=path overrides ./ddpsim)
#
# Checks, against docs/cluster-environments.md (SLURM) and the values SLURM
# itself gives each task (SLURM_JOB_ID, SLURM_NODELIST via scontrol):
#  1. srun -N1 -n4 --ntasks-per-node=4 ddpsim env: slurm detected, world 4,
#     global ranks 0..3 once each, local rank = SLURM_LOCALID, node rank 0,
#     main_address = first host of SLURM_NODELIST, main_port = 15000 + last
#     four digits of SLURM_JOB_ID, validate(devices=4, num_nodes=1) ok;
#     with MASTER_ADDR/MASTER_PORT exported, those win (Lightning 2.1+).
#  2. srun -N1 --ntasks-per-node=4 ddpsim train --accelerator ddp --devices 4:
#     4 ranks ok as ddp_hpc (SLURM manages the tasks), one checksum.
#  3. sbatch --ntasks-per-node=4 --wrap "srun ddpsim train ...": the same
#     inside a batch job.
#  4. srun -n 4 (no --ntasks-per-node) ddpsim train --devices 4: every task
#     fails at once with the "use --ntasks-per-node" error (Lightning 2.x).
#  5. srun -N1 --ntasks-per-node=2 ddpsim train --devices 4 (#4389): not
#     SLURM-managed, each task launches its own workers: duplicated ranks are
#     reported and the step ends by its --timeout instead of hanging.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
test=srun-test
. "$root/tests/real/lib.sh"
slurm_up
host=$(hostname -s)

# 1. ddpsim env in every task, beside what SLURM gave the task.
out=$work/env
mkdir -p "$out"
timeout -k 5 60 srun -N1 -n 4 --ntasks-per-node=4 sh -c '
    "$1" env --devices 4 --num-nodes 1 > "$0/env.$SLURM_PROCID" 2>&1
    echo "$?" > "$0/rc.$SLURM_PROCID"
    printf "%s %s %s\n" "$SLURM_JOB_ID" "$SLURM_LOCALID" \
        "$(scontrol show hostnames "$SLURM_NODELIST" | head -n 1)" > "$0/slurm.$SLURM_PROCID"
' "$out" "$ddpsim" >"$work/out1" 2>&1
rc=$?
bad=0
[ $rc -eq 0 ] || {
    fail "srun -n 4 ddpsim env: srun exited $rc"
    show "$work/out1"
    bad=1
}
for r in 0 1 2 3; do
    f=$out/env.$r
    read -r job lid first <"$out/slurm.$r" 2>/dev/null || {
        fail "task $r: no output"
        bad=1
        continue
    }
    port=$((15000 + job % 10000))
    [ "$first" = "$host" ] || {
        fail "task $r: SLURM_NODELIST's first host is \"$first\", expected this node \"$host\""
        bad=1
    }
    for line in "cluster: slurm" "detected: yes" "main_address: $first" \
        "main_port: $port" "world_size: 4" "global_rank: $r" "local_rank: $lid" \
        "node_rank: 0" "creates_processes_externally: yes" "validate: ok" \
        "validate(devices=4, num_nodes=1): ok"; do
        grep -qxF "$line" "$f" || {
            fail "srun ddpsim env, task $r (SLURM_JOB_ID=$job): expected \"$line\""
            show "$f"
            bad=1
        }
    done
    [ "$(cat "$out/rc.$r")" = 0 ] || {
        fail "task $r: ddpsim env exited $(cat "$out/rc.$r")"
        bad=1
    }
done
[ $bad -eq 0 ] && ok "srun -N1 -n 4 --ntasks-per-node=4 ddpsim env: slurm, ranks 0-3, local = SLURM_LOCALID, main $first:$port (= 15000 + SLURM_JOB_ID $job mod 10000)"

# MASTER_ADDR / MASTER_PORT exported to the tasks win (Lightning 2.1+, #17550).
timeout -k 5 60 env MASTER_ADDR=127.0.0.1 MASTER_PORT=23999 srun -N1 -n 2 \
    --ntasks-per-node=2 sh -c '"$1" env > "$0/menv.$SLURM_PROCID"' "$out" "$ddpsim" \
    >"$work/out1b" 2>&1
bad=0
for r in 0 1; do
    for line in "cluster: slurm" "main_address: 127.0.0.1" "main_port: 23999" "global_rank: $r"; do
        grep -qxF "$line" "$out/menv.$r" 2>/dev/null || {
            fail "srun with MASTER_ADDR/MASTER_PORT exported, task $r: expected \"$line\""
            [ -f "$out/menv.$r" ] && show "$out/menv.$r"
            bad=1
        }
    done
done
[ $bad -eq 0 ] && ok "srun with MASTER_ADDR=127.0.0.1 MASTER_PORT=23999 exported: both win over the node list and the job id"

# check_train FILE RC WHAT: 4 ranks ok as ddp_hpc, ranks 0..3, one checksum.
check_train() {
    n=$(grep -c '^rank [0-3]/4 (local [0-3], node 0) ddp_hpc tcp: ok, connected' "$1")
    ranks=$(sed -n 's|^rank \([0-9]*\)/4 .* ok, connected.*|\1|p' "$1" | sort -n | tr '\n' ' ')
    sums=$(sed -n 's/.*checksum \([0-9a-f]*\)$/\1/p' "$1" | sort -u | wc -l)
    if [ "$2" -eq 0 ] && [ "$n" -eq 4 ] && [ "$ranks" = "0 1 2 3 " ] && [ "$sums" -eq 1 ]; then
        ok "$3: 4 ranks ok as ddp_hpc, one checksum"
    else
        fail "$3: rc $2, $n of 4 ranks ok as ddp_hpc (ranks: $ranks; checksums: $sums)"
        show "$1"
    fi
}

# 2. The training script, SLURM managing the tasks.
t0=$(date +%s)
timeout -k 5 90 srun -N1 -n 4 --ntasks-per-node=4 "$ddpsim" train --accelerator ddp \
    --devices 4 --timeout 60 >"$work/out2" 2>&1
check_train "$work/out2" $? "srun -N1 -n 4 --ntasks-per-node=4 ddpsim train --accelerator ddp --devices 4 ($(($(date +%s) - t0)) s)"

# 3. The same from a batch script (sbatch --wait: the job's exit status).
t0=$(date +%s)
timeout -k 5 90 sbatch --wait -N1 --ntasks-per-node=4 -o "$work/out3" -J ddpsim-train \
    --wrap "srun $ddpsim train --accelerator ddp --devices 4 --timeout 60" \
    >"$work/out3.sbatch" 2>&1
rc=$?
[ -f "$work/out3" ] || cp "$work/out3.sbatch" "$work/out3"
check_train "$work/out3" $rc "sbatch -N1 --ntasks-per-node=4 --wrap 'srun ddpsim train ...' ($(($(date +%s) - t0)) s)"

# 4. srun -n 4 without --ntasks-per-node: Lightning 2.x refuses (#4389 rule).
t0=$(date +%s)
timeout -k 5 90 srun -n 4 "$ddpsim" train --accelerator ddp --devices 4 --timeout 60 \
    >"$work/out4" 2>&1
rc=$?
t=$(($(date +%s) - t0))
n=$(grep -c 'FAIL: SLURM_NTASKS=4 is set but SLURM_NTASKS_PER_NODE is not.*hint: use --ntasks-per-node=4' "$work/out4")
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$n" -eq 4 ] && [ $t -lt 30 ]; then
    ok "srun -n 4 (no --ntasks-per-node) ddpsim train --devices 4: all 4 tasks refuse at once with the --ntasks-per-node hint ($t s)"
else
    fail "srun -n 4 without --ntasks-per-node: rc $rc after $t s, $n of 4 tasks gave the --ntasks-per-node error"
    show "$work/out4"
fi

# 5. #4389: 2 tasks for devices=4 -> duplicated ranks, reported; no hang.
t0=$(date +%s)
timeout -k 5 90 srun -N1 -n 2 --ntasks-per-node=2 "$ddpsim" train --accelerator ddp \
    --devices 4 --timeout 20 >"$work/out5" 2>&1
rc=$?
t=$(($(date +%s) - t0))
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $t -lt 60 ] &&
    grep -q 'ranks are duplicated' "$work/out5" && grep -q '#4389' "$work/out5"; then
    ok "srun --ntasks-per-node=2 ddpsim train --devices 4 (#4389): duplicated ranks reported, step ended in $t s (--timeout 20), srun exit $rc"
else
    fail "#4389 (2 tasks, devices=4): rc $rc after $t s (want non-zero, < 60 s, \"ranks are duplicated\" and #4389 in the output)"
    show "$work/out5"
fi

# Nothing may be left running in the cluster.
slurm_queue_empty

finish
