#!/bin/sh
# tests/layers/selftest.sh [BUILD_DIR] — scripts/check-layers.sh must fail
# on a planted include and on a planted call that go against the layers,
# and pass on the tree as it is. Run by `make test`.
set -eu
cd "$(dirname "$0")/../.."
B=${1:-build/default}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "layers selftest: FAIL: $*"; exit 1; }

copy() { # a copy of the sources, headers and objects
    rm -rf "$tmp/t" && mkdir -p "$tmp/t"
    cp -r include scripts core backends plugins accelerators sim harness tools "$tmp/t/"
    for d in core backends plugins accelerators sim harness tools; do
        mkdir -p "$tmp/t/$B/$d"
        cp "$B/$d"/*.o "$tmp/t/$B/$d/"
    done
}

sh scripts/check-layers.sh "$B" >/dev/null || fail "the tree itself does not pass"

copy
sed -i '1i #include "ddp/plugin.h"' "$tmp/t/sim/sim_trace.c"
out=$(sh "$tmp/t/scripts/check-layers.sh" "$B" 2>&1) && fail "a sim file including ddp/plugin.h passed"
echo "$out" | grep -q 'sim/sim_trace.c (sim) includes ddp/plugin.h (plugins)' ||
    fail "the include violation is not named: $out"

copy
printf '#include "ddp/sim.h"\nvoid planted(void);\nvoid planted(void) { ddp_sim_run(0); }\n' \
    >"$tmp/t/core/planted.c"
${CC:-cc} -Iinclude -c "$tmp/t/core/planted.c" -o "$tmp/t/$B/core/planted.o"
out=$(sh "$tmp/t/scripts/check-layers.sh" "$B" 2>&1) && fail "core calling ddp_sim_run passed"
echo "$out" | grep -q 'core calls into sim: ddp_sim_run' || fail "the call is not named: $out"
echo "$out" | grep -q 'core/planted.c (core) includes ddp/sim.h (sim)' ||
    fail "the planted include is not named: $out"
copy
printf '#include <dlfcn.h>\nvoid *planted(void);\nvoid *planted(void) { return dlopen("x.so", RTLD_NOW); }\n' \
    >"$tmp/t/plugins/planted.c"
${CC:-cc} -Iinclude -c "$tmp/t/plugins/planted.c" -o "$tmp/t/$B/plugins/planted.o"
out=$(sh "$tmp/t/scripts/check-layers.sh" "$B" 2>&1) && fail "a plugin calling dlopen passed"
echo "$out" | grep -q 'plugins/planted.o calls the dynamic loader (dlopen' ||
    fail "the dlopen call is not named: $out"
echo "layers selftest: ok (a planted include, a planted call and a planted dlopen are caught)"
