#!/bin/sh
# bench/beside_load.sh — a command run beside a CPU-bound load: HOGS busy
# loops (default 14) and the command pinned to the CPUs in CPUS (default
# 1, taskset's list), so that each of the command's processes competes
# with HOGS others for those CPUs as it would at load 2 x HOGS + 2 on a
# 2-CPU host, while the other CPUs stay free for the rest of the host.
# Prints the command's exit status, its wall time and the 1-minute load
# average sampled every 10 s (min / max), for docs/benchmarks.md.
#
#   [HOGS=14] [CPUS=1] sh bench/beside_load.sh make torch-scenarios
#
# Figures only, no assertions; the hogs end with the script (even on ^C).
set -u
hogs=${HOGS:-14}
cpus=${CPUS:-1}
[ $# -ge 1 ] || { echo "usage: [HOGS=N] [CPUS=LIST] sh bench/beside_load.sh COMMAND..." >&2; exit 2; }
command -v taskset >/dev/null || { echo "beside_load: taskset (util-linux) is missing" >&2; exit 2; }
pids=
for i in $(seq "$hogs"); do
    taskset -c "$cpus" sh -c 'while :; do :; done' &
    pids="$pids $!"
done
samples=$(mktemp /tmp/ddpsim-load-XXXXXX)
( while :; do cut -d' ' -f1 /proc/loadavg; sleep 10; done ) >"$samples" &
sampler=$!
trap 'kill $pids $sampler 2>/dev/null; rm -f "$samples"' EXIT INT TERM
start=$(date +%s)
taskset -c "$cpus" "$@"
st=$?
end=$(date +%s)
sort -n "$samples" | awk -v st="$st" -v w=$((end - start)) -v h="$hogs" -v c="$cpus" '
    NR == 1 { lo = $1 } { hi = $1 }
    END { printf "beside_load: exit %d, %d s wall, %d hogs on CPU(s) %s, load average %s-%s\n",
                 st, w, h, c, lo, hi }'
exit "$st"
