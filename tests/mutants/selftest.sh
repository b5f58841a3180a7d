#!/bin/sh
# tests/mutants/selftest.sh — the mutation tool's own checks, on catalogues
# written here (seconds: --check and --list only, nothing is built). Run by
# `make test`. The end-to-end test is the plant check (make
# coverage-plant-check). Each case states the exit status and the message.
set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$(pwd -P)
T=$(mktemp -d "${TMPDIR:-/tmp}/ddpsim-mutate-selftest.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
bad=0
n=0
# expect RC TEXT ARGS...: scripts/mutate.sh ARGS exits RC and says TEXT.
expect() {
    _rc=$1 _txt=$2
    shift 2
    n=$((n + 1))
    MUTATE_CATALOGUE=$CAT sh scripts/mutate.sh "$@" >"$T/out" 2>&1
    _got=$?
    if [ "$_got" != "$_rc" ] || ! grep -q -- "$_txt" "$T/out"; then
        echo "mutate selftest: case $n ($CASE): exit $_got, want $_rc with \"$_txt\":"
        sed 's/^/    /' "$T/out"
        bad=$((bad + 1))
    fi
}
# A mutant of core/log.c that applies to the tree as it is: its first line.
mkpatch() {
    sed '1s/$/ (mutated)/' core/log.c >"$T/log.c"
    { printf '# Mutant: %s\n# Models: %s\n' "$2" "a selftest"
      diff -u --label a/core/log.c --label b/core/log.c core/log.c "$T/log.c"; } >"$1"
}
fresh() {
    CAT=$T/cat$n
    rm -rf "$CAT" && mkdir -p "$CAT"
    echo "core/ core" >"$CAT/suites.map"
    mkpatch "$CAT/one.patch" "the first comment line of core/log.c"
}

# t CASE RC TEXT SETUP [ARGS...]: a fresh catalogue, SETUP run on it (sh -c,
# with $CAT and $T set), then scripts/mutate.sh ARGS (default --check).
t() {
    CASE=$1 _r=$2 _x=$3 _setup=$4
    shift 4
    fresh
    CAT=$CAT T=$T sh -c "$_setup" || { echo "mutate selftest: setup of \"$CASE\" failed"; bad=$((bad + 1)); }
    [ $# -gt 0 ] || set -- --check
    expect "$_r" "$_x" "$@"
}
t "a mutant that applies" 0 "all 1 mutant(s) apply" :
t "--list" 0 "one .*core/log.c .*the first comment line" : --list
t "a context line that changed" 2 "one NO LONGER APPLIES to core/log.c" \
    'awk "!f && /^ / { \$0 = \" XX\" substr(\$0, 2); f = 1 } { print }" "$CAT/one.patch" >"$T/p" &&
     mv "$T/p" "$CAT/one.patch"'
t "no Models line" 2 'needs a "# Mutant: what it changes" and a "# Models: which real bug" line' \
    'sed -i "/^# Models:/d" "$CAT/one.patch"'
t "a file without a suites.map line" 2 "changes core/log.c, which has no line in" \
    'echo "plugins/ plugin_verdict" >"$CAT/suites.map"'
t "a declaration of a mutant not in the catalogue" 2 'names "gone", which is not in the catalogue' \
    'echo "gone some reason" >"$CAT/survivors.txt"'
t "a declaration without a reason" 2 '"one" has no reason' 'echo one >"$CAT/equivalent.txt"'
t "declared both equivalent and survivor" 2 "declared both equivalent and a known survivor" \
    'echo "one why" >"$CAT/equivalent.txt" && echo "one which test" >"$CAT/survivors.txt"'
t "a Require line naming no layer" 2 'Require names no layer "nonsense"' \
    'sed -i "1a # Require: gate nonsense" "$CAT/one.patch"'
t "an unknown mutant on the command line" 2 'no mutant "two"' : --check two
t "a Needs line naming nothing the tool knows" 2 'Needs names "gpu", none of: nccl' \
    'sed -i "1a # Needs: gpu" "$CAT/one.patch"'

# The real catalogue: every mutant applies to the tree as it is (a change
# that moves a mutant's lines must refresh its patch; make mutate in CI
# stops at the first that does not apply).
n=$((n + 1))
if ! (cd "$ROOT" && MUTATE_CATALOGUE=tests/mutants sh scripts/mutate.sh --check >/dev/null); then
    echo "mutate selftest: FAIL: a mutant of tests/mutants no longer applies:"
    (cd "$ROOT" && MUTATE_CATALOGUE=tests/mutants sh scripts/mutate.sh --check 2>&1 | sed 's/^/    /')
    bad=$((bad + 1))
fi

if [ $bad -gt 0 ]; then
    echo "mutate selftest: $bad of $n case(s) failed"
    exit 1
fi
echo "mutate selftest: $n cases, 0 failed"
