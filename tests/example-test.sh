#!/bin/sh
# tests/example-test.sh [BUILD_DIR] — the example plugin of examples/stages,
# built the way a user builds it: against the INSTALLED library, through
# pkg-config, then run in the simulator under every accelerator
# (docs/plugin.md). Installs into a temporary prefix and builds in a
# temporary copy of the example; removes both. Run by `make test`.
set -eu
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddpsim-example.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
fail() { echo "example-test: FAIL: $*"; exit 1; }

$MAKE --no-print-directory install PREFIX="$tmp/prefix" >"$tmp/install.log" 2>&1 || {
    cat "$tmp/install.log"
    fail "make install failed"
}
cp -r examples/stages "$tmp/stages"
PKG_CONFIG_PATH=$tmp/prefix/lib/pkgconfig
LD_LIBRARY_PATH=$tmp/prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_PATH LD_LIBRARY_PATH
$MAKE --no-print-directory -C "$tmp/stages" run_stages >"$tmp/build.log" 2>&1 || {
    cat "$tmp/build.log"
    fail "the example does not build against the installed library"
}
# It must be the installed shared library it runs on, not a copy of ours.
ldd "$tmp/stages/run_stages" | grep -q "$tmp/prefix/lib/libddpsim.so" ||
    fail "run_stages is not linked against the installed libddpsim.so"
(cd "$tmp/stages" && ./run_stages stages-clean.scn stages-crash-in-split.scn) >"$tmp/out" 2>&1 ||
    { cat "$tmp/out"; fail "the example's scenarios did not all pass"; }
cat "$tmp/out"
runs=$(grep -c ' PASS ' "$tmp/out")
[ "$runs" -eq 12 ] || fail "expected 12 passing runs (2 scenarios x 6 accelerators), got $runs"
echo "example-test: ok (examples/stages against the installed library, $runs runs)"
