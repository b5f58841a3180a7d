#!/bin/sh
# tests/real/sweep-test.sh — a sharded sweep on a real SLURM
# (scripts/sweep-slurm.sh, docs/sweeps.md): brings up a single-node cluster
# (tests/slurm/start.sh), runs each sweep once unsharded and once as a
# 4-task job array merged by a dependent job, and stops the cluster again
# on every exit path (trap), failed checks and signals included.
#
#   sh tests/real/sweep-test.sh      (root; sh scripts/deps.sh --real first;
#                                     DDPSIM=path overrides ./ddpsim)
#
# Checks:
#  1. ddpsim run scenarios/*.scn --accelerator all, as 4 array tasks: one
#     array job of 4 tasks, each ran shard K/4 (its result file says so);
#     the merged table equals the unsharded run's (times aside), the JUnit
#     XML too (time attributes aside), the exit status is the same.
#  2. ddpsim explore --ranks 16 --runs 400, as 4 array tasks: the merged
#     violations and summary equal the unsharded run's (times aside), the
#     exit status is the same.
#  3. A shard that cannot write its result (a task killed before the end,
#     here: a results path that is a directory): the merge names the
#     missing shard and the sweep exits 2, with nothing left in the queue.
#  4. Nothing left in the queue.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
test=sweep-test
. "$root/tests/real/lib.sh"
need sbatch "sh scripts/deps.sh --real"
cd "$root" || exit 1
slurm_up

# Times out: "(1.2 s)" at a line's end, "in 1.2 s (3.4 runs/s)", time="...".
untimed() {
    sed -e 's/([0-9.]* s)$/(T)/' -e 's/ in [0-9.]* s ([0-9.]* runs\/s)$/ in T/' \
        -e 's/time="[0-9.]*"/time="T"/g' "$1"
}
# same A B WHAT: A and B equal but for the times.
same() {
    if untimed "$1" >"$1.u" && untimed "$2" >"$2.u" && cmp -s "$1.u" "$2.u"; then
        return 0
    fi
    fail "$3: the merged output differs from the unsharded one"
    diff "$1.u" "$2.u" | head -n 20 | sed 's/^/    | /'
    return 1
}

sweep() { # sweep NAME ARGS...: the 4-shard sweep of `ddpsim ARGS`
    _name=$1
    shift
    SWEEP_POLL=1 timeout -k 5 240 sh "$root/scripts/sweep-slurm.sh" --shards 4 \
        --dir "$work/$_name" --deadline 200 --ddpsim "$ddpsim" -- "$@" \
        >"$work/$_name.out" 2>"$work/$_name.err"
}

# shards_ran DIR: every task K wrote shard K/4's results, in one array job.
shards_ran() {
    _bad=0
    for k in 1 2 3 4; do
        head -n 1 "$1/shard-$k.res" 2>/dev/null | grep -q "\"shard\":\"$k/4\"" || {
            fail "$1: task $k did not write shard $k/4's results"
            [ -f "$1/shard-$k.log" ] && show "$1/shard-$k.log"
            _bad=1
        }
    done
    _ids=$(sed -n 's/^sweep-slurm: array job \([0-9]*\) (4 shards).*/\1/p' "$1.err")
    [ -n "$_ids" ] || {
        fail "$1: no \"array job N (4 shards)\" line from sweep-slurm.sh"
        show "$1.err"
        _bad=1
    }
    return $_bad
}

# 1. The scenario suite x accelerators.
"$ddpsim" run scenarios/*.scn --accelerator all --no-progress --junit "$work/full.xml" \
    >"$work/full.txt" 2>"$work/full.err"
want=$?
t0=$(date +%s)
sweep run run scenarios/*.scn --accelerator all
rc=$?
t=$(($(date +%s) - t0))
if [ $rc -ne $want ]; then
    fail "run sweep: exit $rc, the unsharded run exited $want"
    show "$work/run.err"
elif shards_ran "$work/run" && same "$work/full.txt" "$work/run.out" "run sweep" &&
    same "$work/full.xml" "$work/run/junit.xml" "run sweep (JUnit)"; then
    ok "ddpsim run scenarios/*.scn --accelerator all as a 4-task array ($t s): merged table, JUnit and exit status $rc = the unsharded run's ($(tail -n 1 "$work/full.txt" | sed 's/ (.*//'))"
fi

# 2. explore's seed space.
"$ddpsim" explore --ranks 16 --runs 400 --seed 1 --no-progress >"$work/xfull.txt" 2>&1
want=$?
grep -v '^explore: [0-9]*/[0-9]* runs (' "$work/xfull.txt" >"$work/xfull.sum"
t0=$(date +%s)
sweep explore explore --ranks 16 --runs 400 --seed 1
rc=$?
t=$(($(date +%s) - t0))
if [ $rc -ne $want ]; then
    fail "explore sweep: exit $rc, the unsharded run exited $want"
    show "$work/explore.err"
elif shards_ran "$work/explore" && same "$work/xfull.sum" "$work/explore.out" "explore sweep"; then
    ok "ddpsim explore --ranks 16 --runs 400 as a 4-task array ($t s): merged violations, summary and exit status $rc = the unsharded run's ($(tail -n 1 "$work/xfull.sum" | sed 's/ in .*//'))"
fi

# 3. A shard without results: the merge names it, the sweep exits 2.
mkdir -p "$work/broken/shard-3.res" # task 3 cannot write its result file
sweep broken run scenarios/clean-start.scn scenarios/port-taken.scn --accelerator all
rc=$?
if [ $rc -eq 2 ] && grep -q 'shard-3.res' "$work/broken.err"; then
    ok "a shard that wrote no results: the merge names it ($(grep -o 'cannot read the result file [^ ]*shard-3.res' "$work/broken.err" | head -n 1 | sed 's|/.*/||')), exit 2"
else
    fail "a shard without results: exit $rc (want 2) and shard-3.res named"
    show "$work/broken.err"
fi

# 4. Nothing may be left running in the cluster.
slurm_queue_empty

finish
