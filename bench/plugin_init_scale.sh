#!/bin/sh
# bench/plugin_init_scale.sh — the full plugin init in the simulator at
# growing N, next to the store-only rendezvous at the same N, in one run.
#
#   B=build/default [NS="1024 2048 4096 8192 16384"] [TASKS=threads] \
#       sh bench/plugin_init_scale.sh
#
# For each N, alternating, each in a fresh process (so that the peak RSS is
# that N's): `$B/bench/plugin_init sim N` (ddp_hpc under SLURM, N/8 nodes x
# 8 ranks: store, tcp group, store barrier, configure_ddp, teardown) and
# `$B/bench/sim_scale N` (the store rendezvous and barrier alone). Prints
# both lines, the ratio full/store per N, and the growth exponent of the
# full init's wall time between the smallest and the largest N
# (log(t2/t1) / log(N2/N1)). The simulator's tasks are user-space
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
PI=$B/bench/plugin_init
SS=$B/bench/sim_scale
[ -x "$PI" ] && [ -x "$SS" ] || make -s "$PI" "$SS" || exit 1
echo "plugin_init $mode vs sim_scale $ss_opt, $(nproc) CPU(s), load: $(cut -d' ' -f1-3 /proc/loadavg)"

first_n= first_t= last_n= last_t=
for n in $NS; do
    full=$("$PI" "$mode" "$n") || exit 1
    store=$("$SS" $ss_opt "$n" | tail -n 1) || exit 1
    echo "$full"
    echo "sim_scale $store"
    tf=$(echo "$full" | sed -n 's/.*wall *\([0-9.]*\) s.*/\1/p')
    ts=$(echo "$store" | sed -n 's/.*wall *\([0-9.]*\) s.*/\1/p')
    awk -v n="$n" -v f="$tf" -v s="$ts" 'BEGIN {
        printf "N=%-6s full init %.3f s, store rendezvous %.3f s: ratio %.2f\n", n, f, s, f / s }'
    [ -z "$first_n" ] && first_n=$n && first_t=$tf
    last_n=$n
    last_t=$tf
done
if [ "$first_n" != "$last_n" ]; then
    awk -v n1="$first_n" -v t1="$first_t" -v n2="$last_n" -v t2="$last_t" 'BEGIN {
        printf "growth exponent of the full init, N=%s..%s: %.2f\n", n1, n2,
               log(t2 / t1) / log(n2 / n1) }'
fi
