#!/bin/sh
# coverage/run.sh — per-accelerator coverage and the parity gate
# (`make coverage`; manual: docs/coverage.md).
#
#  1. builds the instrumented ddpsim ($B, COVERAGE=1) and the parity tool;
#  2. captures a zero baseline (lcov -c -i) so unexecuted files show 0 %;
#  3. for each accelerator: runs the scenario suite for it as $SHARDS shards
#     (shard K: the scenario files i with i mod N = K-1), each in its own
#     process(es) with its own GCOV_PREFIX, copies the .gcno files beside the
#     .gcda files, captures $OUT/<accel>.<K>.info (test name = accelerator)
#     and merges the shards' tracefiles with `lcov -a` into $OUT/<accel>.info;
#  4. the same scenario simulated and as real processes: $OUT/pair_*.info;
#  5. merges baseline + accelerators into $OUT/all.info, renders $HTML
#     (genhtml: branches, per-test details) and $HTML/cobertura.xml
#     (coverage/cobertura.c, checked against the DTD and lcov --summary);
#  6. runs the parity tool: text report on stdout and in $OUT/parity.txt,
#     table spliced at the top of $HTML/index.html.
# Exit status: 0 parity holds, 1 parity violation, 2 the pipeline failed.
#
# Everything below can be overridden from the environment; the commands of
# step 3 and 4 are the lines to change when the scenario runner changes.
# shellcheck disable=SC2016,SC2317  # eval'd command strings; functions run via eval
set -u

CALLER=$(pwd -P)
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$ROOT" || exit 2
. scripts/progress.sh

# ---- a plugin library of your own (docs/coverage.md § 8) ------------------
# PLUGIN=PATH.so, built with --coverage: the suite runs with --plugin PATH,
# and the .gcno files under PLUGIN_SRC (default: the library's folder; no
# spaces) are captured with ddpsim's, so that its sources are summarised,
# shown per accelerator and gated like plugins/.
: "${PLUGIN:=}"
: "${PLUGIN_SRC:=}"

