#!/bin/sh
# tests/example-test.sh — the example plugin of examples/stages, built the
# way a user builds one: a plugin library (libstages.so, exporting
# ddp_plugin_v1) compiled against the INSTALLED headers through pkg-config,
# then run by the INSTALLED ddpsim (docs/plugin.md): its scenarios under
# every accelerator (their plugin-library line loads it), as real processes
# under one accelerator (each process loads it from its plan), and with
# --plugin over a scenario that names no plugin. Installs into a temporary
# prefix and builds in a temporary copy of the example; removes both. Run
# by `make test`.
set -eu
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddpsim-example.XXXXXX")
trap '[ "${KEEP:-0}" = 1 ] || rm -rf "$tmp"' EXIT INT TERM
fail() { echo "example-test: FAIL: $*"; exit 1; }

$MAKE --no-print-directory install PREFIX="$tmp/prefix" >"$tmp/install.log" 2>&1 || {
    cat "$tmp/install.log"
    fail "make install failed"
}
cp -r examples/stages "$tmp/stages"
cp -r scenarios "$tmp/scenarios"
PKG_CONFIG_PATH=$tmp/prefix/lib/pkgconfig
export PKG_CONFIG_PATH
ddpsim=$tmp/prefix/bin/ddpsim
$MAKE --no-print-directory -C "$tmp/stages" libstages.so >"$tmp/build.log" 2>&1 || {
    cat "$tmp/build.log"
    fail "the example does not build against the installed headers"
}
lib=$tmp/stages/libstages.so
nm -D --defined-only "$lib" | grep -q ' ddp_plugin_v1$' ||
    fail "libstages.so does not export ddp_plugin_v1"
# Its ddp_* calls are the installed command's own, not a second library's.
if readelf -d "$lib" | grep -q 'libddpsim'; then
    fail "libstages.so needs libddpsim.so: build it without -lddpsim"
fi

# 1. make check: the installed ddpsim, each scenario's plugin-library line.
$MAKE --no-print-directory -C "$tmp/stages" check DDPSIM="$ddpsim" >"$tmp/out" 2>&1 ||
    { cat "$tmp/out"; fail "the example's scenarios did not all pass"; }
cat "$tmp/out"
grep -q '^12 run(s) of 2 scenario file(s): 12 ok, 0 failed' "$tmp/out" ||
    fail "expected 12 passing runs (2 scenarios x 6 accelerators)"

# 2. Real processes: the installed ddpsim's children load the library too
# (on a free port: other runs on this machine may hold the default one).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') ||
    fail "python3 could not pick a free port"
for f in stages-clean stages-crash-in-split; do
    { cat "$tmp/stages/$f.scn"; echo "port $port"; } >"$tmp/stages/$f-real.scn"
done
(cd "$tmp/stages" && "$ddpsim" run --real --accelerator ddp_cpu --no-progress \
    stages-clean-real.scn stages-crash-in-split-real.scn) >"$tmp/real" 2>&1 ||
    { cat "$tmp/real"; fail "the example's scenarios did not pass as real processes"; }
grep -q '^2 run(s) of 2 scenario file(s): 2 ok, 0 failed' "$tmp/real" ||
    { cat "$tmp/real"; fail "expected 2 passing real runs"; }

# 3. --plugin PATH: a scenario that names no plugin runs this one (from
# another folder: the path is the command line's, not the scenario's).
(cd "$tmp" && "$ddpsim" run --plugin stages/libstages.so --no-progress \
    scenarios/clean-start.scn --junit j.xml) >"$tmp/plug" 2>&1 ||
    { cat "$tmp/plug"; fail "scenarios/clean-start.scn with --plugin stages/libstages.so"; }
grep -q '^6 run(s) of 1 scenario file(s): 6 ok, 0 failed' "$tmp/plug" ||
    { cat "$tmp/plug"; fail "expected 6 passing runs with --plugin"; }
[ "$(grep -c '<testcase ' "$tmp/j.xml")" -eq 6 ] || fail "expected 6 JUnit testcases"
echo "example-test: ok (examples/stages as a plugin library, run by the installed ddpsim:" \
     "12 simulated, 2 real, 6 with --plugin)"
