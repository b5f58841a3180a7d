#!/bin/sh
# bench/sim_128k.sh — the full plugin init (`ddpsim sim`: ddp, the default
# plugin, the tcp backend, the store barrier) at 16,384, 32,768 and
# 131,072 simulated ranks, 64 per node, the master's somaxconn raised to
# 65535 (--somaxconn) as large jobs raise it; SOMAXCONN=K sets another
# (1,048,576 ranks need more than 65535: NODES=16384 SOMAXCONN=1048576).
#
#   [DDPSIM=./ddpsim] [NODES="256 512 2048"] [CALLGRIND=0] sh bench/sim_128k.sh
#
# Per size: the run's last line (ranks ok, virtual time, trace hash), its
# CPU time (user + system, from /usr/bin/time), peak RSS and address space
# (VmPeak, read from /proc while it runs; ulimit -v must cover it); then the
# growth exponent of the CPU time between the smallest and the largest
# size (log(c2/c1) / log(N2/N1)). CALLGRIND=1 also counts instructions
# (valgrind --tool=callgrind) at the first two sizes and prints their
# exponent: this host has no hardware counter, and callgrind at 131,072
# ranks takes the better part of an hour. The machine's load decides wall
# time, so it is printed but not compared. Figures only, no assertions.
set -u
DDPSIM=${DDPSIM:-./ddpsim}
NODES=${NODES:-"256 512 2048"}
CALLGRIND=${CALLGRIND:-0}
SOMAXCONN=${SOMAXCONN:-65535}
[ -x "$DDPSIM" ] || { echo "no $DDPSIM: run make first" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian: time)" >&2; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "ddpsim sim --accelerator ddp --procs 64 --somaxconn $SOMAXCONN, $(nproc) CPU(s), load: $(cut -d' ' -f1-3 /proc/loadavg)"
first_n= first_c= last_n= last_c=
for nodes in $NODES; do
    n=$((nodes * 64))
    /usr/bin/time -f "%U %S %M %e" -o "$tmp/time" "$DDPSIM" sim --accelerator ddp \
        --nodes "$nodes" --procs 64 --somaxconn $SOMAXCONN >"$tmp/out" 2>&1 &
    tpid=$!
    vm=0 pid=
    # the address space: the run's VmPeak, read until it exits
    while kill -0 "$tpid" 2>/dev/null; do
        [ -n "$pid" ] || pid=$(pgrep -P "$tpid" | head -n 1)
        v=$([ -n "$pid" ] && awk '/^VmPeak/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
        [ -n "$v" ] && vm=$v
        sleep 0.2
    done
    wait "$tpid"
    rc=$?
    tail -n 1 "$tmp/out"
    [ "$rc" = 0 ] || { echo "N=$n: ddpsim sim exited $rc" >&2; exit 1; }
    read -r u s rss w <"$tmp/time"
    c=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')
    awk -v n="$n" -v u="$u" -v s="$s" -v c="$c" -v r="$rss" -v w="$w" -v vm="$vm" 'BEGIN {
        printf "N=%-7s CPU %6.2f s (user %.2f, sys %.2f), %.1f us/rank; peak RSS %.2f GiB (%.1f KiB/rank); address space %.2f GiB (%.1f KiB/rank); wall %.1f s\n",
               n, c, u, s, c / n * 1e6, r / 1048576, r / n, vm / 1048576, vm / n, w }'
    [ -z "$first_n" ] && first_n=$n && first_c=$c
    last_n=$n last_c=$c
done
if [ "$first_n" != "$last_n" ]; then
    awk -v a="$first_n" -v b="$last_n" -v x="$first_c" -v y="$last_c" 'BEGIN {
        printf "growth %d -> %d in CPU time: N^%.2f\n", a, b, log(y / x) / log(b / a) }'
fi
if [ "$CALLGRIND" = 1 ]; then
    command -v valgrind >/dev/null || { echo "CALLGRIND=1 needs valgrind" >&2; exit 1; }
    set -- $NODES
    ins() {
        valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$DDPSIM" sim \
            --accelerator ddp --nodes "$1" --procs 64 --somaxconn $SOMAXCONN >/dev/null 2>"$tmp/vg"
        sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' "$tmp/vg"
    }
    i1=$(ins "$1") i2=$(ins "$2")
    awk -v a=$(($1 * 64)) -v b=$(($2 * 64)) -v x="$i1" -v y="$i2" 'BEGIN {
        printf "instructions: N=%d %.3g, N=%d %.3g (%.0f per rank); growth N^%.2f\n",
               a, x, b, y, y / b, log(y / x) / log(b / a) }'
fi
