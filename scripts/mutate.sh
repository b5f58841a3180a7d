#!/bin/sh
# scripts/mutate.sh — the mutation check (`make mutate`; docs/testing.md).
#
#   sh scripts/mutate.sh [-j N] [--rotate N [--slice K]] [--all-layers]
#                        [--keep] [--check | --list] [MUTANT ...]
#
# Every mutant of the catalogue (tests/mutants/NAME.patch: a one- to
# few-line change modelled on a real connection-setup bug, with a "# Mutant:"
# and a "# Models:" line above the diff) is applied to a scratch copy of the
# tree, never to the working tree, and the layers below run on it, cheapest
# first, until one fails: the mutant is then KILLED by that layer.
#
#   unit   the CUnit suites of the mutated file (tests/mutants/suites.map)
#   test   the rest of `make test`: the other suites, tests/example-test.sh
#   run    `make run`: every bundled scenario x every accelerator
#   gate   `make coverage`'s parity gate (coverage/run.sh, no HTML)
#
# Every layer runs under a wall-clock bound (a hang is a kill, reported as
# timeout:LAYER, after a second try confirmed it): 5 x the layer's time on
# the unmutated tree (unit: its suites' time), at least MUTATE_MIN_BOUND
# seconds (60). The unmutated tree must pass every layer
# first, or nothing could be told apart. A mutant that passes every layer
# SURVIVED. Output: one line per mutant as it finishes, then the table
# (mutant | layer that killed it | seconds | first failure) and the score
# "N killed, M survived".
#
# Declarations (tests/mutants/, one "NAME reason" per line, '#' comments):
#   equivalent.txt  mutants that change no behaviour; not counted, and an
#                   error if one gets killed (the reason was wrong)
#   survivors.txt   known survivors: no test kills them yet; each line says
#                   which test would. Counted as survived, but tolerated.
# A header line "# Require: LAYER ..." makes those layers run even after an
# earlier kill, and each of them must kill the mutant too; "# Verify: CMD"
# runs CMD (sh -c, in the repository, MUTANT_LOGS set to the mutant's log
# directory) after the layers, and it must succeed. The plant check
# (coverage/plant-check.sh) is the catalogue entry that uses both.
# "# Needs: nccl" marks a mutant of code only some builds can test (the
# nccl backend, built where the CUDA toolkit's nccl.h is): elsewhere it is
# skipped, listed in the table and left out of the score.
#
# Exit status: 0 every survivor is declared; 1 an undeclared survivor, a
# declaration that no longer holds (a declared survivor or equivalent was
# killed), or a required layer that did not kill (or a Verify that
# failed); 2 the tool could not do
# its job (a mutant that no longer applies or builds, the unmutated tree
# failing a layer, bad usage).
#
# Options:
#   -j N          N mutants at once, each in its own scratch copy (default:
#                 MUTATE_JOBS, else the number of CPUs)
#   --rotate N    run one slice of N (plus every mutant with a Require line):
#                 mutant i runs when i % N == K; K is --slice, else the
#                 commit hash (HEAD) mod N, so successive commits rotate
#   --all-layers  run every layer, also after a kill (each layer's verdict
#                 is logged)
#   --keep        keep the scratch copies (build/mutate/w*) afterwards
#   --check       only check that every mutant still applies (seconds)
#   --list        print the catalogue: name, file(s), what it changes
# Environment: MUTATE_OUT (build/mutate: logs in $MUTATE_OUT/logs/NAME/),
# MUTATE_MIN_BOUND, MUTATE_BOUND_FACTOR (5), MAKE, MUTATE_CATALOGUE (tests/mutants),
# MUTATE_FAKE_NCCL (set by `make mutate`: the fake libnccl pair, empty when
# the nccl backend is not built).
set -u
# The scratch builds are make runs of their own, not part of a caller's.
unset MAKEFLAGS MFLAGS MAKELEVEL
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$ROOT" || exit 2
. scripts/progress.sh
CAT=${MUTATE_CATALOGUE:-tests/mutants}
OUT=${MUTATE_OUT:-build/mutate}
case $OUT in /*) ;; *) OUT=$ROOT/$OUT ;; esac
: "${MAKE:=make}"
: "${MUTATE_MIN_BOUND:=60}"
: "${MUTATE_BOUND_FACTOR:=5}"
LAYERS="unit test run gate"
# What a mutant's "# Needs:" line may name (see need_missing below).
NEEDS="nccl"
JOBS=${MUTATE_JOBS:-$(nproc 2>/dev/null || echo 1)}
ROTATE=0
SLICE=
ALL_LAYERS=0
KEEP=0
MODE=run
NAMES=

say() { printf '%s\n' "mutate: $*"; }
die() { printf '%s\n' "mutate: $*" >&2; exit 2; }
usage() {
    sed -n '4,5p' "$0" | sed 's/^# *//' >&2
    exit 2
}
is_num() { case $1 in '' | *[!0-9]*) return 1 ;; esac; }
ms() { date +%s%3N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1000 }'; }

