#!/bin/sh
# bench/smpi_init.sh — the simulated full plugin init next to SimGrid's SMPI
# running bench/mpi_init.c (MPI_Init + MPI_Barrier + MPI_Allreduce of one
# int + MPI_Finalize), at the same N, in the same run.
#
#   B=build/default [NS="1024 4096"] [FACTORIES="raw thread"] [TASKS=threads] \
#       sh bench/smpi_init.sh
#
# SMPI runs on a generated platform shaped like plugin_init's cluster: N/8
# hosts of 8 cores, 10 GB/s and 100 us between hosts, 10 us on a host's
# loopback; one rank per core (hostfile). Each run is
#   smpirun -no-privatize -np N -platform P -hostfile H \
#       --cfg=contexts/factory:F ./mpi_init.smpi
# timed from outside (date +%s.%N, launch to exit; and its CPU time, user
# + system, from this shell's children times), once per context factory F:
# `raw` is SimGrid's default (user-space context switches), `thread` runs
# each rank as a kernel thread with a baton, as ddpsim's
# DDP_SIM_TASKS_THREADS does. Then `$B/bench/plugin_init sim N` (ddpsim's
# default, user-space contexts; TASKS=threads: `sim-threads N`), whose
# wall and CPU time cover ddp_sim_run. Prints each figure and the ratios
# ddpsim/SMPI, of wall and of CPU time (on a loaded machine the CPU ratio
# is the steadier one). Skips (exit 0) when smpicc or smpirun is missing
# (Debian package simgrid). Figures only, no assertions.
set -u
B=${B:-build/default}
NS=${NS:-"1024 4096"}
FACTORIES=${FACTORIES:-"raw thread"}
case ${TASKS:-contexts} in
contexts) mode=sim ;;
threads) mode=sim-threads ;;
*) echo "TASKS must be contexts or threads, got \"$TASKS\"" >&2; exit 2 ;;
esac
PI=$B/bench/plugin_init
if ! command -v smpicc >/dev/null 2>&1 || ! command -v smpirun >/dev/null 2>&1; then
    echo "smpi: smpicc/smpirun not installed (apt-get install simgrid); skipped"
    exit 0
fi
[ -x "$PI" ] || make -s "$PI" || exit 1
work=$(mktemp -d "${TMPDIR:-/tmp}/smpi_init.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT INT TERM
smpicc -std=c11 -O2 -DDDP_BENCH_MPI -o "$work/mpi_init.smpi" bench/mpi_init.c \
    >"$work/cc.log" 2>&1 || { cat "$work/cc.log"; exit 1; }
echo "plugin_init sim vs SMPI ($(smpirun -version 2>/dev/null | head -n 1))," \
     "$(nproc) CPU(s), load: $(cut -d' ' -f1-3 /proc/loadavg)"

now() { date +%s.%N; }
# CPU seconds (user + system) of this shell's waited-for children so far.
tck=$(getconf CLK_TCK)
child_cpu() { awk -v t="$tck" '{ sub(/.*\) /, ""); print ($14 + $15) / t }' /proc/$$/stat; }

for n in $NS; do
    hosts=$(( (n + 7) / 8 ))
    cat >"$work/platform.xml" <<EOF
<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <cluster id="c" prefix="node" suffix="" radical="0-$((hosts - 1))" core="8"
           speed="1Gf" bw="10GBps" lat="100us" loopback_bw="10GBps" loopback_lat="10us"/>
</platform>
EOF
    i=0
    : >"$work/hostfile"
    while [ "$i" -lt "$n" ]; do
        echo "node$((i / 8))" >>"$work/hostfile"
        i=$((i + 1))
    done
    line=$("$PI" "$mode" "$n") || exit 1
    ours=$(echo "$line" | sed -n 's/.*wall *\([0-9.]*\) s.*/\1/p')
    ours_cpu=$(echo "$line" | sed -n 's/.*cpu *\([0-9.]*\) s.*/\1/p')
    echo "$line"
    for f in $FACTORIES; do
        c0=$(child_cpu)
        t0=$(now)
        out=$(cd "$work" && smpirun -no-privatize -np "$n" -platform platform.xml \
              -hostfile hostfile --cfg=contexts/factory:"$f" ./mpi_init.smpi 2>&1)
        st=$?
        t1=$(now)
        c1=$(child_cpu)
        dt=$(echo "$t1 - $t0" | bc -l)
        dc=$(echo "$c1 - $c0" | bc -l)
        printf "smpi  %5d ranks, contexts %-6s: wall %7.3f s, cpu %7.3f s | %s (exit %s)\n" \
            "$n" "$f" "$dt" "$dc" "$(echo "$out" | grep mpi_init | tail -n 1)" "$st"
        awk -v n="$n" -v f="$f" -v o="$ours" -v m="$dt" -v oc="$ours_cpu" -v mc="$dc" 'BEGIN {
            printf "N=%-6s ddpsim/SMPI (%s contexts): %.2f wall, %.2f cpu\n", n, f, o / m, oc / mc }'
    done
done
