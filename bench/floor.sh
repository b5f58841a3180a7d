#!/bin/sh
# bench/floor.sh — the simulator against the context-switch floor
# (bench/ctxbaton: N user-space contexts passing a baton, nothing else),
# side by side in one run, at the same N and the same hand-offs per rank:
# sim_scale (the store rendezvous and barrier) and plugin_init sim (the
# full init: ddp_hpc, store, tcp group, store barrier, configure_ddp).
#
#   B=build/default [NS="4096 16384"] [CALLGRIND=0] sh bench/floor.sh
#
# For each N: each program's CPU time (user + system of the run) and
# hand-offs, ctxbaton's at hand-offs/N per context, and the ratios
# sim_scale/floor and full/floor. CALLGRIND=1 adds the same ratios in
# instructions (valgrind --tool=callgrind, whole process). Figures only.
set -u
B=${B:-build/default}
NS=${NS:-"4096 16384"}
CALLGRIND=${CALLGRIND:-0}
SS=$B/bench/sim_scale PI=$B/bench/plugin_init CB=$B/bench/ctxbaton
[ -x "$SS" ] && [ -x "$PI" ] && [ -x "$CB" ] || make -s "$SS" "$PI" "$CB" || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "floor: $(nproc) CPU(s), load: $(cut -d' ' -f1-3 /proc/loadavg)"
ins() { # instructions of one command, by callgrind
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$@" >/dev/null 2>"$tmp/vg"
    sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' "$tmp/vg"
}
for n in $NS; do
    s=$("$SS" "$n" | tail -n 1) || exit 1
    f=$("$PI" sim "$n") || exit 1
    echo "sim_scale $s"
    echo "$f"
    s_cpu=$(echo "$s" | sed -n 's/.*cpu *\([0-9.]*\) s.*/\1/p')
    s_h=$(echo "$s" | sed -n 's/.*hand-offs *\([0-9]*\) .*/\1/p')
    f_cpu=$(echo "$f" | sed -n 's/.*cpu \([0-9.]*\) s.*/\1/p')
    f_h=$(echo "$f" | sed -n 's/.*hand-offs \([0-9]*\),.*/\1/p')
    hs=$(((s_h + n / 2) / n)) hf=$(((f_h + n / 2) / n))
    bs=$("$CB" "$n" "$hs") || exit 1
    bf=$("$CB" "$n" "$hf") || exit 1
    echo "$bs"
    echo "$bf"
    bs_cpu=$(echo "$bs" | sed -n 's/.*cpu \([0-9.]*\) s.*/\1/p')
    bf_cpu=$(echo "$bf" | sed -n 's/.*cpu \([0-9.]*\) s.*/\1/p')
    awk -v n="$n" -v a="$s_cpu" -v b="$bs_cpu" -v c="$f_cpu" -v d="$bf_cpu" -v hs="$hs" -v hf="$hf" 'BEGIN {
        printf "N=%-6s CPU: sim_scale %.3f s / floor(%d) %.3f s = %.2f; full init %.3f s / floor(%d) %.3f s = %.2f\n",
               n, a, hs, b, a / b, c, hf, d, c / d }'
    if [ "$CALLGRIND" = 1 ]; then
        is=$(ins "$SS" "$n") if=$(ins "$PI" sim "$n")
        ibs=$(ins "$CB" "$n" "$hs") ibf=$(ins "$CB" "$n" "$hf")
        awk -v n="$n" -v a="$is" -v b="$ibs" -v c="$if" -v d="$ibf" 'BEGIN {
            printf "N=%-6s instructions: sim_scale %.3g / floor %.3g = %.2f; full init %.3g / floor %.3g = %.2f\n",
                   n, a, b, a / b, c, d, c / d }'
    fi
done