# ---- the commands run per accelerator (eval'd; $DDPSIM, $ACCEL set) -----
# RUN_SIM: the scenario suite for one accelerator, in one process. A failed
# expectation (exit 1) is reported and its coverage still counted: failing
# scenarios are the business of `make test` / `ddpsim run`, not of
# coverage. Exit 2 (bad input) or a crash (no .gcda written) stops the
# pipeline. "auto" (the default) means SUITE_SIM when `ddpsim run` exists
# and scenarios/*.scn are there, else the stand-in (standin_suite below).
: "${RUN_SIM:=auto}"
SUITE_SIM='"$DDPSIM" run $SHARD_FILES --accelerator "$ACCEL"'
# SHARDS=N: the suite of each accelerator as N shards, one tracefile each,
# merged with lcov -a before the gate. Shard K runs the files i of
# scenarios/*.scn (in the glob's order) with i mod N = K-1 ($SHARD_FILES):
# the partition rule of `ddpsim run --shard` (docs/sweeps.md) applied to the
# files, so that every file is also parsed in one shard only and every count
# the report shows adds up to the unsharded run's: the report is the same
# for every N (docs/coverage.md § 2). A shard whose files list no run for
# the accelerator runs nothing (ddpsim run says so and exits 2) but its
# parsing is counted. A RUN_SIM that does not name $SHARD_FILES runs once.
: "${SHARDS:=2}"
# shard_files K N: the scenario files of shard K of N.
shard_files() {
    _i=0
    for _f in scenarios/*.scn; do
        [ $((_i % $2)) -eq $(($1 - 1)) ] && printf ' %s' "$_f"
        _i=$((_i + 1))
    done
}
# The second matrix: one scenario simulated, then as real processes on
# loopback, for one accelerator ($PAIR_ACCEL). "auto": SUITE_PAIR_* when
# `ddpsim run --real` exists and $PAIR_SCENARIO is there, else stand-ins.
: "${PAIR_ACCEL:=ddp}"
: "${PAIR_SCENARIO:=scenarios/clean-start.scn}"
: "${PAIR_SIM=auto}"
: "${PAIR_REAL=auto}"
SUITE_PAIR_SIM='"$DDPSIM" run "$PAIR_SCENARIO" --accelerator "$ACCEL"'
SUITE_PAIR_REAL='"$DDPSIM" run --real "$PAIR_SCENARIO" --accelerator "$ACCEL"'
if [ -n "$PLUGIN" ]; then
    case $PLUGIN in /*) ;; *) PLUGIN=$CALLER/$PLUGIN ;; esac
    [ -f "$PLUGIN" ] || { echo "coverage: PLUGIN=$PLUGIN: no such file" >&2; exit 2; }
    PLUGIN_SRC=$(cd "${PLUGIN_SRC:-$(dirname "$PLUGIN")}" && pwd -P) || exit 2
    SUITE_SIM='"$DDPSIM" run --plugin "$PLUGIN" $SHARD_FILES --accelerator "$ACCEL"'
    SUITE_PAIR_SIM='"$DDPSIM" run --plugin "$PLUGIN" "$PAIR_SCENARIO" --accelerator "$ACCEL"'
    SUITE_PAIR_REAL='"$DDPSIM" run --real --plugin "$PLUGIN" "$PAIR_SCENARIO" --accelerator "$ACCEL"'
fi

# ---- where things are ---------------------------------------------------
: "${B:=build/default-cov}"          # the instrumented build (Makefile's B)
: "${OUT:=build/coverage}"           # tracefiles, logs, parity report
: "${HTML:=coverage/html}"           # genhtml report (git-ignored); NO_HTML=1 skips
: "${NO_HTML:=}"
: "${ALLOW:=coverage/parity.allow}"
: "${PARITY:=build/coverage/parity}"
: "${COBERTURA:=build/coverage/cobertura}"
: "${MAKE:=make}"
: "${JOBS:=$(nproc 2>/dev/null || echo 2)}"   # parallel lcov captures
# REPORT_ONLY=1 (make coverage-report): only step 6, on the tracefiles of
# the last run — for editing parity.allow without re-running everything.
: "${REPORT_ONLY:=}"
# Source directories whose objects make up ddpsim (tests/ and bench/ are not
# part of the measured binary).
SRC_DIRS="core backends plugins accelerators sim harness tools"
ACCELS_DEFAULT="ddp ddp_spawn ddp_cpu ddp2 ddp_hpc ddp_cpu_hpc"

# ---- what the parity tool looks at (docs/coverage.md § 4, § 8) -----------
PARITY_ARGS="--gate plugins/
 --summary plugins/ --summary core/ --summary backends/ --summary accelerators/
 --matrix plugins/
 --matrix core/store_client.c:connect|attempt|retryable|backoff|check_alive|ping
 --matrix core/store_helpers.c
 --matrix backends/tcp.c:init|connect|accept|listen|bootstrap|hello|gather|publish|fetch|backoff|missing
 --matrix backends/nccl.c:init|exchange|load|resolve|check_device|wait_ready|nonblocking|new_npg
 --inform core/store_client.c --inform core/store_helpers.c
 --inform backends/tcp.c --inform backends/nccl.c
 --require plugins/ddp_plugin.c:ddp_plugin_default_init_ddp_connection
 --pair-matrix plugins/ddp_plugin.c
 --pair-matrix core/store_client.c:connect|attempt|retryable|backoff|check_alive|ping
 --pair-matrix core/store_helpers.c"
[ -n "$PLUGIN" ] && PARITY_ARGS="$PARITY_ARGS --extra-root $PLUGIN_SRC --gate $PLUGIN_SRC/
 --summary $PLUGIN_SRC/ --matrix $PLUGIN_SRC/"

LCOV_RC="--rc lcov_branch_coverage=1"

say() { printf '%s\n' "coverage: $*"; }
fail() { printf '%s\n' "coverage: $*" >&2; exit 2; }
# lcov_log LOG ARGS...: lcov quiet, its output in LOG without the 7
# "Subroutine ... redefined" warnings Debian's lcov prints per call; the
# status is lcov's.
lcov_log() {
    _log=$1
    shift
    lcov -q $LCOV_RC "$@" >"$_log.raw" 2>&1
    _lrc=$?
    grep -v '^Subroutine .* redefined at' "$_log.raw" >"$_log"
    rm -f "$_log.raw"
    return $_lrc
}
now() { date +%s; }

# The stand-in suite while `ddpsim run` does not exist: `ddpsim sim` runs
# through the shared plugin with the expected exit status of each.
standin_suite() {
    _bad=0
    for _case in "0|" "0|--plugin subgroups" "0|--plugin rpc" "1|--port-taken" \
                 "0|--master-late 5" "1|--fault crash,phase=barrier,ranks=1" \
                 "1|--timeout 30 --fault partition,nodes=1,end=90"; do
        _want=${_case%%|*}
        _opts=${_case#*|}
        # shellcheck disable=SC2086
        "$DDPSIM" sim --accelerator "$ACCEL" --nodes 2 --procs 2 $_opts
        _rc=$?
        [ "$_rc" -ge 2 ] && return "$_rc"
        if [ "$_rc" != "$_want" ]; then
            echo "standin_suite: sim $_opts: exit $_rc, expected $_want"
            _bad=1
        fi
    done
    return $_bad
}
# Stand-ins for the pair: the same simulated run, and `ddpsim demo` (real
# processes on loopback, but store + barrier only, not the plugin).
standin_pair_sim() { "$DDPSIM" sim --accelerator "$ACCEL" --nodes 1 --procs 4; }
standin_pair_real() { "$DDPSIM" demo --ranks 4; }

# ---- 1. build ---------------------------------------------------------------
build() {
    # In parallel, unless make's jobserver already is (make -jN coverage).
    case "${MAKEFLAGS:-}" in
    *jobserver*) _j= ;;
    *) _j=-j$JOBS ;;
    esac
    say "building the instrumented ddpsim in $B"
    $MAKE --no-print-directory $_j COVERAGE=1 B="$B" "$B/ddpsim" >"$OUT/build.log" 2>&1 ||
        { cat "$OUT/build.log"; fail "instrumented build failed"; }
    $MAKE --no-print-directory "$PARITY" "$COBERTURA" >>"$OUT/build.log" 2>&1 ||
        { cat "$OUT/build.log"; fail "building the parity tool failed"; }
    [ -x "$DDPSIM" ] || fail "$DDPSIM missing after the build"
}

# The commands and accelerators, once ddpsim exists.
choose_commands() {
    _have_run=0
    "$DDPSIM" run --help >/dev/null 2>&1 && _have_run=1
    if [ "$RUN_SIM" = auto ]; then
        if [ $_have_run = 1 ] && ls scenarios/*.scn >/dev/null 2>&1; then
            RUN_SIM=$SUITE_SIM
        else
            say "\`ddpsim run\` or scenarios/*.scn missing: stand-in suite (ddpsim sim)"
            RUN_SIM=standin_suite
        fi
    fi
    if [ "$PAIR_SIM" = auto ] || [ "$PAIR_REAL" = auto ]; then
        if [ $_have_run = 1 ] && [ -f "$PAIR_SCENARIO" ] &&
            "$DDPSIM" run --help 2>&1 | grep -q -- '--real'; then
            [ "$PAIR_SIM" = auto ] && PAIR_SIM=$SUITE_PAIR_SIM
            [ "$PAIR_REAL" = auto ] && PAIR_REAL=$SUITE_PAIR_REAL
        else
            say "\`ddpsim run --real\` or $PAIR_SCENARIO missing: stand-in pair (sim / demo)"
            [ "$PAIR_SIM" = auto ] && PAIR_SIM=standin_pair_sim
            [ "$PAIR_REAL" = auto ] && PAIR_REAL=standin_pair_real
        fi
    fi
    case $SHARDS in '' | *[!0-9]* | 0) fail "SHARDS=$SHARDS: expected a number >= 1" ;; esac
    case $RUN_SIM in
    *SHARD_FILES*) ;;
    *) [ "$SHARDS" -gt 1 ] && say "RUN_SIM does not take \$SHARD_FILES: one shard per accelerator"
       SHARDS=1 ;;
    esac
    if [ -z "${ACCELS:-}" ]; then
        ACCELS=$("$DDPSIM" list accelerators 2>/dev/null | tr '\n' ' ')
        case "$ACCELS" in
        *[!a-z0-9_\ ]* | "" | " ") ACCELS=$ACCELS_DEFAULT ;;
        esac
    fi
}

# ---- 2.-5. runs, captures, merge, HTML ---------------------------------------
# plugin_gcnos DIR: the plugin library's .gcno files where its .gcda files
# land under GCOV_PREFIX=DIR (its absolute object path less $STRIP parts).
plugin_gcnos() {
    for _g in $PLUGIN_GCNOS; do
        _rel=$(printf '%s\n' "$_g" | cut -d/ -f$((STRIP + 2))-)
        [ -n "$_rel" ] || fail "$_g: its folder is less deep than the checkout's ($STRIP)"
        mkdir -p "$(dirname "$1/$_rel")" && cp "$_g" "$1/$_rel" ||
            fail "copying $_g failed"
    done
}

# run_set NAME COMMAND: COMMAND with its own GCOV_PREFIX, then the .gcno
# files beside the .gcda files. Returns the command's status.
run_set() {
    _dir="$OUT/gcda/$1"
    rm -rf "$_dir" && mkdir -p "$_dir"
    (
        GCOV_PREFIX=$_dir GCOV_PREFIX_STRIP=$STRIP
        export GCOV_PREFIX GCOV_PREFIX_STRIP DDPSIM ACCEL PAIR_SCENARIO
        eval "$2"
    ) >"$OUT/logs/$1.log" 2>&1
    _rc=$?
    # shellcheck disable=SC2086
    cp --parents $GCNOS "$_dir/" || fail "copying .gcno files for $1 failed"
    plugin_gcnos "$_dir"
    if [ -n "$(find "$B" -name '*.gcda' -print -quit)" ]; then
        # Processes started with an environment of their own (no
        # GCOV_PREFIX) wrote into $B: this run's counts all the same, kept
        # apart and merged into its tracefile after the capture.
        say "note: $1: processes without GCOV_PREFIX in their environment wrote"
        say "      counters into $B; recovered into $_dir.outside (docs/coverage.md § 9)"
        rm -rf "$_dir.outside"
        find "$B" -name '*.gcda' | while read -r _f; do
            mkdir -p "$_dir.outside/${_f%/*}" && mv "$_f" "$_dir.outside/$_f"
        done
        # shellcheck disable=SC2086
        cp --parents $GCNOS "$_dir.outside/" || fail "copying .gcno files for $1 failed"
        OUTSIDE="$OUTSIDE $1"
    fi
    return $_rc
}

has_gcda() { [ -n "$(find "$OUT/gcda/$1" -name '*.gcda' -print -quit)" ]; }

collect() {
    # GCOV_PREFIX_STRIP: the components of the absolute path gcc baked into
    # the objects — read from one, so a symlinked checkout cannot fool it.
    _gcda=$(strings -a "$B/plugins/ddp_plugin.o" 2>/dev/null |
        grep '/plugins/ddp_plugin\.gcda$' | head -n 1)
    _objroot=${_gcda%/"$B"/plugins/ddp_plugin.gcda}
    if [ -z "$_gcda" ] || [ "$_objroot" = "$_gcda" ]; then
        say "warning: no .gcda path in $B/plugins/ddp_plugin.o; assuming $ROOT"
        _objroot=$ROOT
    fi
    STRIP=$(printf '%s\n' "$_objroot" | tr -cd / | wc -c)

    GCNOS=$(for d in $SRC_DIRS; do
        [ -d "$B/$d" ] && find "$B/$d" -name '*.gcno'
    done | sort)
    [ -n "$GCNOS" ] || fail "no .gcno files under $B: is it a COVERAGE=1 build?"
    PLUGIN_GCNOS=""
    if [ -n "$PLUGIN" ]; then
        PLUGIN_GCNOS=$(find "$PLUGIN_SRC" -name '*.gcno' | sort)
        [ -n "$PLUGIN_GCNOS" ] ||
            fail "no .gcno files under $PLUGIN_SRC: build $PLUGIN with --coverage"
        find "$PLUGIN_SRC" -name '*.gcda' -exec rm -f {} +
        say "plugin library $PLUGIN (sources and .gcno under $PLUGIN_SRC)"
    fi
    # Counters written without GCOV_PREFIX would land in $B: clear them so
    # a stray one is noticed after a run (and never merges into the next).
    find "$B" -name '*.gcda' -exec rm -f {} +
    rm -rf "$OUT/gcda" "$OUT/logs"
    mkdir -p "$OUT/gcda/baseline" "$OUT/logs" || exit 2
    rm -f "$OUT"/*.info "$OUT/parity.txt" "$OUT/parity.html" "$OUT/parity.diffs"

    # 2. The zero baseline: every compiled line, count 0.
    # shellcheck disable=SC2086
    cp --parents $GCNOS "$OUT/gcda/baseline/" || fail "copying .gcno files failed"
    plugin_gcnos "$OUT/gcda/baseline"
    lcov_log "$OUT/logs/baseline.lcov" -c -i -d "$OUT/gcda/baseline" \
        -o "$OUT/baseline.info" ||
        { cat "$OUT/logs/baseline.lcov"; fail "baseline capture (lcov -c -i) failed"; }

    # 3. The suite, once per accelerator, in $SHARDS shards (sets ACCEL.K;
    # SHARDS_<accel>: the ones that ran).
    SETS=""
    _nacc=$(printf '%s\n' $ACCELS | wc -l)
    _pairs=0
    [ -n "$PAIR_SIM" ] && [ -n "$PAIR_REAL" ] && _pairs=2
    progress_start coverage runs $((_nacc * SHARDS + _pairs))
    _done=0
    for ACCEL in $ACCELS; do
        _failed=""
        _sets=""
        _k=1
        while [ $_k -le "$SHARDS" ]; do
            SHARD_FILES=$(shard_files $_k "$SHARDS")
            export SHARD_FILES
            _set=$ACCEL.$_k
            _k=$((_k + 1))
            [ -n "$SHARD_FILES" ] || continue # more shards than files
            progress_tick $_done "$_set"
            run_set "$_set" "$RUN_SIM"
            _rc=$?
            _done=$((_done + 1))
            case $_rc in
            0) ;;
            1) _failed="$_failed $OUT/logs/$_set.log" ;;
            2) grep -q 'nothing to run' "$OUT/logs/$_set.log" || {
                   tail -n 20 "$OUT/logs/$_set.log" >&2
                   fail "$ACCEL: scenario suite (shard $_set) exited 2 (bad input)"
               } ;;
            *) tail -n 20 "$OUT/logs/$_set.log" >&2
               fail "$ACCEL: scenario suite (shard $_set) exited $_rc (a crash: no usable counters)" ;;
            esac
            has_gcda "$_set" ||
                fail "$ACCEL: no .gcda under $OUT/gcda/$_set (GCOV_PREFIX_STRIP=$STRIP wrong?)"
            _sets="$_sets $_set"
        done
        SETS="$SETS$_sets"
        eval "SHARDS_$ACCEL=\$_sets"
        _of=""
        [ "$SHARDS" -gt 1 ] && _of=" ($SHARDS shards)"
        progress_end
        if [ -z "$_failed" ]; then
            say "$ACCEL: scenario suite passed$_of"
        else
            say "$ACCEL: scenario suite had failed expectations$_of (coverage kept;$_failed)"
            SIM_FAILED="$SIM_FAILED $ACCEL"
        fi
    done
    SHARD_FILES=

    # 4. The pair: one scenario, simulated and real.
    if [ -n "$PAIR_SIM" ] && [ -n "$PAIR_REAL" ]; then
        PAIR_OK=1
        ACCEL=$PAIR_ACCEL
        for _p in sim real; do
            if [ $_p = sim ]; then _cmd=$PAIR_SIM; else _cmd=$PAIR_REAL; fi
            progress_tick $_done "pair_$_p"
            run_set "pair_$_p" "$_cmd"
            _rc=$?
            _done=$((_done + 1))
            progress_end
            if [ $_rc -gt 1 ] || ! has_gcda "pair_$_p"; then
                say "warning: pair run $_p exited $_rc without counters: no second matrix"
                PAIR_OK=0
            elif [ $_rc = 1 ]; then
                say "pair run $_p had failed expectations (coverage kept)"
            fi
        done
        [ $PAIR_OK = 1 ] && SETS="$SETS pair_sim pair_real"
    fi

    # Captures: slow-ish (lcov runs gcov per object), $JOBS at a time.
    say "capturing tracefiles:$SETS"
    _n=0
    progress_start capture tracefiles "$(echo $SETS | wc -w)"
    _done=0
    for _s in $SETS; do
        # the test name: the accelerator (ddp_cpu.2 -> ddp_cpu), or pair_*
        lcov_log "$OUT/logs/$_s.lcov" -c -d "$OUT/gcda/$_s" -t "${_s%.*}" -o "$OUT/$_s.info" &
        _n=$((_n + 1))
        _done=$((_done + 1))
        if [ $_n -ge "$JOBS" ]; then wait; _n=0; progress_tick $_done "$_s"; fi
    done
    wait
    progress_end
    for _s in $SETS; do
        [ -s "$OUT/$_s.info" ] || { cat "$OUT/logs/$_s.lcov" >&2; fail "capture of $_s failed"; }
    done
    for _s in $OUTSIDE; do
        lcov_log "$OUT/logs/$_s.outside.lcov" -c -d "$OUT/gcda/$_s.outside" -t "${_s%.*}" \
            -o "$OUT/$_s.outside.info" &&
            lcov_log "$OUT/logs/$_s.outside.lcov" -a "$OUT/$_s.info" \
                -a "$OUT/$_s.outside.info" -o "$OUT/$_s.merged.info" &&
            mv "$OUT/$_s.merged.info" "$OUT/$_s.info" ||
            { cat "$OUT/logs/$_s.outside.lcov" >&2; fail "capture of $_s's recovered counters failed"; }
    done

    # The shards of each accelerator into its tracefile (lcov -a sums the
    # counts; one shard is its tracefile as captured).
    for ACCEL in $ACCELS; do
        if [ "$SHARDS" -eq 1 ]; then
            mv "$OUT/$ACCEL.1.info" "$OUT/$ACCEL.info" || fail "no $OUT/$ACCEL.1.info"
            continue
        fi
        _merge=""
        for _s in $(eval "echo \$SHARDS_$ACCEL"); do _merge="$_merge -a $OUT/$_s.info"; done
        # shellcheck disable=SC2086
        lcov_log "$OUT/logs/$ACCEL.merge.lcov" $_merge -o "$OUT/$ACCEL.info" ||
            { cat "$OUT/logs/$ACCEL.merge.lcov" >&2; fail "$ACCEL: lcov -a of its $SHARDS shards failed"; }
    done

    # 5. Merge (baseline + accelerators; the pair is another question) and HTML.
    _merge="-a $OUT/baseline.info"
    for ACCEL in $ACCELS; do _merge="$_merge -a $OUT/$ACCEL.info"; done
    # shellcheck disable=SC2086
    lcov_log "$OUT/logs/merge.lcov" $_merge -o "$OUT/all.info" ||
        { cat "$OUT/logs/merge.lcov"; fail "lcov -a failed"; }
    if [ -z "$NO_HTML" ]; then
        rm -rf "$HTML"
        # shellcheck disable=SC2086
        genhtml -q --branch-coverage --show-details --legend --prefix "$ROOT" \
            -t "ddpsim: scenario suite per accelerator" -o "$HTML" \
            $LCOV_RC "$OUT/all.info" >"$OUT/logs/genhtml.log" 2>&1 ||
            { grep -v 'redefined at' "$OUT/logs/genhtml.log"; fail "genhtml failed"; }
        "$COBERTURA" --root "$ROOT" -o "$HTML/cobertura.xml" "$OUT/all.info" ||
            fail "the Cobertura XML could not be written"
        sh coverage/cobertura-check.sh "$HTML/cobertura.xml" "$OUT/all.info" ||
            fail "the Cobertura XML does not match the tracefile"
    fi
}

# ---- 6. the parity report ----------------------------------------------------
report() {
    _args=""
    for ACCEL in $ACCELS; do _args="$_args $ACCEL=$OUT/$ACCEL.info"; done
    [ $PAIR_OK = 1 ] &&
        _args="$_args --pair sim=$OUT/pair_sim.info --pair real=$OUT/pair_real.info"
    # The per-accelerator source pages: into $HTML/parity/, or with
    # NO_HTML=1 beside the fragment ($OUT/parity-pages/: $OUT/parity is the tool).
    _src=$HTML/parity
    [ -n "$NO_HTML" ] || [ ! -d "$HTML" ] && _src=$OUT/parity-pages
    rm -rf "$_src"
    # shellcheck disable=SC2086
    "$PARITY" --root "$ROOT" --baseline "$OUT/baseline.info" --allow "$ALLOW" \
        --html "$OUT/parity.html" --src-html "$_src" --diffs "$OUT/parity.diffs" \
        $PARITY_ARGS $_args >"$OUT/parity.txt" 2>&1
    PRC=$?
    cat "$OUT/parity.txt"
    [ $PRC -ge 2 ] && fail "the parity tool failed (exit $PRC)"
    if [ -z "$NO_HTML" ] && [ -f "$HTML/index.html" ]; then
        # The table goes first in the index, right after <body>; the
        # fragment of an earlier run (make coverage-report) is replaced.
        awk -v frag="$OUT/parity.html" '
            /^<!-- ddpsim coverage parity/ { skip = 1 }
            skip { if (/^<!-- \/ddpsim coverage parity -->/) skip = 0; next }
            { print }
            !done && /<body/ { while ((getline l < frag) > 0) print l; done = 1 }
        ' "$HTML/index.html" >"$HTML/index.html.new" &&
            mv "$HTML/index.html.new" "$HTML/index.html"
        cp "$OUT/parity.txt" "$HTML/parity.txt"
        say "HTML report: $HTML/index.html"
    fi
}

case $B in /*) fail "B must be relative to the repository (it is part of the .gcda paths)" ;; esac
case $OUT in /*) ;; *) OUT=$ROOT/$OUT ;; esac
START=$(now)
SIM_FAILED=""
OUTSIDE=""
PAIR_OK=0
DDPSIM="$ROOT/$B/ddpsim"
mkdir -p "$OUT" || exit 2

if [ -z "$REPORT_ONLY" ]; then
    build
    choose_commands
    collect
else
    [ -x "$PARITY" ] || $MAKE --no-print-directory "$PARITY" >/dev/null || fail "no parity tool"
    choose_commands
    for ACCEL in $ACCELS; do
        [ -s "$OUT/$ACCEL.info" ] || fail "no $OUT/$ACCEL.info: run make coverage first"
    done
    [ -s "$OUT/pair_sim.info" ] && [ -s "$OUT/pair_real.info" ] && PAIR_OK=1
fi
report
[ -n "$SIM_FAILED" ] &&
    say "note: failed expectations in the suite of:$SIM_FAILED (not a coverage failure)"
say "done in $(($(now) - START)) s; tracefiles in $OUT"
exit $PRC
