#!/bin/sh
# tests/hostlist/vs-scontrol.sh [--require] [N] — ddpsim's hostlist
# expansion and compression against a live `scontrol` (SLURM's own parser):
# N random expressions (default 1200, tests/hostlist/gen.awk, seed $SEED or
# 1) through `ddpsim hostlist EXPR` vs `scontrol show hostnames EXPR`, and
# their hosts through `ddpsim hostlist --compress` vs `scontrol show
# hostlist`. scontrol runs without daemons when SLURM_CONF names a config:
# unless SLURM_CONF already works, a minimal one is written to a temporary
# directory (removed on exit). Without scontrol: "skipped" and exit 0, or
# exit 1 with --require (CI). Exit 1 on any difference, printing each.
# Needs ./ddpsim (or $DDPSIM).
set -eu
require=0
if [ "${1:-}" = --require ]; then require=1; shift; fi
n=${1:-1200}
seed=${SEED:-1}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/conf.sh"
ddpsim=${DDPSIM:-$here/../../ddpsim}
if ! command -v scontrol >/dev/null 2>&1; then
    echo "hostlist vs scontrol: skipped (scontrol not installed; sh scripts/deps.sh --real)"
    [ "$require" -eq 0 ] || exit 1
    exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddpsim-hostlist.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
if [ -z "${SLURM_CONF:-}" ] || ! scontrol show hostnames a >/dev/null 2>&1; then
    # The least scontrol needs to parse a hostlist: no daemon is contacted.
    hostlist_conf "$tmp"
fi
if ! scontrol show hostnames 'a[1-2]' >/dev/null 2>&1; then
    echo "hostlist vs scontrol: skipped (scontrol cannot run: $(scontrol show hostnames a 2>&1 | head -1))"
    [ "$require" -eq 0 ] || exit 1
    exit 0
fi
version=$(scontrol --version 2>/dev/null || echo "scontrol ?")
awk -v seed="$seed" -v n="$n" -f "$here/gen.awk" >"$tmp/exprs"
bad=0 i=0
while IFS= read -r e; do
    i=$((i + 1))
    scontrol show hostnames "$e" >"$tmp/want" 2>&1 || true
    "$ddpsim" hostlist "$e" >"$tmp/got" 2>&1 || true
    if ! cmp -s "$tmp/want" "$tmp/got"; then
        bad=$((bad + 1))
        printf 'DIFF expand %s\n  scontrol: %s\n  ddpsim:   %s\n' "$e" \
            "$(tr '\n' ' ' <"$tmp/want")" "$(tr '\n' ' ' <"$tmp/got")"
        continue
    fi
    hosts=$(paste -sd, "$tmp/want")
    want=$(scontrol show hostlist "$hosts" 2>&1 || true)
    got=$("$ddpsim" hostlist --compress "$hosts" 2>&1 || true)
    if [ "$want" != "$got" ]; then
        bad=$((bad + 1))
        printf 'DIFF compress %s\n  scontrol: %s\n  ddpsim:   %s\n' "$hosts" "$want" "$got"
    fi
done <"$tmp/exprs"
echo "hostlist vs scontrol ($version): $i expressions (seed $seed), $bad difference(s)"
[ "$bad" -eq 0 ]
