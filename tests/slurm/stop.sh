#!/bin/sh
# tests/slurm/stop.sh [--keep] DIR — stop the single-node SLURM that
# tests/slurm/start.sh brought up in DIR and remove DIR (--keep: leave the
# files, e.g. logs to look at). Safe to call more than once, on a half-started
# DIR, or on one whose daemons already died.
#
# Order: cancel every job (so slurmstepd ends the tasks), stop slurmd,
# slurmctld, munged by their pid files (TERM, then KILL after 10 s), then kill
# whatever is left that those daemons started — found by the marker
# DDPSIM_SLURM_DAEMON=DIR in the process environment (slurmstepd), and each
# such process's descendants (the tasks) — and any srun still using
# DIR/slurm.conf. Only processes by id; never by name.
set -u
keep=0
if [ "${1:-}" = "--keep" ]; then
    keep=1
    shift
fi
dir=${1:-${DDPSIM_SLURM_DIR:-}}
if [ -z "$dir" ]; then
    echo "usage: sh tests/slurm/stop.sh [--keep] DIR" >&2
    exit 2
fi
[ -d "$dir" ] || exit 0
dir=$(cd "$dir" && pwd)
conf="$dir/slurm.conf"

alive() { kill -0 "$1" 2>/dev/null; }

# stop_pid PID: TERM, wait up to 10 s, then KILL.
stop_pid() {
    alive "$1" || return 0
    kill -TERM "$1" 2>/dev/null || return 0
    i=0
    while alive "$1" && [ $i -lt 100 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    alive "$1" && kill -KILL "$1" 2>/dev/null
    return 0
}

pidfile() {
    [ -s "$1" ] || return 0
    p=$(tr -dc '0-9' <"$1")
    [ -n "$p" ] && stop_pid "$p"
    return 0
}

# Processes (pids) whose environment holds VAR=VALUE exactly (one grep over
# every /proc/PID/environ; entries are NUL-separated).
with_env() {
    grep -lzxF "$1" /proc/[0-9]*/environ 2>/dev/null |
        sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p' | grep -vx "$$"
    return 0
}

# PID and all its descendants (children first is not needed: we KILL).
tree() {
    ps -eo pid=,ppid= 2>/dev/null | awk -v root="$1" '
        { parent[$1] = $2; pids[NR] = $1 }
        END {
            keep[root] = 1; changed = 1
            while (changed) {
                changed = 0
                for (i in pids) { p = pids[i]
                    if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; changed = 1 } }
            }
            for (p in keep) print p
        }'
}

if [ -f "$conf" ] && command -v squeue >/dev/null 2>&1; then
    jobs=$(SLURM_CONF="$conf" timeout 10 squeue -h -o '%i' 2>/dev/null || true)
    if [ -n "$jobs" ]; then
        # shellcheck disable=SC2086
        SLURM_CONF="$conf" timeout 10 scancel $jobs 2>/dev/null || true
        i=0
        while [ $i -lt 30 ] &&
            [ -n "$(SLURM_CONF="$conf" timeout 5 squeue -h -o '%i' 2>/dev/null)" ]; do
            sleep 0.5
            i=$((i + 1))
        done
    fi
fi

pidfile "$dir/slurmd.pid"
pidfile "$dir/slurmctld.pid"

# Leftovers: slurmstepd (carries the daemons' marker) and its tasks; srun
# clients of this cluster.
left=$(with_env "DDPSIM_SLURM_DAEMON=$dir")
for p in $(with_env "SLURM_CONF=$conf"); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = srun ] && left="$left $p"
done
all=
for p in $left; do
    all="$all $(tree "$p")"
done
# munged last: slurmstepd may need it until it ends.
for p in $all; do
    [ "$p" = "$$" ] && continue
    [ -s "$dir/munge/munged.pid" ] && [ "$p" = "$(tr -dc '0-9' <"$dir/munge/munged.pid")" ] &&
        continue
    alive "$p" && kill -KILL "$p" 2>/dev/null
done
pidfile "$dir/munge/munged.pid"
for p in $(with_env "DDPSIM_SLURM_DAEMON=$dir"); do
    alive "$p" && kill -KILL "$p" 2>/dev/null
done

if [ $keep -eq 0 ]; then
    rm -rf "$dir"
fi
exit 0
