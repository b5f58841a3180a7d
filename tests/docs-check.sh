#!/bin/sh
# tests/docs-check.sh — every count the manual states about the tree is
# the tree's (run by `make test`; docs/testing.md).
#
# A count in docs/*.md or README.md carries the command that yields it, in
# an HTML comment right after the number (invisible once rendered):
#
#     the 55<!-- count: ls scenarios/*.scn | wc -l --> bundled scenarios
#
# The check runs each command from the top of the tree (sh -c) and fails
# when its output is not the stated number (commas ignored). It also fails
# on a count stated without a command, outside code blocks: a number
# followed (after at most one word: "94 bundled scenarios") by scenarios,
# scenario files, tests, test cases, suites, mutants, functions, API
# functions or fault points. Pages a command
# writes (docs/fault-points.md, docs/fidelity.md) are generated, not
# checked here. A command holds no '>' (no redirection); it may use
# $DDPSIM_TEST, the CUnit binary (default build/default/ddpsim-test),
# $DDPSIM, the command (default ./ddpsim), and $DDPSIM_LIB, the shared
# library (default build/default/libddpsim.so.0.1.0).
#
#   sh tests/docs-check.sh             check README.md and docs/*.md
#   sh tests/docs-check.sh FILE...     check these files (commands still
#                                      run at the top of the tree)
#   sh tests/docs-check.sh --selftest  plant a wrong count and an unmarked
#                                      one in copies: both must be caught
# Exit status: 0 every count holds, 1 one does not (each is named).
set -eu
cd "$(dirname "$0")/.."

GENERATED="docs/fault-points.md docs/fidelity.md"
DDPSIM_TEST=${DDPSIM_TEST:-build/default/ddpsim-test}
DDPSIM=${DDPSIM:-./ddpsim}
DDPSIM_LIB=${DDPSIM_LIB:-build/default/libddpsim.so.0.1.0}
export DDPSIM_TEST DDPSIM DDPSIM_LIB
WORDS='scenarios|scenario files|tests|test cases|suites|mutants|functions|API functions|fault points'

# FILE LABEL: print "LABEL:LINE: why" for every wrong or unmarked count.
check_file() {
    f=$1 label=$2
    # Stated counts with their commands, one "LINE<TAB>NUMBER<TAB>CMD" each.
    grep -n -o '[0-9][0-9,]* \{0,1\}<!-- count: [^>]*-->' "$f" |
        sed 's/^\([0-9]*\):\([0-9,]*\) \{0,1\}<!-- count: \(.*\) -->$/\1	\2	\3/' |
        while IFS='	' read -r line num cmd; do
            want=$(printf '%s' "$num" | tr -d ,)
            got=$(sh -c "$cmd" 2>&1 | tr -d ' \n') || true
            [ "$got" = "$want" ] ||
                echo "$label:$line: states $num, but \`$cmd\` gives ${got:-nothing}"
        done
    # Counts without a command (fenced code blocks are output, skipped).
    awk -v label="$label" -v words="$WORDS" '
        /^[ \t]*```/ { code = !code; next }
        code { next }
        {
            s = $0
            re = "(^|[^0-9A-Za-z.#/=_-])[0-9][0-9,]* ([a-z-]+ )?(" words ")([^A-Za-z]|$)"
            if (match(s, re))
                printf "%s:%d: a count with no <!-- count: COMMAND -->: %s\n",
                       label, NR, substr(s, RSTART, RLENGTH)
        }' "$f"
}

run_check() { # FILE...: prints problems on stderr; status 1 when any
    bad=0
    for f in "$@"; do
        case " $GENERATED " in *" $f "*) continue ;; esac
        out=$(check_file "$f" "$f")
        [ -z "$out" ] || { printf '%s\n' "$out" >&2; bad=1; }
    done
    return $bad
}

if [ "${1:-}" = "--selftest" ]; then
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddpsim-docs-check.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT INT TERM
    # 1. A stated count made wrong by one must be caught, with its line.
    f=$(grep -l '<!-- count: ' README.md docs/*.md | head -n 1)
    [ -n "$f" ] || { echo "docs-check: selftest: no stated count to plant in" >&2; exit 1; }
    line=$(grep -n '[0-9] \{0,1\}<!-- count: ' "$f" | head -n 1 | cut -d: -f1)
    awk -v n="$line" 'NR == n && !done {
            if (match($0, /[0-9][0-9,]* ?<!-- count: /)) {
                num = substr($0, RSTART, RLENGTH); sub(/ ?<!--.*/, "", num)
                gsub(/,/, "", num)
                $0 = substr($0, 1, RSTART - 1) (num + 1) substr($0, RSTART + length(num))
                done = 1
            }
        } { print }' "$f" >"$tmp/wrong.md"
    if out=$(check_file "$tmp/wrong.md" "$f" 2>&1) && [ -z "$out" ]; then
        echo "docs-check: selftest: FAIL: a wrong count in a copy of $f:$line was not caught" >&2
        exit 1
    fi
    case $out in *"$f:$line: states"*) ;; *)
        echo "docs-check: selftest: FAIL: the wrong count was reported as: $out" >&2; exit 1 ;;
    esac
    # 2. A count without a command must be caught; in a code block it is not one.
    printf 'Intro.\n\nThere are 7 scenarios here.\n\n```\n9 tests\n```\n' >"$tmp/bare.md"
    out=$(check_file "$tmp/bare.md" bare.md 2>&1)
    [ "$out" = "bare.md:3: a count with no <!-- count: COMMAND -->:  7 scenarios " ] || {
        echo "docs-check: selftest: FAIL: an unmarked count gave: ${out:-nothing}" >&2; exit 1; }
    echo "docs-check: selftest: ok (a wrong count and an unmarked one are caught)"
    exit 0
fi

if [ $# -eq 0 ]; then
    set -- README.md docs/*.md
fi
n=$(cat "$@" | grep -o '<!-- count: ' | wc -l | tr -d ' ')
run_check "$@" || { echo "docs-check: FAIL: fix the number, or the command beside it" >&2; exit 1; }
echo "docs-check: ok ($n stated counts hold)"
