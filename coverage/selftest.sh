#!/bin/sh
# coverage/selftest.sh — tests of the parity tool on hand-written tracefiles
# (`make coverage-selftest`; seconds, no instrumented build). Each case
# states the exit status and output the tool must produce, so each one can
# fail; the end-to-end test is `make coverage-plant-check`.
#
#   sh coverage/selftest.sh [--page DIR]
#
# --page DIR: no tests; writes DIR/index.html, the parity page of the
# fixtures below (b skips a step), with its source pages in DIR/parity/, for
# tests/parity-page-test.sh (headless chromium).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
PARITY=${PARITY:-$ROOT/build/coverage/parity}
COBERTURA=${COBERTURA:-$ROOT/build/coverage/cobertura}
PAGE=""
if [ "${1:-}" = --page ]; then
    [ -n "${2:-}" ] || { echo "selftest: --page needs a folder" >&2; exit 2; }
    PAGE=$2
fi
T=${TMPDIR:-/tmp}/ddpsim-parity-selftest.$$
trap 'rm -rf "$T"' EXIT INT TERM
mkdir -p "$T/repo/plugins" "$T/repo/core" || exit 2
R=$T/repo

# A plugin with a shared path (lines 2-3), a step accelerator b skips
# (line 5, "the_barrier"), a rank-0-only line (7) reached by a only, and
# a branch on line 3 that only a takes.
cat >"$R/plugins/p.c" <<'EOF'
int p_init(void) {
    int rc = connect_all();
    if (rc) return rc;
    /* step */
    rc = the_barrier();
    if (rank0)
        log_registered();
    return rc;
}
EOF
cat >"$R/core/c.c" <<'EOF'
void c_fn(void) {
    work();
}
EOF
rec() { # rec FILE NAME LINES... : LINES are N=COUNT, FN=COUNT for the function
    _f=$1; _n=$2; shift 2
    printf 'TN:%s\nSF:%s/plugins/p.c\nFN:1,p_init\n' "$_n" "$R"
    for _x; do
        case $_x in
        FN=*) printf 'FNDA:%s,p_init\n' "${_x#FN=}" ;;
        B*) printf 'BRDA:3,0,%s\n' "${_x#B}" ;;
        *) printf 'DA:%s,%s\n' "${_x%=*}" "${_x#*=}" ;;
        esac
    done
    printf 'end_of_record\nSF:%s/core/c.c\nFN:1,c_fn\nFNDA:%s,c_fn\nDA:1,1\nDA:2,1\nend_of_record\n' "$R" 1
}
rec "$T" baseline FN=0 2=0 3=0 5=0 6=0 7=0 8=0 B0,- B1,- >"$T/base.info"
rec "$T" a FN=4 2=4 3=4 5=4 6=4 7=1 8=4 B0,4 B1,1 >"$T/a.info"
rec "$T" b FN=4 2=4 3=4 5=0 6=4 7=1 8=4 B0,4 B1,0 >"$T/b.info"
rec "$T" c FN=4 2=4 3=4 5=4 6=4 7=1 8=4 B0,4 B1,0 >"$T/c.info"
# Raw lcov captures repeat records; a header seen twice must be summed, and
# system headers (outside --root) ignored.
printf 'SF:/usr/include/stdio.h\nDA:1,5\nend_of_record\n' >>"$T/a.info"

if [ -n "$PAGE" ]; then
    mkdir -p "$PAGE" || exit 2
    rm -rf "$PAGE/parity"
    printf 'plugins/p.c:3 only=a a alone takes the branch\n' >"$T/allow"
    "$PARITY" --root "$R" --baseline "$T/base.info" --allow "$T/allow" --gate plugins/ \
        --summary plugins/ --matrix plugins/ --html "$T/frag.html" --src-html "$PAGE/parity" \
        a="$T/a.info" b="$T/b.info" c="$T/c.info" >"$PAGE/parity.txt" 2>&1
    [ $? -le 1 ] || { cat "$PAGE/parity.txt" >&2; exit 2; }
    { printf '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>parity</title></head><body>\n'
      cat "$T/frag.html"
      printf '</body></html>\n'; } >"$PAGE/index.html"
    exit 0
