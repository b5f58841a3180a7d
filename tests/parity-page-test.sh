#!/bin/sh
# tests/parity-page-test.sh — the coverage parity page in headless Debian
# chromium (.ci/run; docs/coverage.md § 4). The page is the parity tool's,
# on the hand-written tracefiles of coverage/selftest.sh (accelerator b
# skips a step; a branch only a takes). Checks, on what chromium renders at
# its default window size:
#   - the first table of the page is the matrix of differing lines x
#     accelerators, and it ends within the first screen;
#   - each differing line's row names the accelerators that miss it;
#   - the linked source page has a count column per accelerator;
#   - a screenshot is written and is not blank.
# Without chromium: one line, success.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$ROOT" || exit 2
CHROMIUM=""
for c in chromium chromium-browser; do
    command -v "$c" >/dev/null 2>&1 && { CHROMIUM=$c; break; }
done
if [ -z "$CHROMIUM" ]; then
    echo "parity-page-test: skipped: no chromium here (sh scripts/deps.sh --chromium)"
    exit 0
fi
make -s --no-print-directory build/coverage/parity >/dev/null || exit 2
T=$(mktemp -d "${TMPDIR:-/tmp}/ddpsim-parity-page.XXXXXX") || exit 2
trap 'rm -rf "$T"' EXIT INT TERM
PARITY=build/coverage/parity sh coverage/selftest.sh --page "$T/page" || exit 2

# Where the matrix ends, measured by the page itself in chromium: a script
# appended to the copy under test writes it into the DOM that --dump-dom
# prints.
cat >>"$T/page/index.html" <<'EOF'
<script>
var m = document.getElementById("parity-matrix");
document.body.setAttribute("data-matrix-bottom",
    m ? Math.ceil(m.getBoundingClientRect().bottom) : -1);
document.body.setAttribute("data-screen-height", window.innerHeight);
</script>
EOF
chrome() {
    timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$T/profile" "$@" 2>>"$T/chromium.log"
}
fails=0
bad() { echo "parity-page-test: FAIL: $*"; fails=$((fails + 1)); }

chrome --dump-dom "file://$T/page/index.html" >"$T/dom.html" ||
    { cat "$T/chromium.log"; bad "chromium --dump-dom failed"; exit 1; }
first=$(grep -o '<table[^>]*>' "$T/dom.html" | head -n 1)
case $first in
*'id="parity-matrix"'*) ;;
*) bad "the first table is not the matrix of differing lines: $first" ;;
esac
bottom=$(sed -n 's/.*data-matrix-bottom="\([-0-9]*\)".*/\1/p' "$T/dom.html")
height=$(sed -n 's/.*data-screen-height="\([0-9]*\)".*/\1/p' "$T/dom.html")
if [ -z "$bottom" ] || [ -z "$height" ] || [ "$bottom" -lt 0 ] || [ "$bottom" -gt "$height" ]; then
    bad "the matrix does not end within the first screen (bottom ${bottom:-?} px, screen ${height:-?} px)"
fi
# One row per entry: line 5 (b skips the step) and line 3's branch (only a).
matrix=$(sed -n '/id="parity-matrix"/,/<\/table>/p' "$T/dom.html")
for want in 'p.c:5</a>.*never by <b>b</b>' 'p.c:3</a>.*never by <b>b, c</b>'; do
    printf '%s\n' "$matrix" | grep -q "$want" || bad "no matrix row matching \"$want\""
done

chrome --dump-dom "file://$T/page/parity/plugins/p.c.html" >"$T/src.html" ||
    bad "chromium could not open the source page"
grep -q '<b>a</b></td><td[^>]*><b>b</b></td><td[^>]*><b>c</b>' "$T/src.html" ||
    bad "the source page has no column per accelerator"

(cd "$T" && chrome --screenshot="$T/shot.png" "file://$T/page/index.html" >/dev/null)
if [ ! -s "$T/shot.png" ]; then
    bad "no screenshot written"
elif command -v python3 >/dev/null 2>&1; then
    # Not blank: the decoded pixels hold more than a handful of values.
    python3 - "$T/shot.png" <<'EOF' || bad "the screenshot is blank"
import struct, sys, zlib
d = open(sys.argv[1], "rb").read()
i, idat = 8, b""
while i < len(d):
    n, t = struct.unpack(">I4s", d[i:i + 8])
    if t == b"IDAT":
        idat += d[i + 8:i + 8 + n]
    i += 12 + n
sys.exit(0 if len(set(zlib.decompress(idat))) > 16 else 1)
EOF
elif [ "$(wc -c <"$T/shot.png")" -lt 20000 ]; then
    bad "the screenshot is blank (under 20 kB)"
fi

if [ $fails -ne 0 ]; then
    sed 's/^/    /' "$T/page/parity.txt"
    exit 1
fi
echo "parity-page-test: ok: the matrix is the first table and fits the first screen" \
    "(${bottom} of ${height} px); each row names who misses it; a source page per file" \
    "with a column per accelerator; screenshot not blank"
