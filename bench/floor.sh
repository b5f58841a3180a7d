#!/bin/sh
# bench/floor.sh — the simulator against the context-switch floor
# (bench/ctxbaton: N user-space contexts passing a baton, nothing else),
# side by side in one run, at the same N and the same hand-offs per rank:
# sim_scale (the store rendezvous and barrier) and plugin_init sim (the
# full init: ddp_hpc, store, tcp group, store barrier, configure_ddp).
#
#   B=build/default [NS="4096 16384"] [COUNT=auto] [CG_N=1024] sh bench/floor.sh
#
# For each N: each program's CPU time (user + system of the run) and
# hand-offs, ctxbaton's at hand-offs/N per context, and the ratios
# sim_scale/floor and full/floor. CPU time moves with the host (page
# faults cost 10x more on one guest than on another), so the script also
# counts instructions per hand-off (whole process, set-up included), which
# mean the same on every host: COUNT=perf (`perf stat -e instructions:u`,
# at each N) where the CPU's counters are there, else COUNT=callgrind
# (valgrind, ~50x slower: at CG_N ranks only), else it says which is
# missing. COUNT=auto picks the first that works; COUNT=none skips it.
# Figures only.
set -u
B=${B:-build/default}
NS=${NS:-"4096 16384"}
COUNT=${COUNT:-auto}
CG_N=${CG_N:-1024}
SS=$B/bench/sim_scale PI=$B/bench/plugin_init CB=$B/bench/ctxbaton
[ -x "$SS" ] && [ -x "$PI" ] && [ -x "$CB" ] || make -s "$SS" "$PI" "$CB" || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "floor: $(nproc) CPU(s), load: $(cut -d' ' -f1-3 /proc/loadavg)"

# The instruction counter: perf where `perf stat` counts, else callgrind.
perf_counts() {
    command -v perf >/dev/null &&
        perf stat -x, -e instructions:u true 2>&1 | grep -q '^[0-9][0-9]*,'
}
if [ "$COUNT" = auto ]; then
    if perf_counts; then COUNT=perf
    elif command -v valgrind >/dev/null; then COUNT=callgrind
    else
        echo "instructions: not counted: perf has no instruction counter here" \
             "and valgrind is not installed (apt-get install valgrind)"
        COUNT=none
    fi
fi
ins() { # instructions of one command, whole process
    if [ "$COUNT" = perf ]; then
        perf stat -x, -e instructions:u -o "$tmp/perf" "$@" >/dev/null 2>&1
        sed -n 's/^\([0-9][0-9]*\),.*instructions.*/\1/p' "$tmp/perf"
    else
        valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$@" >/dev/null 2>"$tmp/vg"
        sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' "$tmp/vg"
    fi
}

# Runs sim_scale and plugin_init at n: sets s, f (their last lines),
# s_h, f_h (their hand-offs) and hs, hf (hand-offs per rank).
handoffs() {
    s=$("$SS" "$1" | tail -n 1) || exit 1
    f=$("$PI" sim "$1") || exit 1
    s_h=$(echo "$s" | sed -n 's/.*hand-offs *\([0-9]*\) .*/\1/p')
    f_h=$(echo "$f" | sed -n 's/.*hand-offs \([0-9]*\),.*/\1/p')
    hs=$(((s_h + $1 / 2) / $1)) hf=$(((f_h + $1 / 2) / $1))
}

# Instructions per hand-off at n: each program's count over its own
# hand-offs (the floor's: n x its hand-offs per context).
per_handoff() {
    handoffs "$1"
    is=$(ins "$SS" "$1") if=$(ins "$PI" sim "$1")
    ibs=$(ins "$CB" "$1" "$hs") ibf=$(ins "$CB" "$1" "$hf")
    awk -v n="$1" -v c="$COUNT" -v a="$is" -v b="$ibs" -v x="$if" -v d="$ibf" \
        -v sh="$s_h" -v fh="$f_h" -v hs="$hs" -v hf="$hf" 'BEGIN {
        if (a == "" || b == "" || x == "" || d == "") { print "instructions: the counter gave nothing"; exit }
        ps = a / sh; pb = b / (n * hs); pf = x / fh; pd = d / (n * hf)
        printf "N=%-6s instructions per hand-off (%s): sim_scale %.0f / floor(%d) %.0f = %.2f; full init %.0f / floor(%d) %.0f = %.2f\n",
               n, c, ps, hs, pb, ps / pb, pf, hf, pd, pf / pd }'
}

for n in $NS; do
    handoffs "$n"
    echo "sim_scale $s"
    echo "$f"
    s_cpu=$(echo "$s" | sed -n 's/.*cpu *\([0-9.]*\) s.*/\1/p')
    f_cpu=$(echo "$f" | sed -n 's/.*cpu \([0-9.]*\) s.*/\1/p')
    bs=$("$CB" "$n" "$hs") || exit 1
    bf=$("$CB" "$n" "$hf") || exit 1
    echo "$bs"
    echo "$bf"
    bs_cpu=$(echo "$bs" | sed -n 's/.*cpu \([0-9.]*\) s.*/\1/p')
    bf_cpu=$(echo "$bf" | sed -n 's/.*cpu \([0-9.]*\) s.*/\1/p')
    awk -v n="$n" -v a="$s_cpu" -v b="$bs_cpu" -v c="$f_cpu" -v d="$bf_cpu" -v hs="$hs" -v hf="$hf" 'BEGIN {
        printf "N=%-6s CPU: sim_scale %.3f s / floor(%d) %.3f s = %.2f; full init %.3f s / floor(%d) %.3f s = %.2f\n",
               n, a, hs, b, a / b, c, hf, d, c / d }'
    [ "$COUNT" = perf ] && per_handoff "$n"
done
[ "$COUNT" = callgrind ] && per_handoff "$CG_N"
exit 0
