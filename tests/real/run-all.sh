#!/bin/sh
# tests/real/run-all.sh — the real-launcher tests, in order: launch-test
# (ddpsim launch, torchrun's contract), srun-test (a real single-node SLURM),
# sweep-test (a sweep as a 4-task SLURM job array, merged = unsharded),
# mpirun-test (OpenMPI), interrupt-test (`ddpsim run --real` stopped by
# SIGINT/SIGTERM leaves no process or namespace behind), store-hostile-test
# (`ddpsim store serve` under hostile clients: RSS within its memory budget
# plus a margin, the normal client's GET p99 printed). One
# "PASS name (S s)" / "FAIL name (S s)" line per test, each test's own lines
# indented under it, then exactly
# "N passed, M failed". Exit 0 when all passed, 1 otherwise.
#
#   sh scripts/deps.sh --real && sh tests/real/run-all.sh     (as root)
#
# Environment: DDPSIM=path (default ./ddpsim, built with make when missing),
# DDPSIM_REAL_TESTS="launch-test mpirun-test" (a subset),
# DDPSIM_REAL_TIMEOUT=seconds per test (default 300).
#
# Clean-up: every test removes what it made (the SLURM test stops its
# daemons from a trap, on failure too). Each runs under `timeout`, with its
# temporary files under one directory of this run; on exit (normal, failure,
# INT/TERM) whatever a killed test left — a SLURM cluster included — is
# stopped and that directory removed.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
tests=${DDPSIM_REAL_TESTS:-launch-test srun-test sweep-test mpirun-test interrupt-test exec-test store-hostile-test}
limit=${DDPSIM_REAL_TIMEOUT:-300}

if [ -z "${DDPSIM:-}" ] && [ ! -x "$root/ddpsim" ]; then
    echo "run-all: ./ddpsim is not built; running make" >&2
    make -j"$(nproc 2>/dev/null || echo 2)" all >&2 || {
        echo "FAIL build"
        echo "0 passed, 1 failed"
        exit 1
    }
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddpsim-real.XXXXXX")
child=
cleanup() {
    if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
        kill -TERM "$child" 2>/dev/null
        wait "$child" 2>/dev/null
    fi
    for d in "$tmp"/ddpsim-*-test.*/slurm; do
        [ -d "$d" ] && sh "$root/tests/slurm/stop.sh" "$d" >/dev/null 2>&1
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
interrupted() {
    cleanup
    trap - EXIT
    [ -n "$current" ] && echo "FAIL $current (interrupted)" && failed=$((failed + 1))
    echo "$passed passed, $failed failed"
    exit 130
}
trap interrupted INT TERM

passed=0
failed=0
current=
for t in $tests; do
    script=$root/tests/real/$t.sh
    t0=$(date +%s)
    if [ ! -f "$script" ]; then
        echo "FAIL $t (no such test: $script)"
        failed=$((failed + 1))
        continue
    fi
    # -k: a test that ignores TERM is killed 60 s later; the 60 s leave its
    # trap the time to stop SLURM.
    current=$t
    TMPDIR=$tmp timeout -k 60 "$limit" sh "$script" >"$tmp/$t.log" 2>&1 &
    child=$!
    wait "$child"
    rc=$?
    child=
    current=
    t1=$(date +%s)
    sed 's/^/    /' "$tmp/$t.log"
    if [ $rc -eq 0 ]; then
        echo "PASS $t ($((t1 - t0)) s)"
        passed=$((passed + 1))
    else
        why="exit $rc"
        [ $rc -eq 124 ] && why="timed out after $limit s"
        echo "FAIL $t ($((t1 - t0)) s, $why)"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