while [ $# -gt 0 ]; do
    case $1 in
    -j) [ $# -ge 2 ] && is_num "$2" && [ "$2" -ge 1 ] || usage; JOBS=$2; shift 2 ;;
    -j*) JOBS=${1#-j}; is_num "$JOBS" && [ "$JOBS" -ge 1 ] || usage; shift ;;
    --rotate) [ $# -ge 2 ] && is_num "$2" && [ "$2" -ge 1 ] || usage; ROTATE=$2; shift 2 ;;
    --slice) [ $# -ge 2 ] && is_num "$2" || usage; SLICE=$2; shift 2 ;;
    --all-layers) ALL_LAYERS=1; shift ;;
    --keep) KEEP=1; shift ;;
    --check) MODE=check; shift ;;
    --list) MODE=list; shift ;;
    -h | --help) sed -n '2,62p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) say "unknown option $1"; usage ;;
    *) _n=${1##*/}; NAMES="$NAMES ${_n%.patch}"; shift ;;
    esac
done
is_num "$JOBS" && [ "$JOBS" -ge 1 ] || die "-j wants a count >= 1 (got $JOBS)"

# ---- the catalogue -----------------------------------------------------------
[ -d "$CAT" ] || die "no catalogue directory $CAT"
[ -f "$CAT/suites.map" ] || die "no $CAT/suites.map (which suites exercise which file)"
ALLM=$(for f in "$CAT"/*.patch; do [ -f "$f" ] && basename "$f" .patch; done | sort)
[ -n "$ALLM" ] || die "no mutants in $CAT (NAME.patch)"

# header FIELD NAME: the value of "# FIELD: value" above NAME's diff.
header() {
    sed -n "/^--- /q; s/^# $1: *//p" "$CAT/$2.patch" | head -n 1
}
# files NAME: the files NAME's diff changes.
files() {
    sed -n 's/^+++ b\/\([^	 ]*\).*/\1/p' "$CAT/$1.patch" | sort -u
}
# declared FILE NAME: NAME's reason in FILE, or nothing.
declared() {
    [ -f "$CAT/$1" ] && awk -v n="$2" '$1 == n { $1 = ""; sub(/^ /, ""); print; exit }' "$CAT/$1"
}
# suites FILE: the CUnit suites tests/mutants/suites.map gives the file
# (longest matching path prefix); fails when no line matches.
suites_of() {
    awk -v f="$1" '!/^#/ && NF >= 1 {
        p = $1
        if ((p == f || (substr(p, length(p)) == "/" && index(f, p) == 1)) &&
            length(p) > best) {
            best = length(p); s = ""
            for (i = 2; i <= NF; i++) s = s " " $i
        }
    } END { if (!best) exit 1; print s }' "$CAT/suites.map"
}

# Every declaration names a mutant of the catalogue.
for d in equivalent.txt survivors.txt; do
    [ -f "$CAT/$d" ] || continue
    for n in $(awk '!/^#/ && NF { print $1 }' "$CAT/$d"); do
        echo "$ALLM" | grep -qx "$n" ||
            die "$CAT/$d names \"$n\", which is not in the catalogue: remove the line"
        [ -n "$(declared "$d" "$n")" ] || die "$CAT/$d: \"$n\" has no reason"
    done
