#!/bin/sh
# tests/real/launch-test.sh — `ddpsim launch` (torchrun's contract) on real
# processes: the environment each worker gets, TorchElastic detection, the
# ddp_cpu -> ddp_cpu_hpc selection and a real 4-rank connection, two
# launchers as two "nodes", the devices x nodes = WORLD_SIZE check, the
# launcher's own exit statuses, timeout and usage errors, and signals:
# SIGINT/SIGTERM/SIGHUP forwarded to the workers, SIGKILL after the grace
# period or at a second signal, exit 128+N, no worker left.
#
#   sh tests/real/launch-test.sh          (DDPSIM=path overrides ./ddpsim)
#
# Prints "ok: ..." / "FAIL: ..." per check; exit 0 all passed, 1 otherwise.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
test=launch-test
. "$root/tests/real/lib.sh"

# A port no socket listens on (TCP, IPv4 or IPv6), from 20000..31999.
listening() {
    cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
        awk -v p="$(printf ':%04X' "$1")" \
            '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }'
}
free_port() {
    p=$((20000 + ($$ * 7919 + $(date +%s) + ${1:-0} * 101) % 12000))
    while listening "$p"; do p=$((p + 1)); done
    echo "$p"
}

# 1. The environment every worker gets (torchrun's variables).
port=$(free_port 1)
timeout -k 5 30 "$ddpsim" launch --nproc-per-node 2 --nnodes 3 --node-rank 1 \
    --master-addr 127.0.0.1 --master-port "$port" --rdzv-id job42 -- \
    sh -c 'env > "$0/env.$LOCAL_RANK"' "$work" >"$work/out1" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
    fail "launch of sh -c env exited $rc"
    show "$work/out1"
else
    bad=0
    for l in 0 1; do
        r=$((2 + l))
        for kv in RANK=$r LOCAL_RANK=$l GROUP_RANK=1 ROLE_RANK=$r ROLE_NAME=default \
            LOCAL_WORLD_SIZE=2 WORLD_SIZE=6 GROUP_WORLD_SIZE=3 ROLE_WORLD_SIZE=6 \
            MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TORCHELASTIC_RUN_ID=job42 \
            TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0 \
            TORCHELASTIC_USE_AGENT_STORE=False; do
            grep -qxF "$kv" "$work/env.$l" 2>/dev/null || {
                fail "worker $l: $kv not in its environment"
                bad=1
            }
        done
    done
    [ $bad -eq 0 ] && ok "launch --nproc-per-node 2 --nnodes 3 --node-rank 1: RANK 2,3, LOCAL_RANK, GROUP_RANK, *_WORLD_SIZE, MASTER_*, TORCHELASTIC_* as torchrun sets them"
fi

# 2. ddpsim env under the launcher: TorchElastic detected, ranks, address, port.
port=$(free_port 2)
timeout -k 5 30 "$ddpsim" launch --nproc-per-node 2 --master-port "$port" -- \
    sh -c 'exec "$1" env --devices 2 --num-nodes 1 > "$0/tenv.$RANK"' "$work" "$ddpsim" \
    >"$work/out2" 2>&1
rc=$?
bad=0
for r in 0 1; do
    f=$work/tenv.$r
    for line in "cluster: torchelastic" "detected: yes" "main_address: 127.0.0.1" \
        "main_port: $port" "world_size: 2" "global_rank: $r" "local_rank: $r" \
        "node_rank: 0" "creates_processes_externally: yes" \
        "validate(devices=2, num_nodes=1): ok"; do
        grep -qxF "$line" "$f" 2>/dev/null || {
            fail "launch -- ddpsim env: rank $r: expected \"$line\""
            [ -f "$f" ] && show "$f"
            bad=1
        }
    done
done
[ $rc -ne 0 ] && {
    fail "launch -- ddpsim env exited $rc"
    show "$work/out2"
    bad=1
}
[ $bad -eq 0 ] && ok "launch --nproc-per-node 2 -- ddpsim env: torchelastic detected, global/local ranks 0,1, main 127.0.0.1:$port"

# 3. The training script: 4 ranks connect, ddp_cpu became ddp_cpu_hpc.
port=$(free_port 3)
t0=$(date +%s)
timeout -k 5 60 "$ddpsim" launch --nproc-per-node 4 --master-port "$port" -- \
    "$ddpsim" train --accelerator ddp_cpu --devices 4 --timeout 30 >"$work/out3" 2>&1
rc=$?
t1=$(date +%s)
n=$(grep -c '^rank [0-3]/4 (local [0-3], node 0) ddp_cpu_hpc tcp: ok, connected' "$work/out3")
ranks=$(sed -n 's|^rank \([0-9]*\)/4 .* ok, connected.*|\1|p' "$work/out3" | sort -n | tr '\n' ' ')
sums=$(sed -n 's/.*checksum \([0-9a-f]*\)$/\1/p' "$work/out3" | sort -u | wc -l)
if [ $rc -eq 0 ] && [ "$n" -eq 4 ] && [ "$ranks" = "0 1 2 3 " ] && [ "$sums" -eq 1 ]; then
    ok "launch --nproc-per-node 4 -- ddpsim train --accelerator ddp_cpu --devices 4: 4 ranks ok as ddp_cpu_hpc, one checksum ($((t1 - t0)) s)"
