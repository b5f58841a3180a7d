#!/bin/sh
# coverage/attribute.sh — which scenario makes an accelerator reach a
# parity difference (docs/coverage.md, "Finding the cause").
#
#   sh coverage/attribute.sh [-a] [DIFFS]
#
# Reads the differences the parity tool wrote (DIFFS, default
# $OUT/parity.diffs; only undeclared ones unless -a), runs every scenario
# file once per accelerator in its own GCOV_PREFIX (the instrumented ddpsim
# of the last `make coverage`, $B), and prints for each difference the
# scenarios in which it is reached. A line reached in a scenario that some
# accelerators never run points at the suite (the scenario's `accelerators`
# list), not at an accelerator. Needs `ddpsim run`; takes ~1 min.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$ROOT" || exit 2
: "${B:=build/default-cov}"
: "${OUT:=build/coverage}"
: "${SCENARIOS:=scenarios/*.scn}"
ALL=0
if [ "${1:-}" = -a ]; then ALL=1; shift; fi
DIFFS=${1:-$OUT/parity.diffs}
DDPSIM="$ROOT/$B/ddpsim"

[ -f "$DIFFS" ] || { echo "attribute: no $DIFFS: run make coverage first" >&2; exit 2; }
"$DDPSIM" run --help >/dev/null 2>&1 || { echo "attribute: $DDPSIM has no 'run'" >&2; exit 2; }
ACCELS=${ACCELS:-$("$DDPSIM" list accelerators 2>/dev/null | tr '\n' ' ')}
[ -n "$ACCELS" ] || ACCELS="ddp ddp_spawn ddp_cpu ddp2 ddp_hpc ddp_cpu_hpc"

want=$(awk -F'\t' -v all=$ALL '!/^#/ && (all || $7 == "undeclared") { print $1 }' "$DIFFS" | sort -u)
[ -n "$want" ] || { echo "attribute: no differences to attribute"; exit 0; }

GCDA=$(strings -a "$B/plugins/ddp_plugin.o" | grep '/plugins/ddp_plugin\.gcda$' | head -n 1)
OBJROOT=${GCDA%/"$B"/plugins/ddp_plugin.gcda}
STRIP=$(printf '%s\n' "$OBJROOT" | tr -cd / | wc -c)

case $OUT in /*) ;; *) OUT=$ROOT/$OUT ;; esac
W="$OUT/attr"
rm -rf "$W" && mkdir -p "$W" || exit 2
: >"$W/hits"
for a in $ACCELS; do
    for f in $SCENARIOS; do
        s=$(basename "$f" .scn)
        d="$W/$a/$s"
        mkdir -p "$d"
        GCOV_PREFIX=$d GCOV_PREFIX_STRIP=$STRIP "$DDPSIM" run "$f" --accelerator "$a" \
            >"$d.log" 2>&1
        grep -q '^0 run' "$d.log" && continue # the scenario does not list $a
        for src in $want; do
            obj="$B/${src%.c}"
            [ -f "$d/$obj.gcda" ] || continue
            cp "$obj.gcno" "$d/$obj.gcno"
            # Lines "COUNT: LINE: text", then "branch N taken C" per branch;
            # N counts calls too, lcov numbers the branches alone: count them.
            gcov -t -b -c -o "$d/$(dirname "$obj")" "$src" 2>/dev/null |
                awk -v a="$a" -v s="$s" -v src="$src" '
                    /^ *-: *0:Source:/ { cur = $0; sub(/.*Source:/, "", cur); next }
                    cur != src { next }
                    /^branch / { if ($4 + 0 > 0) print src, l, "b" nb, a, s; nb++; next }
                    /^[ ]*[-#=0-9*]+:[ ]*[0-9]+:/ {
                        split($0, f, ":"); c = f[1]; gsub(/[ *]/, "", c)
                        l = f[2]; gsub(/ /, "", l); nb = 0
                        if (c ~ /^[0-9]+$/ && c > 0) print src, l, "l", a, s }' \
                >>"$W/hits"
        done
    done
done

awk -F'\t' -v all=$ALL '!/^#/ && (all || $7 == "undeclared") {
        k = $3 == "line" ? "l" : "b" substr($8, index($8, ",") + 1)
        print $1, $2, k, $4, $5, $6 }' "$DIFFS" |
    sort -u -k1,1 -k2,2n -k3,3 |
    awk -v hits="$W/hits" '
        BEGIN { while ((getline h < hits) > 0) { split(h, x, " ")
                    t = x[1] ":" x[2] ":" x[3] SUBSEP x[4]
                    if (!(t SUBSEP x[5] in seen)) { seen[t SUBSEP x[5]] = 1
                        sc[t] = sc[t] (sc[t] ? " " : "") x[5] } } }
        { k = $1 ":" $2 ":" $3
          what = $3 == "l" ? "line" : "branch " substr($3, 2)
          printf "%s:%s %s in %s: reached by %s, never by %s\n", $1, $2, what, $4, $5, $6
          n = split($5, acc, ",")
          for (i = 1; i <= n; i++)
              printf "    %-12s in: %s\n", acc[i], (k SUBSEP acc[i]) in sc ? sc[k SUBSEP acc[i]] : "(no single scenario: only the whole suite)" }'