done
for n in $(awk '!/^#/ && NF { print $1 }' "$CAT/equivalent.txt" 2>/dev/null); do
    [ -n "$(declared survivors.txt "$n")" ] &&
        die "\"$n\" is declared both equivalent and a known survivor: pick one"
done

SEL=
if [ -n "$NAMES" ]; then
    for n in $NAMES; do
        echo "$ALLM" | grep -qx "$n" || die "no mutant \"$n\" in $CAT"
        SEL="$SEL $n"
    done
else
    SEL=$ALLM
fi
if [ "$ROTATE" -gt 1 ]; then
    if [ -z "$SLICE" ]; then
        h=$(git -C "$ROOT" rev-parse --short=7 HEAD 2>/dev/null) ||
            die "--rotate without --slice needs a git checkout (the commit picks the slice)"
        SLICE=$(( 0x$h % ROTATE ))
    fi
    [ "$SLICE" -lt "$ROTATE" ] || die "--slice $SLICE: expected 0..$((ROTATE - 1))"
    i=0
    sub=
    for n in $SEL; do
        if [ $((i % ROTATE)) -eq "$SLICE" ] || [ -n "$(header Require "$n")" ]; then
            sub="$sub $n"
        fi
        i=$((i + 1))
    done
    SEL=$sub
    say "rotation: slice $SLICE of $ROTATE ($(echo $SEL | wc -w) mutants, those with a Require line included)"
fi
NSEL=$(echo $SEL | wc -w)
[ "$NSEL" -gt 0 ] || { say "no mutant selected"; exit 0; }

if [ $MODE = list ]; then
    for n in $SEL; do
        printf '%-38s %-26s %s\n' "$n" "$(files "$n" | tr '\n' ' ')" "$(header Mutant "$n")"
    done
    exit 0
fi

# ---- every mutant must apply, exactly, to the tree as it is now -------------
bad=0
for n in $SEL; do
    f=$CAT/$n.patch
    [ -n "$(header Mutant "$n")" ] && [ -n "$(header Models "$n")" ] || {
        say "$f: needs a \"# Mutant: what it changes\" and a \"# Models: which real bug\" line"
        bad=1
    }
    fl=$(files "$n")
    [ -n "$fl" ] || { say "$f: no diff in it"; bad=1; continue; }
    for x in $fl; do
        suites_of "$x" >/dev/null ||
            { say "$f changes $x, which has no line in $CAT/suites.map"; bad=1; }
    done
    for l in $(header Require "$n"); do
        case " $LAYERS " in *" $l "*) ;; *) say "$f: Require names no layer \"$l\" ($LAYERS)"; bad=1 ;; esac
    done
    for w in $(header Needs "$n"); do
        case " $NEEDS " in *" $w "*) ;; *) say "$f: Needs names \"$w\", none of: $NEEDS"; bad=1 ;; esac
    done
    # -F0: the context must match exactly (an offset is fine); a mutant that
    # applies with fuzz may land somewhere else than where it was written.
    if ! msg=$(patch -p1 -F0 --dry-run --no-backup-if-mismatch -s -d "$ROOT" <"$f" 2>&1); then
        say "$n NO LONGER APPLIES to $(echo $fl | tr ' ' ,): the code it mutates changed."
        printf '%s\n' "$msg" | sed 's/^/    /'
        say "  refresh it: apply it by hand where the code went (patch -p1 --merge), then"
        say "  replace the diff below its header with \`git diff\`, and restore the file"
        bad=1
    fi
done
[ $bad = 0 ] || die "the catalogue does not apply (see above): nothing was run"
if [ $MODE = check ]; then
    say "all $NSEL mutant(s) apply to the tree"
    exit 0
fi

