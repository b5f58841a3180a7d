#!/bin/sh
# tests/report/check.sh [--chromium] — `ddpsim run --artifacts` and `ddpsim
# report` on a run that fails (tests/report/rank5-crash.scn: 8 ranks on 2
# nodes, rank 5 crashes entering the barrier) beside one that passes.
#
# Without options (make test): the run's folder holds every piece, its
# replay command reproduces the run (same trace hash), the table names the
# folder, nothing is replaced (an existing run folder or report/ is
# refused), and the page is well-formed XML whose timeline has one lane
# per rank and names the failing rank, its phase, the fault and the replay
# command. With --chromium (.ci/run): the page as headless chromium renders
# it (its DOM after the scripts ran, and a screenshot): the same facts, and
# the first error, faults, replay command and timeline fit in the first
# screen of a 1280x900 window. Without chromium it prints one line and
# passes (sh scripts/deps.sh --chromium installs it).
set -eu
cd "$(dirname "$0")/../.."
D=${DDPSIM:-./ddpsim}
chromium=0
[ "${1:-}" = --chromium ] && chromium=1
if [ $chromium = 1 ] && ! command -v chromium >/dev/null 2>&1; then
    echo "report in chromium: skipped: no chromium (sh scripts/deps.sh --chromium installs it)"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "tests/report/check.sh: FAIL: $*" >&2
    exit 1
}
A=$tmp/art
F=$A/rank5-crash.ddp
SCN="tests/report/rank5-crash.scn tests/report/vacuous.scn scenarios/clean-start.scn"

# The runs: the failing and the vacuous one keep a folder, the passing one
# none; in 2 worker processes the same folders.
rc=0
# shellcheck disable=SC2086
"$D" run $SCN --accelerator ddp --artifacts "$A" >"$tmp/out" 2>&1 || rc=$?
[ $rc = 1 ] || fail "ddpsim run exited $rc, expected 1 (a run fails): $(cat "$tmp/out")"
for f in scenario.scn seed replay result.json ranks.txt trace.jsonl trace.chrome.json \
    rank5.log README; do
    [ -s "$F/$f" ] || fail "$F/$f is missing or empty"
done
[ -s "$A/vacuous.ddp/result.json" ] || fail "the vacuous run kept no folder"
[ ! -e "$A/clean-start.ddp" ] || fail "a passing run kept a folder without --artifacts-all"
# shellcheck disable=SC2086
"$D" run $SCN --accelerator ddp --jobs 2 --artifacts "$tmp/jobs" >/dev/null 2>&1 || true
[ "$(ls "$tmp/jobs")" = "$(ls "$A")" ] || fail "--jobs 2 kept $(ls "$tmp/jobs"), not $(ls "$A")"
cmp -s "$tmp/jobs/rank5-crash.ddp/trace.jsonl" "$F/trace.jsonl" || fail "--jobs 2: another trace"
grep -q "folder: $F" "$tmp/out" || fail "the table does not name $F"
grep -q '^11$' "$F/seed" || fail "seed: $(cat "$F/seed"), expected 11"
grep -q 'CRASHED' "$F/rank5.log" || fail "rank5.log lacks rank 5's outcome"

# Its replay command reproduces it: the same trace hash.
hash=$(sed -n 's/.*"trace_hash":"\([0-9a-f]*\)".*/\1/p' "$F/result.json")
[ -n "$hash" ] || fail "no trace_hash in $F/result.json"
sh -c "$(cat "$F/replay")" >"$tmp/replay" 2>&1 || true # it fails, as the run did
grep -q "trace hash $hash" "$tmp/replay" ||
    fail "the replay command ($(cat "$F/replay")) did not reproduce trace hash $hash"

# Nothing is replaced: the same run into the same DIR is refused.
rc=0
"$D" run tests/report/rank5-crash.scn --artifacts "$A" >"$tmp/again" 2>&1 || rc=$?
if [ $rc != 2 ] || ! grep -q "rank5-crash.ddp exists" "$tmp/again"; then
    fail "an existing run folder was not refused (exit $rc): $(cat "$tmp/again")"