else
    fail "launch -- ddpsim train: rc $rc, $n of 4 ranks ok as ddp_cpu_hpc (ranks: $ranks; checksums: $sums)"
    show "$work/out3"
fi

# 4. Two launchers as two nodes (node ranks 0 and 1) of one job. Both
#    nodes are this host, so the loopback master reaches them both: the
#    DDPSIM_HOSTS table says so (without it every rank refuses a loopback
#    master in a world of 2 nodes, as it should on real separate hosts).
port=$(free_port 4)
for nr in 0 1; do
    DDPSIM_HOSTS="node0=127.0.0.1,node1=127.0.0.1" timeout -k 5 60 "$ddpsim" launch --nproc-per-node 2 --nnodes 2 --node-rank $nr \
        --master-port "$port" -- "$ddpsim" train --accelerator ddp --devices 2 \
        --num-nodes 2 --timeout 30 >"$work/out4.$nr" 2>&1 &
    eval "pid$nr=\$!"
done
# shellcheck disable=SC2154
wait "$pid0"
rc0=$?
# shellcheck disable=SC2154
wait "$pid1"
rc1=$?
cat "$work/out4.0" "$work/out4.1" >"$work/out4"
got=$(sed -n 's|^rank \([0-9]\)/4 (local \([0-9]\), node \([0-9]\)) ddp_hpc tcp: ok.*|\1:\2:\3|p' \
    "$work/out4" | sort | tr '\n' ' ')
if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ "$got" = "0:0:0 1:1:0 2:0:1 3:1:1 " ]; then
    ok "two launchers --nnodes 2 --node-rank 0/1 --nproc-per-node 2: ranks 0-3 ok as ddp_hpc, node ranks 0,0,1,1"
else
    fail "two launchers as two nodes: rc $rc0/$rc1, rank:local:node = $got (want 0:0:0 1:1:0 2:0:1 3:1:1)"
    show "$work/out4"
fi

# 5. devices x num_nodes != WORLD_SIZE: a clear error, at once, no hang.
port=$(free_port 5)
t0=$(date +%s)
timeout -k 5 60 "$ddpsim" launch --nproc-per-node 2 --master-port "$port" -- \
    "$ddpsim" train --accelerator ddp_cpu --devices 4 --timeout 30 >"$work/out5" 2>&1
rc=$?
t1=$(date +%s)
if [ $rc -eq 1 ] && [ $((t1 - t0)) -lt 20 ] &&
    [ "$(grep -c 'FAIL: devices=4 and num_nodes=1 were requested, but their product 4 does not match the world size WORLD_SIZE=2 set by torchrun' "$work/out5")" -eq 2 ]; then
    ok "launch --nproc-per-node 2 -- train --devices 4: both ranks fail at once (devices x nodes != WORLD_SIZE), launcher exits 1 ($((t1 - t0)) s)"
else
    fail "launch 2 workers, train --devices 4: rc $rc after $((t1 - t0)) s (want 1, fast, the WORLD_SIZE sentence twice)"
    show "$work/out5"
fi

# 6. The launcher's own behaviour: statuses, timeout, usage errors.
"$ddpsim" launch --nproc-per-node 3 -- sh -c 'exit $((LOCAL_RANK == 1 ? 3 : 0))' \
    >"$work/out6" 2>&1
rc=$?
if [ $rc -eq 3 ] && grep -q 'local rank 1 (rank 1) exited with status 3' "$work/out6"; then
    ok "a worker exiting 3 -> launcher exits 3 and names it"
else
    fail "worker exit 3: launcher exited $rc"
    show "$work/out6"
fi
t0=$(date +%s)
timeout -k 5 30 "$ddpsim" launch --nproc-per-node 2 --timeout 1 -- sleep 60 >"$work/out7" 2>&1
rc=$?
t1=$(date +%s)
if [ $rc -eq 1 ] && [ $((t1 - t0)) -lt 10 ] && grep -q 'still running after --timeout 1 s' "$work/out7"; then
    ok "--timeout 1 with workers that sleep 60: stopped, exit 1 ($((t1 - t0)) s)"
else
    fail "--timeout 1: rc $rc after $((t1 - t0)) s"
    show "$work/out7"
fi
"$ddpsim" launch --nproc-per-node 2 -- "$work/no-such-program" >"$work/out8" 2>&1
rc=$?
[ $rc -eq 127 ] && grep -q 'could not start' "$work/out8" &&
    ok "a program that does not exist -> exit 127, \"could not start\"" ||
    { fail "missing program: rc $rc" && show "$work/out8"; }
"$ddpsim" launch --nproc-per-node x -- true >"$work/out9" 2>&1
rc=$?
if [ $rc -eq 2 ] &&
    grep -qxF 'ddpsim launch: bad --nproc-per-node "x"; expected an integer 1..64' "$work/out9"; then
    ok "--nproc-per-node x -> exit 2 with the expected sentence"