fi

fails=0
n=0
# check NAME WANT_RC GREP_PATTERN ALLOW_CONTENT [extra args...]
check() {
    _name=$1 _want=$2 _pat=$3 _allow=$4
    shift 4
    n=$((n + 1))
    printf '%s\n' "$_allow" >"$T/allow"
    "$PARITY" --root "$R" --baseline "$T/base.info" --allow "$T/allow" \
        --summary plugins/ --matrix plugins/ --diffs "$T/diffs" --html "$T/frag.html" \
        "$@" >"$T/out" 2>&1
    _rc=$?
    if [ "$_rc" != "$_want" ] || ! grep -q -e "$_pat" "$T/out"; then
        echo "FAIL $_name: exit $_rc (want $_want), output lacks \"$_pat\":"
        sed 's/^/    /' "$T/out"
        fails=$((fails + 1))
    else
        echo "ok   $_name"
    fi
}

check "identical runs pass" 0 'parity: ok' '' a="$T/a.info" c="$T/a.info"
check "a skipped step fails, naming line and accelerator" 1 \
    'plugins/p.c:5 .*never by b' '' a="$T/a.info" b="$T/b.info" c="$T/c.info"
check "branch-only difference is listed" 1 \
    'plugins/p.c:3  1 branch(es) in p_init: reached by a; never by b,c' \
    'plugins/p.c:5 the step of b' a="$T/a.info" b="$T/b.info" c="$T/c.info"
check "declared by line" 0 'declared differences (coverage/parity.allow): 2' \
    'plugins/p.c:5 b skips it on purpose
plugins/p.c:3 only a takes this branch' a="$T/a.info" b="$T/b.info" c="$T/c.info"
check "declared by /TEXT/" 0 'allowed by' \
    'plugins/p.c:/the_barrier/ b skips it
plugins/p.c:/if (rc)/ branch' a="$T/a.info" b="$T/b.info" c="$T/c.info"
check "/TEXT/+N reaches the following lines" 0 'parity: ok' \
    'plugins/p.c:/connect_all/+3 both differences follow connect_all' \
    a="$T/a.info" b="$T/b.info" c="$T/c.info"
check "declared by function" 0 'parity: ok' 'plugins/p.c:p_init whole function' \
    a="$T/a.info" b="$T/b.info" c="$T/c.info"
check "missed= matching" 0 'parity: ok' \
    'plugins/p.c:5 missed=b b skips it
plugins/p.c:3 only=a a alone' a="$T/a.info" b="$T/b.info" c="$T/c.info"
check "missed= not matching fails" 1 'undeclared differences (the gate fails on these): 1' \
    'plugins/p.c:5 missed=c wrong accelerator
plugins/p.c:3 only=a a alone' a="$T/a.info" b="$T/b.info" c="$T/c.info"
check "only= not matching fails" 1 'plugins/p.c:3 ' \
    'plugins/p.c:5 b skips it
plugins/p.c:3 only=c wrong accelerator' a="$T/a.info" b="$T/b.info" c="$T/c.info"
check "an entry without a reason is an error" 2 'has no reason' \
    'plugins/p.c:5' a="$T/a.info" b="$T/b.info"
check "an unknown function is an error" 2 'has no function' \
    'plugins/p.c:nosuch reason here' a="$T/a.info" b="$T/b.info"
check "an unknown file is an error" 2 'no coverage data' \
    'plugins/gone.c:* reason here' a="$T/a.info" b="$T/b.info"
check "a stale entry is a warning" 0 'matches no difference' \
    'plugins/p.c:7 rank 0 only' a="$T/a.info" c="$T/a.info"
check "--require catches an accelerator that never ran" 1 'b never ran plugins/p.c:p_init' '' \
    --require plugins/p.c:p_init a="$T/a.info" b="$T/base.info"
check "summary counts over the baseline" 0 'lines 100.0% (6/6)' '' \
    a="$T/a.info" c="$T/a.info"
check "differences outside the gate are informational" 0 '== differences outside the gate (informational): 0' '' \
    --inform core/ a="$T/a.info" c="$T/a.info"
