#!/bin/sh
# tests/kinds-doc-check.sh — the manual's fault kinds are the kinds table's
# (DDP_FAULT_KINDS in include/ddp/faults.h, as `ddpsim list faults` prints
# it: KIND EXECUTORS per line). Run by `make check-docs`.
#
# 1. docs/scenario-format.md's kind table (the rows after "Kinds (`ddpsim
#    list faults`"): the same kinds in the same order, each with the same
#    executors column.
# 2. Every "expected a fault kind (...)" in README.md and docs/*.md lists
#    the table's kinds, in its order.
#
#   sh tests/kinds-doc-check.sh             check
#   sh tests/kinds-doc-check.sh --selftest  a kind dropped from a copy of the
#                                           page, and from a copy of an
#                                           example, must be caught
# Exit status: 0 the docs hold, 1 they do not (each difference named).
set -eu
cd "$(dirname "$0")/.."
DDPSIM=${DDPSIM:-./ddpsim}
PAGE=docs/scenario-format.md

# The table's rows as "KIND|EXECUTORS", one a line.
table() {
    "$DDPSIM" list faults | sed 's/^\([a-z]*\)  *\(.*\)$/\1|\2/'
}

# The page's kind table as "KIND|EXECUTORS" (first and last column).
page_rows() {
    awk '/^Kinds \(`ddpsim list faults`/ { on = 1; next }
         on && /^\| `/ { n = split($0, c, "|"); k = c[2]; e = c[n - 1]
                         gsub(/[` ]/, "", k); gsub(/^ +| +$/, "", e)
                         print k "|" e; seen = 1; next }
         on && seen && !/^\|/ { exit }' "$1"
}

# FILE...: every "expected a fault kind (LIST)" whose LIST is not want.
lists() {
    want=$1
    shift
    grep -n -o 'expected a fault kind ([^)]*)' "$@" /dev/null |
        while IFS= read -r hit; do
            got=${hit#*expected a fault kind (}
            got=${got%)}
            [ "$got" = "$want" ] ||
                echo "${hit%%:expected*}: lists \"$got\"; the kinds table (ddpsim list faults) has \"$want\""
        done
}

# PAGE FILE...: prints every difference.
check() {
    page=$1
    shift
    want=$(table)
    [ -n "$want" ] || { echo "kinds-doc-check: \`$DDPSIM list faults\` printed nothing"; return; }
    got=$(page_rows "$page")
    [ "$got" = "$want" ] || {
        echo "$page: the kind table (KIND|EXECUTORS) differs from \`ddpsim list faults\`:"
        printf '%s\n' "$want" >"$tmp/want"
        printf '%s\n' "$got" >"$tmp/got"
        diff "$tmp/want" "$tmp/got" | sed -n 's/^[<>]/  &/p'
        echo "  (< the kinds table, > the page: fix the page)"
    }
    lists "$(table | cut -d'|' -f1 | paste -sd, - | sed 's/,/, /g')" "$page" "$@"
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddpsim-kinds-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

if [ "${1:-}" = "--selftest" ]; then
    caught() { # SED PATTERN WHAT: a copy of the page edited by SED must be reported as PATTERN
        sed "$1" "$PAGE" >"$tmp/page.md"
        out=$(check "$tmp/page.md")
        case $out in $2) ;; *)
            echo "kinds-doc-check: selftest: FAIL: $3 was reported as: ${out:-nothing}" >&2
            exit 1 ;;
        esac
    }
    caught '/^| `late` |/d' '*kind table*< late[|]*' "a row dropped"
    caught 's/point, bandwidth, late, stall)/point, bandwidth)/' \
        '*lists "refuse*bandwidth"; the kinds table*' "a short kind list"
    echo "kinds-doc-check: selftest: ok (a dropped row and a short kind list are caught)"
    exit 0
fi

out=$(check "$PAGE" README.md $(ls docs/*.md | grep -vx "$PAGE"))
[ -z "$out" ] || { printf '%s\n' "$out" >&2; echo "kinds-doc-check: FAIL" >&2; exit 1; }
echo "kinds-doc-check: ok ($(table | wc -l | tr -d ' ') kinds: $PAGE's table and every kind list)"
