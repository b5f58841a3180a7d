#!/bin/sh
# coverage/plant-check.sh — the parity gate's own test
# (`make coverage-plant-check`; docs/coverage.md, "The plant check").
#
#   sh coverage/plant-check.sh            the check
#   sh coverage/plant-check.sh --verify   (MUTANT_LOGS set) the details only
#
# The plant is one mutant of the mutation catalogue,
# tests/mutants/plant-spawn-skips-barrier.patch: it defines
# DDP_PLANT_SKIP_BARRIER "ddp_spawn" in plugins/ddp_plugin.c, whose hook then
# skips the store barrier for ddp_spawn (an accelerator bypassing a step of
# the shared plugin). Its header requires the scenario run (`make run`) and
# the parity gate to kill it, and names this script's --verify as the check
# of the details, so `make mutate` runs all of it; this script runs the
# mutation check on that one mutant, every layer, in build/coverage-plant/.
#
# --verify succeeds only if
#  - the gate failed on undeclared lines of plugins/ddp_plugin.c whose
#    source mentions the barrier, reached by every other accelerator and
#    never by ddp_spawn (the gate caught the bypass, not something else);
#  - the scenario run failed crash-before-barrier for ddp_spawn (it expects
#    rank 1 to die entering the barrier, which ddp_spawn never enters).
# If parity.allow grows an entry broad enough to hide the bypass, this
# check fails: that is its point.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$ROOT" || exit 2
NAME=plant-spawn-skips-barrier
PLANT=ddp_spawn
fail() { echo "plant-check: FAIL: $*" >&2; exit 1; }

if [ "${1:-}" != --verify ]; then
    [ $# -eq 0 ] || { echo "usage: sh coverage/plant-check.sh [--verify]" >&2; exit 2; }
    echo "plant-check: $PLANT skips the plugin's barrier ($NAME); the gate must fail"
    MUTATE_OUT=build/coverage-plant sh scripts/mutate.sh -j1 --all-layers "$NAME"
    rc=$?
    [ $rc = 0 ] || fail "the mutation check of $NAME exited $rc (above)"
    cat build/coverage-plant/logs/$NAME/verify.log
    exit 0
fi

L=${MUTANT_LOGS:?--verify needs MUTANT_LOGS, the log directory of the mutant}
src=$L/src/plugins/ddp_plugin.c
diffs=$L/gate-parity.diffs
[ -f "$src" ] || fail "no mutated plugins/ddp_plugin.c in $L/src"
[ -f "$diffs" ] || fail "no parity differences in $L: did the gate run?"
grep -q "DDP_PLANT_SKIP_BARRIER" "$src" ||
    fail "plugins/ddp_plugin.c has no DDP_PLANT_SKIP_BARRIER hook any more"
# The undeclared differences naming the barrier, missed by $PLANT alone
# (line numbers of the mutated file, which the gate measured).
others=$(awk -F'\t' -v p="$PLANT" '!/^#/ && $1 == "plugins/ddp_plugin.c" &&
         $7 == "undeclared" && $6 == p { print $2 }' "$diffs" | sort -un)
found=""
for l in $others; do
    case $(sed -n "${l}p" "$src") in
    *barrier* | *BARRIER*) found="$found $l" ;;
    esac
done
[ -n "$found" ] || fail "the gate did not fail on barrier lines of plugins/ddp_plugin.c" \
    "missed by $PLANT alone (lines missed by it:${others:- none}; $diffs)"
echo "plant-check: ok: the gate caught it; barrier lines of plugins/ddp_plugin.c" \
     "never reached by $PLANT:$found"
grep -Eq "^crash-before-barrier +$PLANT .* FAIL" "$L/run.log" ||
    fail "the scenario run did not fail crash-before-barrier for $PLANT ($L/run.log)"
grep -E "^[a-z0-9-]+ +$PLANT .* FAIL" "$L/run.log"
echo "plant-check: ok: the scenario suite caught it too"