else
    fail "--nproc-per-node x: rc $rc"
    show "$work/out9"
fi
"$ddpsim" launch --nnodes 2 --node-rank 2 -- true >"$work/out10" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q 'bad --node-rank "2"; expected an integer 0..1' "$work/out10" &&
    ok "--node-rank 2 with --nnodes 2 -> exit 2" ||
    { fail "--node-rank out of range: rc $rc" && show "$work/out10"; }
"$ddpsim" launch --help >"$work/out11" 2>&1 && grep -q 'TORCHELASTIC_RUN_ID' "$work/out11" &&
    ok "--help lists the environment" || fail "--help"
PET_NNODES=abc "$ddpsim" launch -- true >"$work/out12" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -qxF 'ddpsim launch: bad --nnodes "abc" (from PET_NNODES); expected an integer 1..100000' "$work/out12" &&
    ok "PET_NNODES=abc -> exit 2 naming --nnodes and PET_NNODES" ||
    { fail "PET_NNODES=abc: rc $rc" && show "$work/out12"; }

# 7. Signals to the launcher (torchrun's behaviour): SIGINT, SIGTERM and
# SIGHUP are forwarded to every worker; those still running after
# --grace-period (or at a second signal) get SIGKILL; the launcher exits
# 128+N and leaves no worker behind. Each worker writes its pid (the pid of
# the `sleep` it execs) to $work/pid.LOCAL_RANK. Every wait is bounded.
alive() { # the pids in $work/pid.* still running
    for f in "$work"/pid.*; do
        [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && cat "$f"
    done
}
# launch_bg NAME WORKER-SCRIPT LAUNCH-OPTION...: the launcher in the
# background with 3 workers ($lpid); returns once all 3 wrote their pid.
launch_bg() {
    name=$1 script=$2
    shift 2
    rm -f "$work"/pid.*
    "$ddpsim" launch --nproc-per-node 3 "$@" -- sh -c "$script" "$work" \
        >"$work/$name.out" 2>&1 &
    lpid=$!
    n=0
    while [ "$(ls "$work"/pid.* 2>/dev/null | wc -l)" -lt 3 ] && [ $n -lt 200 ]; do
        sleep 0.1
        n=$((n + 1))
    done
    [ $n -lt 200 ] || fail "$name: the 3 workers did not start within 20 s"
}
# reap NAME: wait (30 s at most) for the launcher to end; its status in $rc.
reap() {
    n=0
    while kill -0 "$lpid" 2>/dev/null && [ $n -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
    if kill -0 "$lpid" 2>/dev/null; then
        fail "$1: the launcher still runs 30 s after the signal"
        kill -KILL "$lpid" 2>/dev/null
    fi
    wait "$lpid"
    rc=$?
    sleep 0.2
    left=$(alive | tr '\n' ' ')
    if [ -n "$left" ]; then
        fail "$1: workers left running: $left"
        alive | xargs kill -KILL 2>/dev/null
    fi
}
# verdict NAME WANT PATTERN MESSAGE: after reap, ok when the launcher exited
# WANT, left no worker and said PATTERN.
verdict() {
    if [ $rc -eq "$2" ] && [ -z "$left" ] && grep -qF "$3" "$work/$1.out"; then
        ok "$4"
    else
        fail "$1: exit $rc (want $2), workers left: ${left:-none}, or no \"$3\""
        show "$work/$1.out"
    fi
}
sleeper='echo $$ > "$0/pid.$LOCAL_RANK"; exec sleep 60'
for sig in INT TERM HUP; do
    case $sig in INT) want=130 ;; TERM) want=143 ;; HUP) want=129 ;; esac
    launch_bg "sig$sig" "$sleeper"
    kill -"$sig" "$lpid"
    reap "SIG$sig"
    verdict "sig$sig" $want "got SIG$sig: forwarding it to 3 worker(s)" \
        "SIG$sig to the launcher: forwarded to its 3 workers, exit $rc, no worker left"
done
# Workers that ignore SIGTERM: SIGKILL once the grace period is over.
stubborn='trap "" TERM; echo $$ > "$0/pid.$LOCAL_RANK"; exec sleep 60'
launch_bg grace "$stubborn" --grace-period 1
kill -TERM "$lpid"
reap "grace period"
verdict grace 143 '3 worker(s) still running 1 s after SIGTERM (--grace-period): SIGKILL' \
    "workers ignoring SIGTERM: SIGKILL after --grace-period 1, exit 143, none left"
# ... or at once on a second signal, however long the grace period.
launch_bg twice "$stubborn" --grace-period 3600
kill -TERM "$lpid"
n=0
while ! grep -q 'got SIGTERM: forwarding' "$work/twice.out" && [ $n -lt 200 ]; do
    sleep 0.1
    n=$((n + 1))
done
kill -TERM "$lpid"
reap "second signal"
verdict twice 143 'SIGTERM again: SIGKILL to the 3 worker(s) still running' \
    "a second SIGTERM during a 3600 s grace period: SIGKILL at once, exit 143, none left"

finish
