#!/bin/sh
# bench/warm_start.sh — torch scenarios run for real, warm (the default: a
# fork server per ddpsim run imports torch once) against --cold (a fresh
# interpreter per rank): the CPU of the run and all its processes
# (/usr/bin/time: user + sys of the waited-for children) and the wall.
#
#   DDPSIM=build/default/ddpsim [SCN="torch-clean torch-crash-node"]
#   [PORT=32400] [NETNS=1] [REPS=1] sh bench/warm_start.sh
#
# Copies of the scenarios on ports PORT, PORT+1, ... Figures only, no
# assertions; without a Python that imports torch it says so and exits 0.
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
    sed "s/^port [0-9]*/port $port/" "scenarios/$s.scn" > "$tmp/$s.scn"
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
    done
done
