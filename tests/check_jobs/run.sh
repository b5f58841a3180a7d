#!/bin/sh
# tests/check_jobs/run.sh — `ddpsim check --exec` on a real torch 1.13 job
# (tests/check_jobs/job.py) with one planted bug at a time: each must be a
# finding whose replay reproduces it, and the correct job none (docs/check.md
# § 4). Part of `make torch-test`; without torch, one line and exit 0.
#
#   DDPSIM=./ddpsim sh tests/check_jobs/run.sh [BUG...]
#
# Each check is bounded (--runs): the planted bugs show within the first
# runs (a baseline, a late start, the first crash); the correct job runs
# the same number and must show nothing. Ports 31710.. (one per check).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
DDPSIM=${DDPSIM:-$top/ddpsim}
if ! "$top/scripts/torch-python" -c 'import torch' >/dev/null 2>&1; then
    echo "check-jobs: skipped: no Python here imports torch (sh scripts/deps.sh --torch)"
    exit 0
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/ddpsim-check-jobs.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
fails=0 port=31710
# BUG RUNS WANT: WANT is the oracle that must be among the findings ("none":
# no finding at all)
check() {
    bug=$1 runs=$2 want=$3
    port=$((port + 1))
    log="$out/$bug.log"
    # RUNS 0: the baselines only (--list)
    if [ "$runs" = 0 ]; then set -- --list; else set -- --runs "$runs"; fi
    "$DDPSIM" check --exec "CHECK_JOB_BUG=$bug $top/scripts/torch-python $here/job.py" \
        "$@" --port "$port" --out "$out/$bug" --no-progress >"$log" 2>&1
    st=$?
    if [ "$want" = none ]; then
        ok=$([ $st -eq 0 ] && echo 1 || echo 0)
    else
        ok=$([ $st -eq 1 ] && grep -q "^FINDING [0-9]* \[$want\]" "$log" &&
             ! grep -q "DOES NOT reproduce" "$log" && echo 1 || echo 0)
    fi
    if [ "$ok" = 1 ]; then
        echo "check-jobs: ok: ${bug:-correct}: $(tail -1 "$log")"
    else
        echo "check-jobs: FAIL: ${bug:-correct} (want $want, exit $st):"
        sed 's/^/    /' "$log"
        fails=$((fails + 1))
    fi
}
for b in ${*:-localrank shorttimeout notimeout correct}; do
    case $b in
    localrank) check localrank 0 baseline ;;
    shorttimeout) check shorttimeout 2 transient ;;
    notimeout) check notimeout 3 invariant ;;
    correct) check "" 3 none ;;
    *) echo "check-jobs: unknown bug $b" >&2; exit 2 ;;
    esac
done
echo "check-jobs: $fails failed"
[ $fails -eq 0 ]