# ---- what this build can check --------------------------------------------------
# A mutant whose code this build does not compile or cannot test ("# Needs:"
# names what it needs) is skipped: listed in the table, not counted.
# The fake libnccl/libcudart pair the behave_nccl suite loads (named by
# DDP_FAKE_NCCL_DIR, as `make test` does); the Makefile has rules for it
# only where it builds the nccl backend (nccl.h found under CUDA_HOME).
FAKE_NCCL="build/default/fake_nccl/libcudart.so.13 build/default/fake_nccl/libnccl.so.2"
# `make mutate` passes the Makefile's own list (MUTATE_FAKE_NCCL, empty
# without nccl.h); called directly, make is asked whether it has the rules.
if [ -n "${MUTATE_FAKE_NCCL+set}" ]; then
    [ -n "$MUTATE_FAKE_NCCL" ] || FAKE_NCCL=
elif ! $MAKE -n -s -C "$ROOT" $FAKE_NCCL >/dev/null 2>&1; then
    FAKE_NCCL=
fi
# need_missing WORD: why this build lacks WORD, or nothing.
need_missing() {
    case $1 in
    nccl) [ -n "$FAKE_NCCL" ] ||
            echo "the nccl backend is not built here (no nccl.h under CUDA_HOME)" ;;
    esac
}
ALLSEL=$SEL
SEL=
SKIPPED=
for n in $ALLSEL; do
    _why=
    for w in $(header Needs "$n"); do
        _m=$(need_missing "$w")
        [ -n "$_m" ] && _why="${_why:+$_why; }needs $w: $_m"
    done
    if [ -n "$_why" ]; then
        SKIPPED="$SKIPPED $n"
        eval "SKIP_$(echo "$n" | tr -c 'A-Za-z0-9\n' _)=\$_why"
    else
        SEL="$SEL $n"
    fi
done
# skip_why NAME: why NAME is skipped, or nothing.
skip_why() { eval "printf '%s' \"\${SKIP_$(echo "$1" | tr -c 'A-Za-z0-9\n' _):-}\""; }
[ -n "$SKIPPED" ] && say "skipped, this build cannot check them:$SKIPPED"
NSEL=$(echo $SEL | wc -w)
[ "$NSEL" -gt 0 ] || { say "no mutant left to run"; exit 0; }

# ---- scratch copies -----------------------------------------------------------
# Each worker has its own: pristine (sources + both builds, made once) and
# work (pristine again for every mutant, then the patch: make rebuilds the
# one object). The instrumented build bakes its absolute path into every
# object (the .gcda paths), so it is built where it runs, in work/.
[ "$JOBS" -gt "$NSEL" ] && JOBS=$NSEL
R=$OUT/run
rm -rf "$R" "$OUT"/w[0-9]* "$OUT/logs"
mkdir -p "$R/claim" "$R/res" "$OUT/logs" || exit 2
PIDS=
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    [ $KEEP = 1 ] || rm -rf "$OUT"/w[0-9]*
}
trap 'cleanup; exit 130' INT TERM HUP

# What `make test` puts in the environment of the test binary.
TESTENV="DDPSIM=\$PWD/build/default/ddpsim DDP_FAKE_NCCL_DIR=\$PWD/build/default/fake_nccl"
MAKEJ=$(( $(nproc 2>/dev/null || echo 1) / JOBS ))
[ $MAKEJ -ge 1 ] || MAKEJ=1
# Sources: what git tracks plus untracked files it does not ignore.
srclist() {
    if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
        git -C "$ROOT" ls-files -z -co --exclude-standard
    else
        find . -path ./build -prune -o -path ./.git -prune -o -type f -print0 | sed -z 's|^\./||'
    fi
}
prep_worker() {
    _w=$OUT/w$1
    mkdir -p "$_w/work" || return 1
    srclist | tar -C "$ROOT" --null -T - -cf - 2>/dev/null | tar -C "$_w/work" -xpf - || return 1
    mkdir -p "$_w/work/build"
    # The default build is position-independent: copied (mtimes kept, so
    # make rebuilds only what is out of date); the stamp saves a deps check.
    [ -d "$ROOT/build/default" ] && cp -a "$ROOT/build/default" "$_w/work/build/"
    [ -f "$ROOT/build/.deps-ok" ] && cp -p "$ROOT/build/.deps-ok" "$_w/work/build/"
    (
        cd "$_w/work" &&
            $MAKE --no-print-directory -j$MAKEJ build/default/ddpsim-test build/default/ddpsim \
                build/default/libddpsim.a build/default/libddpsim.so.0.1.0 ddpsim $FAKE_NCCL &&
            $MAKE --no-print-directory -j$MAKEJ COVERAGE=1 B=build/default-cov build/default-cov/ddpsim &&
            $MAKE --no-print-directory build/coverage/parity
    ) >"$_w/prep.log" 2>&1 || return 1
    mv "$_w/work" "$_w/pristine"
}

