#!/bin/sh
# tests/fuzz/run.sh SECONDS BIN... — runs each libFuzzer harness (make fuzz
# builds them into build/fuzz/) for SECONDS seconds, one after the other,
# starting from its seed corpus tests/fuzz/corpus/NAME (read only: what the
# fuzzer finds goes to build/fuzz/corpus/NAME). Prints runs and exec/s per
# harness. A crash, a leak, a sanitizer report or a broken property fails
# the run: the reproducer's path is printed (build/fuzz/crashes/NAME/...),
# with the command that replays it, and the exit status is 1.
set -u
secs=$1
shift
fail=0
for bin in "$@"; do
    name=${bin##*/fuzz_}
    seeds=tests/fuzz/corpus/$name
    work=build/fuzz/corpus/$name
    crashes=build/fuzz/crashes/$name
    log=build/fuzz/$name.log
    mkdir -p "$work" "$crashes"
    "$bin" -max_total_time="$secs" -print_final_stats=1 -timeout=20 \
        -rss_limit_mb=2048 -artifact_prefix="$crashes/" "$work" "$seeds" >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    if [ "$rc" -ne 0 ]; then
        repro=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
        echo "fuzz $name: FAILED (exit $rc); reproducer: ${repro:-none written} (log: $log)"
        tail -n 40 "$log"
        [ -n "$repro" ] && echo "replay with: $bin $repro"
        fail=1
    else
        echo "fuzz $name: ${runs:-?} runs in ${secs} s (${rate:-?} exec/s), no crash;" \
            "corpus $(ls "$work" | wc -l) + $(ls "$seeds" | wc -l) seeds"
    fi
done
exit $fail
