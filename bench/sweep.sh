#!/bin/sh
# bench/sweep.sh — a sweep's throughput: `ddpsim explore` runs many
# simulations in one process, as every shard of a sweep does.
#
#   [DDPSIM=./ddpsim] [A=/path/to/other/ddpsim] [REPS=5] sh bench/sweep.sh
#
# For each case (1,000 runs of 16 ranks, 40 of 1,024, 10 of 4,096), REPS
# times: `explore ... --no-progress` under /usr/bin/time, in a fresh
# process. Prints each case's medians: wall, user and system time, minor
# page faults and peak RSS. With A (another build's ddpsim), each rep runs
# A then DDPSIM, interleaved, and both are printed (docs/benchmarks.md § 15
# compared the build before the stack-slab cache). Figures only, no
# assertions.
set -u
DDPSIM=${DDPSIM:-./ddpsim}
A=${A:-}
REPS=${REPS:-5}
case $REPS in
'' | *[!0-9]* | 0) echo "REPS must be a positive integer, got \"$REPS\"" >&2; exit 2 ;;
esac
for b in "$DDPSIM" ${A:+"$A"}; do
    [ -x "$b" ] || { echo "not an executable ddpsim: \"$b\" (build it: make ddpsim)" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "bench/sweep.sh needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
echo "sweep: ddpsim explore, $REPS rep(s), $(nproc) CPU(s), load: $(cut -d' ' -f1-3 /proc/loadavg)"

tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
# one run: "wall user sys minflt maxrss_kib" on stdout
one() {
    /usr/bin/time -o "$tmp" -f "%e %U %S %R %M" "$@" --no-progress >/dev/null 2>&1 || {
        echo "failed: $*" >&2
        exit 1
    }
    cat "$tmp"
}
# the columns of the runs on stdin -> their medians
medians() {
    awk 'NF { rows++; for (i = 1; i <= NF; i++) v[i, rows] = $i; nf = NF }
         END { for (i = 1; i <= nf; i++) {
                   n = 0; for (r = 1; r <= rows; r++) a[++n] = v[i, r]
                   for (x = 2; x <= n; x++) for (y = x; y > 1 && a[y - 1] > a[y]; y--) { t = a[y]; a[y] = a[y - 1]; a[y - 1] = t }
                   printf "%s ", n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
               print "" }'
}
report() { # label, runs
    echo "$2" | medians | awk -v l="$1" '{ printf "%-44s wall %.2f s, user %.2f s, sys %.2f s, page faults %d, peak RSS %.1f MiB\n", l, $1, $2, $3, $4, $5 / 1024 }'
}
for c in "--runs 1000 --ranks 16 --seed 1" "--runs 40 --ranks 1024 --seed 1" "--runs 10 --ranks 4096 --seed 1"; do
    ra='' rb='' r=0
    while [ "$r" -lt "$REPS" ]; do
        if [ -n "$A" ]; then
            # shellcheck disable=SC2086 # $c: the explore arguments, split on purpose
            ra="$ra$(one "$A" explore $c)
"
        fi
        # shellcheck disable=SC2086
        rb="$rb$(one "$DDPSIM" explore $c)
"
        r=$((r + 1))
    done
    if [ -n "$A" ]; then
        report "A  explore $c" "$ra"
    fi
    report "explore $c" "$rb"
done
