#!/bin/sh
# coverage/plant-check.sh — the parity gate's own test
# (`make coverage-plant-check`; docs/coverage.md, "The plant check").
#
# Builds an instrumented variant in $B with -DDDP_PLANT_SKIP_BARRIER="$PLANT"
# (plugins/ddp_plugin.c then skips the store barrier for that accelerator:
# an accelerator bypassing a step of the shared plugin), runs the whole
# coverage pipeline on it (no HTML) and succeeds only if the gate FAILS,
# naming lines of plugins/ddp_plugin.c that call the barrier, reached by
# every other accelerator and never by $PLANT. If parity.allow grows an
# entry broad enough to hide this, this check fails: that is its point.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$ROOT" || exit 2
: "${PLANT:=ddp_spawn}"
: "${B:=build/plant-cov}"
: "${OUT:=build/coverage-plant}"
export PLANT B OUT
# No HTML and no second matrix: only the gate matters here.
NO_HTML=1
PAIR_SIM=
PAIR_REAL=
export NO_HTML PAIR_SIM PAIR_REAL

grep -q 'DDP_PLANT_SKIP_BARRIER' plugins/ddp_plugin.c || {
    echo "plant-check: plugins/ddp_plugin.c has no DDP_PLANT_SKIP_BARRIER hook" >&2
    exit 2
}
mkdir -p "$OUT"
echo "plant-check: $PLANT skips the plugin's barrier; the parity gate must fail"
sh coverage/run.sh >"$OUT/plant-run.txt" 2>&1
rc=$?
if [ $rc -ne 1 ]; then
    cat "$OUT/plant-run.txt"
    if [ $rc -eq 0 ]; then
        echo "plant-check: FAIL: the parity gate passed although $PLANT skips the barrier" >&2
    else
        echo "plant-check: FAIL: the pipeline itself failed (exit $rc), see above" >&2
    fi
    exit 1
fi

# The undeclared differences naming the barrier, missed by $PLANT alone.
others=$(awk -F'\t' -v p="$PLANT" '!/^#/ && $1 == "plugins/ddp_plugin.c" &&
         $7 == "undeclared" && $6 == p { print $2 }' "$OUT/parity.diffs" | sort -un)
found=""
for l in $others; do
    src=$(sed -n "${l}p" plugins/ddp_plugin.c)
    case $src in
    *barrier* | *BARRIER*) found="$found $l" ;;
    esac
done
if [ -z "$found" ]; then
    cat "$OUT/plant-run.txt"
    echo "plant-check: FAIL: the gate failed, but not on barrier lines of" >&2
    echo "plugins/ddp_plugin.c missed by $PLANT alone (lines missed by it:${others:- none})" >&2
    exit 1
fi
sed -n '/^== undeclared differences/,/^$/p' "$OUT/parity.txt"
echo "plant-check: ok: the gate caught it; barrier lines of plugins/ddp_plugin.c" \
     "never reached by $PLANT:$found"

# The scenario suite must catch the same regression: crash-before-barrier
# expects rank 1 to die entering the barrier, which $PLANT never enters.
"$B/ddpsim" run scenarios/*.scn --accelerator "$PLANT" --no-progress \
    >"$OUT/plant-scenarios.txt" 2>&1
src=$?
if [ $src -ne 1 ] || ! grep -q '^crash-before-barrier .*FAIL' "$OUT/plant-scenarios.txt"; then
    cat "$OUT/plant-scenarios.txt"
    echo "plant-check: FAIL: the scenario suite did not catch $PLANT skipping the" \
         "barrier (exit $src; crash-before-barrier should FAIL)" >&2
    exit 1
fi
grep ' FAIL ' "$OUT/plant-scenarios.txt"
echo "plant-check: ok: the scenario suite caught it too (exit 1)"
exit 0