say "$NSEL mutant(s), $JOBS at a time; preparing $JOBS scratch cop$( [ "$JOBS" = 1 ] && echo y || echo ies) under $OUT"
T0=$(ms)
i=1
PIDS=
while [ $i -le "$JOBS" ]; do
    prep_worker $i &
    PIDS="$PIDS $!"
    i=$((i + 1))
done
i=1
for p in $PIDS; do
    wait "$p" || { cat "$OUT/w$i/prep.log" >&2; cleanup; die "preparing scratch copy $i failed (above)"; }
    i=$((i + 1))
done
PIDS=
say "scratch copies ready in $(secs "$T0" "$(ms)") s"

# ---- the layers ---------------------------------------------------------------
ALL_SUITES=$("$OUT/w1/pristine/build/default/ddpsim-test" --list | cut -d/ -f1 | sort -u | tr '\n' ' ')
[ -n "$ALL_SUITES" ] || die "ddpsim-test --list printed no suites"
# A suite name the binary does not know fails at once, which would pass for
# a kill of every mutant of that file.
for _s in $(awk '!/^#/ && NF >= 2 { for (i = 2; i <= NF; i++) print $i }' "$CAT/suites.map" | sort -u); do
    case " $ALL_SUITES " in *" $_s "*) ;; *)
        cleanup
        die "$CAT/suites.map names a suite \"$_s\" that ddpsim-test --list does not have" ;;
    esac
done

# layer_cmd LAYER UNIT_SUITES: the shell command of LAYER, run in work/.
layer_cmd() {
    case $1 in
    # One suite at a time, in suites.map's order (cheapest first), up to the
    # first that fails: the binary itself would run them in name order.
    unit) echo "for s in $2; do $TESTENV build/default/ddpsim-test \$s || exit \$?; done" ;;
    test)
        _rest=
        for _s in $ALL_SUITES; do
            case " $2 " in *" $_s "*) ;; *) _rest="$_rest $_s" ;; esac
        done
        echo "$TESTENV build/default/ddpsim-test $_rest && MAKE=$MAKE sh tests/example-test.sh" ;;
    run) echo "build/default/ddpsim run scenarios/*.scn --accelerator all --no-progress" ;;
    gate) echo "MAKE=$MAKE B=build/default-cov OUT=build/coverage NO_HTML=1 sh coverage/run.sh" ;;
    esac
}
# What failed first, in a layer's log (its exit status in LOG.rc).
first_failure() {
    _f=
    case $1 in
    unit | test)
        # A test's own output may come between "Test: NAME ..." and FAILED.
        _f=$(awk '/^Suite: / { s = $2 }
             /^  Test: / { t = $0; sub(/^  Test: /, "", t); sub(/ \.\.\..*$/, "", t) }
             /FAILED$/ && t != "" { print s "/" t; exit }
             /^example-test: FAIL/ { print "example-test"; exit }' "$2") ;;
    run) _f=$(awk '$5 == "FAIL" { print $1 " " $2; exit }' "$2") ;;
    gate) grep -q 'parity: FAIL\|undeclared difference' "$2" && _f="parity violation" ;;
    esac
    if [ -z "$_f" ]; then
        _rc=$(cat "$2.rc" 2>/dev/null)
        if [ "${_rc:-0}" -gt 128 ]; then _f="crashed (signal $((_rc - 128)))"; else _f="exit ${_rc:-?}"; fi
    fi
    printf '%s\n' "$_f"
}
# run_layer WORKDIR LAYER SUITES BOUND LOG: 0 passed, 1 failed, 2 timed out.
run_layer() {
    _c=$(layer_cmd "$2" "$3")
    (cd "$1" && exec timeout -k 10 "$4" sh -c "$_c") >"$5" 2>&1
    _rc=$?
    echo $_rc >"$5.rc"
    case $_rc in
    0) return 0 ;;
    124 | 137) return 2 ;;
    *) return 1 ;;
    esac
}

