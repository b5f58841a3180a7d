#!/bin/sh
# tests/mutants/selftest.sh — the mutation tool's own checks, on catalogues
# written here (seconds: --check and --list only, nothing is built). Run by
# `make test`. The end-to-end test is the plant check (make
# coverage-plant-check). Each case states the exit status and the message.
set -u
cd "$(dirname "$0")/../.." || exit 2
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

CASE="a mutant that applies"; fresh
expect 0 "all 1 mutant(s) apply" --check
CASE="--list"; fresh
expect 0 "one .*core/log.c .*the first comment line" --list
CASE="a context line that changed"; fresh
awk '!f && /^ / { $0 = " XX" substr($0, 2); f = 1 } { print }' "$CAT/one.patch" >"$T/p" &&
    mv "$T/p" "$CAT/one.patch"
expect 2 "one NO LONGER APPLIES to core/log.c" --check
CASE="no Models line"; fresh
sed -i '/^# Models:/d' "$CAT/one.patch"
expect 2 'needs a "# Mutant: what it changes" and a "# Models: which real bug" line' --check
CASE="a file without a suites.map line"; fresh
echo "plugins/ plugin_verdict" >"$CAT/suites.map"
expect 2 "changes core/log.c, which has no line in" --check
CASE="a declaration of a mutant not in the catalogue"; fresh
echo "gone some reason" >"$CAT/survivors.txt"
expect 2 'names "gone", which is not in the catalogue' --check
CASE="a declaration without a reason"; fresh
echo "one" >"$CAT/equivalent.txt"
expect 2 '"one" has no reason' --check
CASE="declared both equivalent and survivor"; fresh
echo "one why" >"$CAT/equivalent.txt"
echo "one which test" >"$CAT/survivors.txt"
expect 2 "declared both equivalent and a known survivor" --check
CASE="a Require line naming no layer"; fresh
sed -i '1a # Require: gate nonsense' "$CAT/one.patch"
expect 2 'Require names no layer "nonsense"' --check
CASE="an unknown mutant on the command line"; fresh
expect 2 'no mutant "two"' --check two

if [ $bad -gt 0 ]; then
    echo "mutate selftest: $bad of $n case(s) failed"
    exit 1
fi
echo "mutate selftest: $n cases, 0 failed"