fi
# --artifacts-all keeps the passing run's too.
"$D" run scenarios/clean-start.scn --accelerator ddp --artifacts "$A" --artifacts-all \
    >/dev/null || fail "clean-start failed"
[ -s "$A/clean-start.ddp/result.json" ] || fail "--artifacts-all kept no folder for a pass"

# The report.
"$D" report "$A" >"$tmp/rep" || fail "ddpsim report: $(cat "$tmp/rep")"
P=$A/report/rank5-crash.ddp.html
xmllint --noout "$P" "$A/report/index.html" || fail "the pages are not well-formed"
x() { xmllint --xpath "$1" "$P" 2>/dev/null; }
[ "$(x 'count(//*[local-name()="g"][@class="lane"])')" = 8 ] || fail "not 8 rank lanes"
[ "$(x 'count(//*[local-name()="g"][@class="node"])')" = 2 ] || fail "not 2 node groups"
[ "$(x 'string(//*[local-name()="g"][@data-rank="5"]/@data-outcome)')" = CRASHED ] ||
    fail "rank 5's lane does not say CRASHED"
# the root cause first (docs/errors.md): the rank the fault killed, not a
# victim's timeout
[ "$(x 'string(//*[@id="fe-rank"])')" = 5 ] || fail "the first error is not rank 5's (the killed rank)"
[ "$(x 'string(//*[@id="fe-phase"])')" = barrier ] || fail "the first error's phase is not barrier"
x 'string(//*[@id="faults"])' | grep -q 'fault crash ranks=5 phase="barrier".*rank 5 at' ||
    fail "the faults do not name the crash and its hit on rank 5"
[ "$(x 'string(//*[@id="replay"])')" = "$(cat "$F/replay")" ] || fail "the replay command differs"
grep -q 'href="rank5-crash.ddp.html"' "$A/report/index.html" || fail "the index lacks the run"
grep -q 'href="clean-start.ddp.html"' "$A/report/index.html" || fail "the index lacks clean-start"
rc=0
"$D" report "$A" >"$tmp/rep2" 2>&1 || rc=$?
if [ $rc != 2 ] || ! grep -q "report/" "$tmp/rep2"; then
    fail "an existing report/ was not refused (exit $rc)"
fi

if [ $chromium = 1 ]; then
    # What the browser shows: the DOM after the page's scripts ran.
    chromium --headless --no-sandbox --disable-gpu --window-size=1280,900 \
        --dump-dom "file://$P" >"$tmp/dom.html" 2>"$tmp/chromium.err" ||
        fail "chromium --dump-dom: $(tail -3 "$tmp/chromium.err")"
    [ "$(grep -o 'class="lane"' "$tmp/dom.html" | wc -l)" = 8 ] || fail "chromium: not 8 lanes"
    grep -q 'id="fe-rank">5<' "$tmp/dom.html" || fail "chromium: the first error is not rank 5's (the killed rank)"
    grep -q 'id="fe-phase">barrier<' "$tmp/dom.html" || fail "chromium: no phase barrier"
    grep -q 'data-rank="5" data-node="1" data-outcome="CRASHED"' "$tmp/dom.html" ||
        fail "chromium: rank 5's lane on node 1 is not CRASHED"
    grep -q 'data-first-screen="fits"' "$tmp/dom.html" ||
        fail "chromium: the first error, faults, replay and timeline do not fit one 1280x900 screen"
    chromium --headless --no-sandbox --disable-gpu --window-size=1280,900 \
        --screenshot="$tmp/page.png" "file://$P" >/dev/null 2>&1 || fail "chromium --screenshot"
    [ "$(head -c 8 "$tmp/page.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
        fail "chromium: the screenshot is no PNG"
    echo "report in chromium: ok (8 rank lanes, first error rank 5 killed in barrier, replay command; fits 1280x900)"
else
    echo "report: ok (folder, replay = same trace hash, nothing replaced, 8 lanes, first error, fault, replay command)"
fi