# ---- the unmutated tree: every layer must pass, and gives the bounds --------
W1=$OUT/w1
rm -rf "$W1/work" && cp -a "$W1/pristine" "$W1/work" || exit 2
mkdir -p "$OUT/logs/.baseline"
say "the unmutated tree, every layer (their times set the bounds)"
# bound SECONDS: the wall-clock bound of a layer that took SECONDS here.
bound() {
    awk -v t="$1" -v f="$MUTATE_BOUND_FACTOR" -v m="$MUTATE_MIN_BOUND" \
        'BEGIN { b = int(t * f + 0.999); print (b > m ? b : m) }'
}
base_fail() {
    tail -n 30 "$1" >&2
    cleanup
    die "the UNMUTATED tree fails $2 ($1): every mutant would look killed; fix that first"
}
# Each suite alone (the unit layer's bound is that of the mutant's suites),
# then the example; test's bound is that of all of them together.
: >"$R/suite-times"
tsum=0
for S in $ALL_SUITES; do
    t=$(ms)
    run_layer "$W1/work" unit "$S" 3600 "$OUT/logs/.baseline/unit-$S.log" ||
        base_fail "$OUT/logs/.baseline/unit-$S.log" "suite $S"
    d=$(($(ms) - t))
    echo "$S $d" >>"$R/suite-times"
    tsum=$((tsum + d))
done
# A suite that finds no environment of `make test` passes without running
# anything, and would kill nothing: the fakes must have been found.
if grep -q 'outside make test' "$OUT"/logs/.baseline/unit-*.log; then
    grep -l 'outside make test' "$OUT"/logs/.baseline/unit-*.log >&2
    cleanup
    die "a suite ran without the environment \`make test\` gives it (above): see TESTENV in $0"
fi
t=$(ms)
(cd "$W1/work" && MAKE=$MAKE timeout 3600 sh tests/example-test.sh) >"$OUT/logs/.baseline/example.log" 2>&1 ||
    base_fail "$OUT/logs/.baseline/example.log" "tests/example-test.sh"
tsum=$((tsum + $(ms) - t))
dt=$(secs 0 $tsum)
BOUND_test=$(bound "$dt")
say "  test: every suite and the example passed in $dt s; bound $BOUND_test s (unit: 5 x its suites' time)"
for L in run gate; do
    t=$(ms)
    run_layer "$W1/work" $L "" 3600 "$OUT/logs/.baseline/$L.log" ||
        base_fail "$OUT/logs/.baseline/$L.log" "layer $L"
    dt=$(secs "$t" "$(ms)")
    b=$(bound "$dt")
    eval "BOUND_$L=$b"
    say "  $L: passed in $dt s; bound $b s"
done
BUILD_BOUND=600
# unit_bound SUITE...: the bound of the unit layer for these suites.
unit_bound() {
    bound "$(awk -v l=" $* " 'index(l, " " $1 " ") { t += $2 } END { printf "%.1f", t / 1000 }' "$R/suite-times")"
}

