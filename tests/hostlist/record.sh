#!/bin/sh
# tests/hostlist/record.sh — re-records scontrol-22.05.txt, the expansion
# table tests/test_hostlist.c checks ddpsim against without scontrol: the
# edge cases below, then random expressions of tests/hostlist/gen.awk (seed
# 7) that give at most 60 hosts, 250 rows in all. One row per expression:
#   EXPR <TAB> `scontrol show hostnames EXPR` joined by spaces
#        <TAB> `scontrol show hostlist` of those hosts
# Needs scontrol (a minimal SLURM_CONF is written as in vs-scontrol.sh).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/conf.sh"
out=$here/scontrol-22.05.txt
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddpsim-hostlist.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
hostlist_conf "$tmp"
{
    cat <<'EDGE'
a[1-2]b[3-4]
a[1-2]b[3-4]c[5-6]
a[1-2]b[3-4]c[5-6]d[7-8]
a[1-2]b[3-4]c[5-6]d[7-8]e[0-1]
a[1-2,5]b[3,4-5]c[6-7]
a[1-3]b[01-02]
[1-2][3-4]
[1-2]a[3-4]
a[1-2][3-4][5-6]
x[1-2]y[1]z[3-4]
r[1-2]n[1,3],gpu[09-10]
node[001-004,007]
node[8-10]
node[08-10]
n[1-010]
n[001-4]
host[5-9,1]
1.2.3.[100-102]
alpha, host[5-6], gamma
a b
n[1-2],n[1-2]
a[9-11]b[099-101]
EDGE
    awk -v seed=7 -v n=4000 -f "$here/gen.awk"
} >"$tmp/exprs"
: >"$tmp/table"
rows=0
while IFS= read -r e && [ "$rows" -lt 250 ]; do
    scontrol show hostnames "$e" >"$tmp/hosts"
    [ "$(wc -l <"$tmp/hosts")" -le 60 ] || continue
    printf '%s\t%s\t%s\n' "$e" "$(paste -sd' ' "$tmp/hosts")" \
        "$(scontrol show hostlist "$(paste -sd, "$tmp/hosts")")" >>"$tmp/table"
    rows=$((rows + 1))
done <"$tmp/exprs"
{
    echo "# Recorded by tests/hostlist/record.sh with $(scontrol --version): EXPR, its hosts, their compression."
    cat "$tmp/table"
} >"$out"
echo "wrote $rows rows to $out"