check "missing tracefile is bad input" 2 'cannot read' '' a="$T/nothing.info"
check "html fragment written" 0 'parity: ok' '' a="$T/a.info" c="$T/a.info"
grep -q '<!-- /ddpsim coverage parity -->' "$T/frag.html" ||
    { echo "FAIL html fragment has no end marker"; fails=$((fails + 1)); }
check "diffs file" 1 'FAIL' '' a="$T/a.info" b="$T/b.info" c="$T/c.info"
grep -q "$(printf 'plugins/p.c\t5\tline\tp_init\ta,c\tb\tundeclared')" "$T/diffs" ||
    { echo "FAIL diffs row for line 5 missing"; fails=$((fails + 1)); }

# The page: the matrix of differing lines x accelerators comes first, and
# a source page per file has a count column per accelerator.
n=$((n + 1))
"$PARITY" --root "$R" --baseline "$T/base.info" --matrix plugins/ --html "$T/frag.html" \
    --src-html "$T/parity" a="$T/a.info" b="$T/b.info" c="$T/c.info" >"$T/out" 2>&1
first_table=$(grep -o '<table[^>]*>' "$T/frag.html" | head -n 1)
if [ "$first_table" != '<table id="parity-matrix" style="border-collapse:collapse">' ] ||
    ! grep -q 'never by <b>b</b>' "$T/frag.html" ||
    ! grep -q 'href="parity/plugins/p.c.html#L5"' "$T/frag.html" ||
    ! grep -q '<tr id="L5">.*>4</td>.*>0</td>.*>4</td>' "$T/parity/plugins/p.c.html"; then
    echo "FAIL the page: matrix first, naming b; source page with a column per accelerator"
    fails=$((fails + 1))
else
    echo "ok   the page: matrix first, per-accelerator source pages"
fi
check "headings count entries and their lines" 1 \
    'undeclared differences (the gate fails on these): 2 entries (1 line, 1 branch)' '' \
    a="$T/a.info" b="$T/b.info" c="$T/c.info"

# Cobertura XML from a tracefile: valid against the DTD, the counts of
# lcov --summary (a system header included), an existing file refused.
n=$((n + 1))
if "$COBERTURA" --root "$R" -o "$T/cob.xml" "$T/a.info" >"$T/out" 2>&1 &&
    sh "$ROOT/coverage/cobertura-check.sh" "$T/cob.xml" "$T/a.info" >>"$T/out" 2>&1 &&
    grep -q 'lines-covered="9" lines-valid="9" branches-covered="2" branches-valid="2"' "$T/cob.xml" &&
    ! "$COBERTURA" --root "$R" -o "$T/cob.xml" "$T/a.info" >>"$T/out" 2>&1; then
    echo "ok   cobertura: valid, lcov's counts, no overwrite"
else
    echo "FAIL cobertura:"
    sed 's/^/    /' "$T/out"
    fails=$((fails + 1))
fi

# A plugin library's sources outside the repository (make coverage
# PLUGIN=...): ignored as system headers are, unless --extra-root names
# their tree; then gated like plugins/, by absolute path.
mkdir -p "$T/mine" || exit 2
printf 'int m_init(void) {\n    return step();\n}\n' >"$T/mine/m.c"
mrec() { # mrec COUNT: the record of m.c with line 2 run COUNT times
    printf 'SF:%s/mine/m.c\nFN:1,m_init\nFNDA:1,m_init\nDA:1,1\nDA:2,%s\nend_of_record\n' "$T" "$1"
}
{ cat "$T/base.info"; mrec 0; } >"$T/ebase.info"
{ cat "$T/a.info"; mrec 3; } >"$T/ea.info"
{ cat "$T/a.info"; mrec 0; } >"$T/eb.info"
check "a tree outside --root is ignored" 0 'parity: ok' '' \
    --baseline "$T/ebase.info" a="$T/ea.info" b="$T/eb.info"
check "--extra-root gates it by absolute path" 1 "$T/mine/m.c:2 .*never by b" '' \
    --extra-root "$T/mine" --gate plugins/ --gate "$T/mine/" --baseline "$T/ebase.info" \
    a="$T/ea.info" b="$T/eb.info"

echo "parity selftest: $n cases, $fails failed"
[ $fails -eq 0 ]