# ---- one mutant ---------------------------------------------------------------
# Result line in $R/res/NAME: status|layer|seconds|detail|required-not-killed
run_mutant() {
    _w=$OUT/w$1 n=$2
    _log=$OUT/logs/$n
    mkdir -p "$_log"
    _t=$(ms)
    rm -rf "$_w/work" && cp -a "$_w/pristine" "$_w/work" || { echo "error|-|0|scratch copy failed|" >"$R/res/$n"; return; }
    if ! patch -p1 -F0 --no-backup-if-mismatch -d "$_w/work" <"$CAT/$n.patch" >"$_log/patch.log" 2>&1; then
        echo "error|-|$(secs "$_t" "$(ms)")|does not apply ($_log/patch.log)|" >"$R/res/$n"
        return
    fi
    for _f in $(files "$n"); do # the mutated source, for line numbers in the logs
        mkdir -p "$_log/src/${_f%/*}" && cp "$_w/work/$_f" "$_log/src/$_f"
    done
    if ! (cd "$_w/work" && timeout -k 10 $BUILD_BOUND $MAKE --no-print-directory -j$MAKEJ \
            build/default/ddpsim-test build/default/ddpsim ddpsim) >"$_log/build.log" 2>&1; then
        echo "error|-|$(secs "$_t" "$(ms)")|does not build ($_log/build.log)|" >"$R/res/$n"
        return
    fi
    _suites=
    for _f in $(files "$n"); do
        for _s in $(suites_of "$_f"); do
            case " $_suites " in *" $_s "*) ;; *) _suites="$_suites $_s" ;; esac
        done
    done
    _req=$(header Require "$n")
    _killed='' _detail='' _missed=''
    for L in $LAYERS; do
        _need=0
        case " $_req " in *" $L "*) _need=1 ;; esac
        if [ -n "$_killed" ] && [ $_need = 0 ] && [ $ALL_LAYERS = 0 ]; then
            continue
        fi
        # Nothing to run: no suites for the file, or every suite was unit's.
        if [ $L = unit ] && [ -z "$_suites" ]; then continue; fi
        if [ $L = unit ]; then _b=$(unit_bound $_suites); else eval "_b=\$BOUND_$L"; fi
        run_layer "$_w/work" $L "$_suites" "$_b" "$_log/$L.log"
        _rc=$?
        if [ $_rc = 2 ]; then
            # A timeout is confirmed once: a load spike on a shared machine
            # must not pass for a hang.
            mv "$_log/$L.log" "$_log/$L.timeout1.log"
            run_layer "$_w/work" $L "$_suites" "$_b" "$_log/$L.log"
            _rc=$?
        fi
        if [ $L = gate ]; then
            for _x in parity.txt parity.diffs; do
                [ -f "$_w/work/build/coverage/$_x" ] && cp "$_w/work/build/coverage/$_x" "$_log/gate-$_x"
            done
        fi
        if [ $_rc = 0 ]; then
            [ $_need = 1 ] && _missed="$_missed $L"
            continue
        fi
        [ -n "$_killed" ] && continue
        if [ $_rc = 2 ]; then
            _killed=timeout:$L
            _detail="no verdict within ${_b} s, twice"
            # Where it hung: the last test or scenario that had started.
            _where=$(awk '/^Suite: / { s = $2 } /^  Test: / { t = $0; sub(/^  Test: /, "", t)
                sub(/ \.\.\..*$/, "", t); w = s "/" t } END { print w }' "$_log/$L.log")
            [ -n "$_where" ] && _detail="$_detail; last started: $_where"
        else
            _killed=$L
            _detail=$(first_failure $L "$_log/$L.log")
        fi
    done
    _v=$(header Verify "$n")
    if [ -n "$_v" ] && ! MUTANT_LOGS=$_log timeout -k 10 300 sh -c "$_v" >"$_log/verify.log" 2>&1; then
        _missed="$_missed verify($_log/verify.log)"
    fi
    _dt=$(secs "$_t" "$(ms)")
    if [ -n "$_killed" ]; then
        echo "killed|$_killed|$_dt|$_detail|${_missed# }" >"$R/res/$n"
    else
        echo "survived|-|$_dt||${_missed# }" >"$R/res/$n"
    fi
}

worker() {
    for n in $SEL; do
        mkdir "$R/claim/$n" 2>/dev/null || continue
        run_mutant "$1" "$n"
        IFS='|' read -r st ly dt det miss <"$R/res/$n"
        done_n=$(ls "$R/res" | wc -l)
        case $st in
        killed) msg="killed by $ly in $dt s${det:+ ($det)}" ;;
        survived) msg="SURVIVED every layer ($dt s)" ;;
        *) msg="ERROR: $det" ;;
        esac
        [ -n "$miss" ] && msg="$msg; REQUIRED check(s) did not hold: $miss"
        # a plain line per mutant: done/total, rate, ETA (scripts/progress.sh)
        progress_fmt "$done_n" "$n: $msg"
    done
}

