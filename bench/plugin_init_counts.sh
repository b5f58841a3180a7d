#!/bin/sh
# bench/plugin_init_counts.sh — the full plugin init and the store-only
# rendezvous in counts that repeat exactly, where the wall clock does not.
#
#   B=build/default [NS="1024 16384"] sh bench/plugin_init_counts.sh
#
# For each N, under callgrind with a cache simulation of a 32 MiB, 16-way
# last-level cache (this host's L3; LL=SIZE,ASSOC,LINE to change it), and
# only inside ddp_sim_run: `$B/bench/plugin_init sim N` (the full init)
# and `$B/bench/sim_scale N` (the store rendezvous). Prints instructions,
# LL misses and hand-offs of each, the ratio full/store of instructions and
# of callgrind's cycle estimate (instructions + 100 per LL miss, about
# what a miss to DRAM costs), and the growth exponent of the full init's
# instructions and estimate between the smallest and the largest N. Same
# build, same N: the same figures in every run, where two wall-clock runs
# of one binary on a virtual machine differ by 5 % (docs/benchmarks.md
# § 13). About 40 s per N of 16,384 ranks. Figures only, no assertions;
# skips (exit 0) without valgrind.
set -u
B=${B:-build/default}
NS=${NS:-"1024 16384"}
LL=${LL:-33554432,16,64}
if ! command -v valgrind >/dev/null 2>&1; then
    echo "plugin_init_counts: skipped: valgrind is not installed"
    exit 0
fi
PI=$B/bench/plugin_init
SS=$B/bench/sim_scale
[ -x "$PI" ] && [ -x "$SS" ] || make -s "$PI" "$SS" || exit 1
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

# counts NAME CMD... -> "instructions ll_misses hand-offs"
counts() {
    name=$1
    shift
    valgrind --tool=callgrind --cache-sim=yes --LL="$LL" \
        --callgrind-out-file="$DIR/$name.out" --collect-atstart=no \
        --toggle-collect=ddp_sim_run "$@" >"$DIR/$name.txt" 2>"$DIR/$name.err" || {
        echo "plugin_init_counts: $* failed:" >&2
        tail -n 5 "$DIR/$name.err" >&2
        return 1
    }
    # "Collected : Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw"
    ir=$(sed -n 's/.*Collected : *//p' "$DIR/$name.err" | awk '{print $1, $7 + $8 + $9}')
    ho=$(sed -n 's/.*hand-offs[ :]*\([0-9][0-9]*\).*/\1/p' "$DIR/$name.txt" | tail -n 1)
    echo "$ir ${ho:-?}"
}

echo "plugin_init_counts: callgrind, LL $LL, inside ddp_sim_run; $B"
first=
for n in $NS; do
    f=$(counts "full$n" "$PI" sim "$n") || exit 1
    s=$(counts "store$n" "$SS" "$n") || exit 1
    echo "$n $f $s" | awk '{
        n = $1; fi = $2; fm = $3; fh = $4; si = $5; sm = $6; sh = $7
        fe = fi + 100 * fm; se = si + 100 * sm
        printf "N=%-6d full init: %.1f M instructions, %.2f M LL misses, %s hand-offs | store rendezvous: %.1f M, %.2f M, %s | ratio: instructions %.2f, estimate %.2f\n", n, fi / 1e6, fm / 1e6, fh, si / 1e6, sm / 1e6, sh, fi / si, fe / se }'
    line="$n $(echo "$f" | awk '{print $1, $1 + 100 * $2}')"
    [ -z "$first" ] && first=$line
    last=$line
done
if [ "$first" != "$last" ]; then
    echo "$first $last" | awk '{
        printf "growth exponent of the full init, N=%d..%d: instructions %.2f, estimate %.2f\n", $1, $4, log($5 / $2) / log($4 / $1), log($6 / $3) / log($4 / $1) }'
fi
