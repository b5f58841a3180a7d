#!/bin/sh
# bench/plugin_init_ab.sh — two builds of the simulator side by side, in
# one run, interleaved, so that a noisy host moves both alike.
#
#   A=/path/to/build-a B=/path/to/build-b [NS="1024 4096 16384"] [REPS=7] \
#       sh bench/plugin_init_ab.sh
#
# A and B are build directories (e.g. build/default of two checkouts; each
# needs bench/plugin_init and bench/sim_scale). For each N, REPS rounds of:
# A's full init (`plugin_init sim N`), A's store rendezvous (`sim_scale
# N`), then B's two, each in a fresh process. Prints per N the median wall
# time of each and the ratio full/store of each build. Figures only, no
# assertions.
set -u
NS=${NS:-"1024 4096 16384"}
REPS=${REPS:-7}
case $REPS in
'' | *[!0-9]* | 0) echo "REPS must be a positive integer, got \"$REPS\"" >&2; exit 2 ;;
esac
for d in "${A:-}" "${B:-}"; do
    [ -n "$d" ] && [ -x "$d/bench/plugin_init" ] && [ -x "$d/bench/sim_scale" ] || {
        echo "A and B must be build directories with bench/plugin_init and bench/sim_scale (got A=\"${A:-}\" B=\"${B:-}\")" >&2
        exit 2
    }
done
echo "A=$A B=$B, $(nproc) CPU(s), load: $(cut -d' ' -f1-3 /proc/loadavg)"
wall_of() { sed -n 's/.*wall *\([0-9.]*\) s.*/\1/p' | tail -n 1; }
median() { tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for n in $NS; do
    af= as= bf= bs=
    r=0
    while [ "$r" -lt "$REPS" ]; do
        af="$af $("$A/bench/plugin_init" sim "$n" | wall_of)"
        as="$as $("$A/bench/sim_scale" "$n" | wall_of)"
        bf="$bf $("$B/bench/plugin_init" sim "$n" | wall_of)"
        bs="$bs $("$B/bench/sim_scale" "$n" | wall_of)"
        r=$((r + 1))
    done
    awk -v n="$n" -v k="$REPS" -v af="$(echo $af | median)" -v as="$(echo $as | median)" \
        -v bf="$(echo $bf | median)" -v bs="$(echo $bs | median)" 'BEGIN {
        printf "N=%-6s A: full %.3f s, store %.3f s, ratio %.2f | B: full %.3f s, store %.3f s, ratio %.2f (medians of %d)\n",
               n, af, as, af / as, bf, bs, bf / bs, k }'
done
