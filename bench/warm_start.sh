#!/bin/sh
# bench/warm_start.sh — torch scenarios run for real, warm (the default: a
# fork server per ddpsim run imports torch once) against --cold (a fresh
# interpreter per rank): the CPU of the run and all its processes
# (/usr/bin/time: user + sys of the waited-for children) and the wall.
#
#   DDPSIM=build/default/ddpsim [SCN="torch-clean torch-crash-node"]
#   [PORT=32400] [NETNS=1] [REPS=1] sh bench/warm_start.sh
#
# Copies of the scenarios on ports PORT, PORT+1, ... (every mention of a
# scenario's port moves with it). Prints each start's CPU and wall, the
# ratio of their CPU, and whether every run's verdict is the same warm and
# cold. Figures only, no assertions; without a Python that imports torch
# it says so and exits 0.
set -u
ddpsim=${DDPSIM:-build/default/ddpsim}
if ! scripts/torch-python -c 'import torch' >/dev/null 2>&1; then
    echo "warm_start: skipped: no Python here imports torch (sh scripts/deps.sh --torch)"
    exit 0
fi
tmp=$(mktemp -d /tmp/ddpsim-warm-bench-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cp -r scenarios/common "$tmp/"
port=${PORT:-32400}
for s in ${SCN:-torch-clean torch-crash-node}; do
    # every mention of the scenario's port (port_taken, a fault's port=) moves
    # with it; one without a port line (29500) gets one
    old=$(sed -n 's/^port \([0-9]*\).*/\1/p' "scenarios/$s.scn")
    if [ -n "$old" ]; then
        sed "s/\b$old\b/$port/g" "scenarios/$s.scn" > "$tmp/$s.scn"
    else
        sed "s/^nodes .*/&\nport $port/" "scenarios/$s.scn" > "$tmp/$s.scn"
    fi
    port=$((port + 1))
done
mode=--real
[ "${NETNS:-0}" = 1 ] && mode=--netns
echo "warm_start: $mode, $(ls "$tmp"/*.scn | wc -l) scenario(s): ${SCN:-torch-clean torch-crash-node}"
for rep in $(seq "${REPS:-1}"); do
    for start in warm cold; do
        flag=
        [ "$start" = cold ] && flag=--cold
        /usr/bin/time -f "%U %S %e" -o "$tmp/t" "$ddpsim" run $mode $flag --no-progress \
            "$tmp"/*.scn > "$tmp/out" 2>&1
        st=$?
        tail -1 "$tmp/t" | awk -v s="$start" -v st=$st -v r="$(tail -1 "$tmp/out")" \
            '{ printf "%-5s exit %d  cpu %6.1f s (user %.1f, sys %.1f)  wall %5.1f s  %s\n",
                      s, st, $1 + $2, $1, $2, $3, r }'
        tail -1 "$tmp/t" | awk '{ print $1 + $2 }' > "$tmp/cpu.$start"
        # each run's verdict, to compare warm with cold
        awk 'NF >= 5 && ($5 == "ok" || $5 == "FAIL" || $5 == "skip") { print $1, $5 }' \
            "$tmp/out" > "$tmp/verdicts.$start"
        grep -B1 '^    why: ' "$tmp/out" | sed "s/^/  $start: /"
    done
    echo "ratio (warm cpu / cold cpu): $(awk -v w="$(cat "$tmp/cpu.warm")" \
        -v c="$(cat "$tmp/cpu.cold")" 'BEGIN { printf "%.2f", (c > 0 ? w / c : 0) }')"
    if cmp -s "$tmp/verdicts.warm" "$tmp/verdicts.cold"; then
        echo "verdicts: the same warm and cold ($(wc -l < "$tmp/verdicts.warm") runs)"
    else
        echo "verdicts differ (warm | cold):"
        paste -d'|' "$tmp/verdicts.warm" "$tmp/verdicts.cold"
    fi
done