T1=$(ms)
progress_start mutate mutants "$NSEL"
i=1
while [ $i -le "$JOBS" ]; do
    worker $i &
    PIDS="$PIDS $!"
    i=$((i + 1))
done
for p in $PIDS; do wait "$p"; done
PIDS=

# ---- the table and the score --------------------------------------------------
killed=0 survived=0 equiv=0 errors=0 known=0 undeclared='' stale='' reqfail=''
printf '\n%-38s | %-20s | %7s | %s\n' "mutant" "layer that killed it" "seconds" "first failure"
printf '%s\n' "---------------------------------------+----------------------+---------+--------------"
skipped=0
for n in $ALLSEL; do
    if [ -n "$(skip_why "$n")" ]; then
        printf '%-38s | %-20s | %7s | %s\n' "$n" "skipped" "-" "$(skip_why "$n")"
        skipped=$((skipped + 1))
        continue
    fi
    if [ ! -f "$R/res/$n" ]; then
        st=error ly=- dt=0 det="not run" miss=
    else
        IFS='|' read -r st ly dt det miss <"$R/res/$n"
    fi
    eq=$(declared equivalent.txt "$n")
    kn=$(declared survivors.txt "$n")
    case $st in
    killed)
        if [ -n "$eq" ]; then
            stale="$stale $n(equivalent.txt)"
            equiv=$((equiv + 1))
        else
            killed=$((killed + 1))
            [ -n "$kn" ] && stale="$stale $n(survivors.txt)"
        fi
        col=$ly ;;
    survived)
        if [ -n "$eq" ]; then
            equiv=$((equiv + 1)); col="equivalent"; det=$eq
        else
            survived=$((survived + 1))
            if [ -n "$kn" ]; then
                known=$((known + 1)); col="SURVIVED (known)"; det=$kn
            else
                col="SURVIVED"; undeclared="$undeclared $n"
            fi
        fi ;;
    *) errors=$((errors + 1)); col="ERROR" ;;
    esac
    [ -n "$miss" ] && { reqfail="$reqfail $n($miss)"; det="REQUIRED check(s) did not hold: $miss; $det"; }
    printf '%-38s | %-20s | %7s | %s\n' "$n" "$col" "$dt" "$det"
done
total=$((killed + survived))
score=$(awk -v k=$killed -v t=$total 'BEGIN { if (t) printf "%.1f", 100 * k / t; else print "n/a" }')
printf '\n%d killed, %d survived\n' "$killed" "$survived"
say "score $score % of $total non-equivalent mutant(s) killed ($equiv declared equivalent," \
    "$known survivor(s) known from survivors.txt, $skipped skipped);" \
    "$(secs "$T1" "$(ms)") s for the mutants," \
    "$(secs "$T0" "$(ms)") s in all; logs in $OUT/logs/"
cleanup
rc=0
if [ $errors -gt 0 ]; then
    say "$errors mutant(s) could not be checked (ERROR above: a patch that no longer applies or builds)"
    rc=2
fi
if [ -n "$undeclared" ]; then
    say "undeclared survivor(s):$undeclared"
    say "  add a test that kills each (docs/testing.md), or declare it in $CAT/survivors.txt"
    say "  (the test that would kill it) or $CAT/equivalent.txt (why it changes no behaviour)"
    [ $rc = 0 ] && rc=1
fi
if [ -n "$stale" ]; then
    say "declaration(s) no longer true, the mutant was killed:$stale; remove those lines"
    [ $rc = 0 ] && rc=1
fi
if [ -n "$reqfail" ]; then
    say "required check(s) did not hold (a Require layer that did not kill, a Verify that failed):$reqfail"
    [ $rc = 0 ] && rc=1
fi
exit $rc
