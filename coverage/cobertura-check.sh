#!/bin/sh
# coverage/cobertura-check.sh XML INFO — XML (coverage/cobertura.c) is valid
# against coverage/cobertura-04.dtd and states the line and branch counts
# `lcov --summary INFO` states. Exit 0, or 1 with what differs.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
xml=$1 info=$2
xmllint --nonet --noout --dtdvalid "$ROOT/coverage/cobertura-04.dtd" "$xml" ||
    { echo "cobertura-check: $xml is not valid against coverage/cobertura-04.dtd"; exit 1; }
# lcov: "lines......: 48.8% (9072 of 18594 lines)"
sum=$(lcov --summary "$info" --rc lcov_branch_coverage=1 2>&1 |
    sed -n 's/^ *\(lines\|branches\)\.*: .*(\([0-9]*\) of \([0-9]*\) .*/\1 \2 \3/p')
got=$(sed -n 's/^<coverage .*lines-covered="\([0-9]*\)" lines-valid="\([0-9]*\)" branches-covered="\([0-9]*\)" branches-valid="\([0-9]*\)".*/lines \1 \2 branches \3 \4/p' "$xml")
want=$(printf '%s\n' "$sum" | tr '\n' ' ' | sed 's/ $//')
[ -z "$(printf '%s' "$sum" | grep branches)" ] && want="$want branches 0 0"
if [ "$got" != "$want" ]; then
    echo "cobertura-check: $xml counts \"$got\", lcov --summary $info \"$want\""
    exit 1
fi
echo "cobertura-check: ok: $xml valid, $got (as lcov --summary)"
