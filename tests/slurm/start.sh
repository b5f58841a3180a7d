#!/bin/sh
# tests/slurm/start.sh [DIR] — bring up a real single-node SLURM (munged,
# slurmctld, slurmd from Debian's packages) whose every file lives in DIR
# (a new temporary directory when DIR is not given), for tests that run
# ddpsim under a real `srun`. Needs root and `sh scripts/deps.sh --real`.
#
# On success it writes DIR/env.sh and prints the same lines on stdout:
#     export SLURM_CONF=DIR/slurm.conf
#     export DDPSIM_SLURM_DIR=DIR
# so `eval "$(sh tests/slurm/start.sh)"` makes srun/sinfo/squeue use it.
# Progress and errors go to stderr. Stop it with `sh tests/slurm/stop.sh DIR`
# (kills what this started, by pid, and removes DIR); start.sh itself stops
# everything it started when it fails.
#
# Tunables (environment): DDPSIM_SLURM_CPUS (CPUs the node declares,
# default 8: enough for 4 tasks even on a 2-core machine), DDPSIM_SLURM_PORT
# (slurmctld's port; slurmd uses the next one; default 26817),
# DDPSIM_SLURM_FIRST_JOB_ID (default 1234567: 7-digit job ids exercise the
# "last four digits" port rule), DDPSIM_SLURM_WAIT (seconds to wait for the
# node to become idle, default 60).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
err() { printf 'slurm/start.sh: %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
    err "needs root (slurmd and munged run as root here)"
    exit 1
fi
for b in munged slurmctld slurmd sinfo srun scontrol; do
    command -v "$b" >/dev/null 2>&1 || {
        err "$b not found; install with: sh scripts/deps.sh --real"
        exit 1
    }
done

keep=--keep # on failure: a DIR the caller named keeps its logs
if [ $# -ge 1 ] && [ -n "$1" ]; then
    dir=$1
    mkdir -p "$dir"
else
    dir=$(mktemp -d "${TMPDIR:-/tmp}/ddpsim-slurm.XXXXXX")
    keep=
fi
dir=$(cd "$dir" && pwd)
for f in "$dir/slurmctld.pid" "$dir/slurmd.pid" "$dir/munge/munged.pid"; do
    if [ -s "$f" ] && kill -0 "$(tr -dc '0-9' <"$f")" 2>/dev/null; then
        err "a cluster already runs in $dir ($f); stop it first: sh tests/slurm/stop.sh $dir"
        exit 1
    fi
done
chmod 700 "$dir"
mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
chmod 700 "$dir/munge"

host=$(hostname -s)
# SLURM itself reaches the node at 127.0.0.1; the tasks' main address is the
# node's name (the first host of SLURM_NODELIST), so it must resolve.
getent hosts "$host" >/dev/null 2>&1 ||
    err "warning: host name \"$host\" does not resolve (add it to /etc/hosts): ranks will not find the main node"
cpus=${DDPSIM_SLURM_CPUS:-8}
first_job=${DDPSIM_SLURM_FIRST_JOB_ID:-1234567}
wait_s=${DDPSIM_SLURM_WAIT:-60}
export DDPSIM_SLURM_DIR="$dir"
export SLURM_CONF="$dir/slurm.conf"
# The daemons (and so every slurmstepd they start) carry this marker in their
# environment: stop.sh finds what is left of them by it, never by name.
daemon() { env DDPSIM_SLURM_DAEMON="$dir" "$@"; }

# listening PORT: some TCP socket (IPv4 or IPv6) listens on PORT.
listening() {
    cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
        awk -v p="$(printf ':%04X' "$1")" \
            '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }'
}
if [ -n "${DDPSIM_SLURM_PORT:-}" ]; then
    port=$DDPSIM_SLURM_PORT
    if listening "$port" || listening $((port + 1)); then
        err "port $port or $((port + 1)) (DDPSIM_SLURM_PORT) is already in use"
        exit 1
    fi
else # the first free pair from 26817 up: another cluster may hold one
    port=26817
    while listening "$port" || listening $((port + 1)); do
        port=$((port + 2))
        [ $port -lt 27817 ] || {
            err "no free pair of ports in 26817..27816 for slurmctld/slurmd"
            exit 1
        }
    done
fi

show_logs() {
    for f in "$dir/log/munged.log" "$dir/log/slurmctld.log" "$dir/log/slurmd.log" \
        "$dir/log/slurmctld.out" "$dir/log/slurmd.out"; do
        [ -s "$f" ] || continue
        printf '%s\n' "---- $f (last 30 lines) ----" >&2
        tail -n 30 "$f" >&2
    done
}
fail() {
    err "$*"
    show_logs
    # shellcheck disable=SC2086
    sh "$here/stop.sh" $keep "$dir" >&2 || true
    exit 1
}

# munge: a key of our own and a daemon on a socket in DIR, so nothing of the
# machine's munge (if any) is used or disturbed.
key="$dir/munge/munge.key"
if [ ! -s "$key" ]; then
    if command -v mungekey >/dev/null 2>&1; then
        mungekey --create --keyfile="$key" --force >/dev/null 2>&1 ||
            dd if=/dev/urandom of="$key" bs=1024 count=1 2>/dev/null
    else
        dd if=/dev/urandom of="$key" bs=1024 count=1 2>/dev/null
    fi
fi
chmod 600 "$key"
sock="$dir/munge/munge.socket"
daemon munged --force --socket="$sock" --key-file="$key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" >"$dir/log/munged.out" 2>&1 ||
    fail "munged did not start"
i=0
while [ ! -S "$sock" ]; do
    i=$((i + 1))
    [ $i -le 100 ] || fail "munged socket $sock did not appear within 10 s"
    sleep 0.1
done
if command -v munge >/dev/null 2>&1 && command -v unmunge >/dev/null 2>&1; then
    munge --socket="$sock" -n | unmunge --socket="$sock" >/dev/null 2>&1 ||
        fail "munge round trip through $sock failed"
fi

cat >"$SLURM_CONF" <<EOF
# Written by tests/slurm/start.sh: a single-node SLURM in $dir.
ClusterName=ddpsim
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
# the node declares CPUs=$cpus whatever the machine has
SlurmdParameters=config_overrides
ReturnToService=2
FirstJobId=$first_job
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF

err "starting slurmctld and slurmd in $dir (node $host, CPUs=$cpus, ports $port-$((port + 1)))"
# -i: ignore state files from an earlier run of this DIR.
daemon slurmctld -i -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 ||
    fail "slurmctld did not start"
daemon slurmd -f "$SLURM_CONF" >"$dir/log/slurmd.out" 2>&1 || fail "slurmd did not start"

# Wait until the node is idle (bounded); a daemon that exits ends the wait.
dead() { # dead NAME PIDFILE: NAME wrote PIDFILE and is gone
    [ -s "$2" ] && ! kill -0 "$(tr -dc '0-9' <"$2")" 2>/dev/null
}
t=0
state=
while :; do
    dead slurmctld "$dir/slurmctld.pid" && fail "slurmctld exited (see its log below)"
    dead slurmd "$dir/slurmd.pid" && fail "slurmd exited (see its log below)"
    dead munged "$dir/munge/munged.pid" && fail "munged exited (see its log below)"
    state=$(sinfo -h -N -n "$host" -o '%T' 2>/dev/null | head -n 1 || true)
    [ "$state" = idle ] && break
    t=$((t + 1))
    [ $t -le $((wait_s * 2)) ] ||
        fail "node $host not idle after ${wait_s} s (state \"${state:-none}\"; sinfo: $(sinfo 2>&1 | tr '\n' ' '))"
    sleep 0.5
done
err "node $host is idle"

{
    printf 'export SLURM_CONF=%s\n' "$SLURM_CONF"
    printf 'export DDPSIM_SLURM_DIR=%s\n' "$dir"
} >"$dir/env.sh"
cat "$dir/env.sh"
