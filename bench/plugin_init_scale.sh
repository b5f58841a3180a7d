#!/bin/sh
# bench/plugin_init_scale.sh — the full plugin init in the simulator at
# growing N, next to the store-only rendezvous at the same N, in one run.
#
#   B=build/default [NS="1024 2048 4096 8192 16384"] [REPS=3] [TASKS=threads] \
#       sh bench/plugin_init_scale.sh
#
# For each N, REPS times, alternating, each in a fresh process (so that the
# peak RSS is that N's): `$B/bench/plugin_init sim N` (ddp_hpc under SLURM,
# N/8 nodes x 8 ranks: store, tcp group, store barrier, configure_ddp,
# teardown) and `$B/bench/sim_scale N` (the store rendezvous and barrier
# alone). Prints every line, then per N the median wall time of each and
# the ratio of the medians full/store, and the growth exponent of the full
# init's median wall time between the smallest and the largest N
# (log(t2/t1) / log(N2/N1)). On a virtual machine one run at 16,384 ranks
# can take half as long again as the next (page faults are first touches
# of 300-500 MiB): the medians are the figures to read. The simulator's tasks are user-space
# contexts (its default); TASKS=threads runs both with one pthread per task
# (`plugin_init sim-threads N`, `sim_scale --threads N`). Figures only, no
# assertions.
set -u
B=${B:-build/default}
NS=${NS:-"1024 2048 4096 8192 16384"}
TASKS=${TASKS:-contexts}
case $TASKS in
contexts) mode=sim ss_opt= ;;
threads) mode=sim-threads ss_opt=--threads ;;
*) echo "TASKS must be contexts or threads, got \"$TASKS\"" >&2; exit 2 ;;
esac
REPS=${REPS:-3}
case $REPS in
'' | *[!0-9]*) reps_ok=0 ;;
*) reps_ok=$((REPS > 0)) ;;
esac
[ "$reps_ok" = 1 ] || { echo "REPS must be a positive integer, got \"$REPS\"" >&2; exit 2; }
PI=$B/bench/plugin_init
SS=$B/bench/sim_scale
[ -x "$PI" ] && [ -x "$SS" ] || make -s "$PI" "$SS" || exit 1
echo "plugin_init $mode vs sim_scale $ss_opt, $(nproc) CPU(s), load: $(cut -d' ' -f1-3 /proc/loadavg)"

median() { sort -n | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
wall_of() { sed -n 's/.*wall *\([0-9.]*\) s.*/\1/p'; }
first_n= first_t= last_n= last_t=
for n in $NS; do
    fs= ss=
    r=0
    while [ "$r" -lt "$REPS" ]; do
        full=$("$PI" "$mode" "$n") || exit 1
        store=$("$SS" $ss_opt "$n" | tail -n 1) || exit 1
        echo "$full"
        echo "sim_scale $store"
        fs="$fs $(echo "$full" | wall_of)"
        ss="$ss $(echo "$store" | wall_of)"
        r=$((r + 1))
    done
    tf=$(echo $fs | tr ' ' '\n' | median)
    ts=$(echo $ss | tr ' ' '\n' | median)
    awk -v n="$n" -v f="$tf" -v s="$ts" -v k="$REPS" 'BEGIN {
        printf "N=%-6s full init %.3f s, store rendezvous %.3f s (medians of %d): ratio %.2f\n", n, f, s, k, f / s }'
    [ -z "$first_n" ] && first_n=$n && first_t=$tf
    last_n=$n
    last_t=$tf
done
if [ "$first_n" != "$last_n" ]; then
    awk -v n1="$first_n" -v t1="$first_t" -v n2="$last_n" -v t2="$last_t" 'BEGIN {
        printf "growth exponent of the full init, N=%s..%s: %.2f\n", n1, n2,
               log(t2 / t1) / log(n2 / n1) }'
fi
