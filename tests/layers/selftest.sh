#!/bin/sh
# tests/layers/selftest.sh [BUILD_DIR] — scripts/check-layers.sh must pass
# on the tree as it is, and fail on a copy with planted violations, naming
# each: an include and a call against the layers, an include out of its
# room ("../harness/x.h"), a private header in a public one, a dlopen, a
# clock_gettime and a setrlimit outside the POSIX sys. Run by `make test`.
#
# One copy, all plants, one run of the check: the check is a few processes
# over all files at once, so two runs take about a second (four copies and
# four runs of the old per-file check took minutes on a loaded host).
set -eu
cd "$(dirname "$0")/../.."
B=${1:-build/default}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "layers selftest: FAIL: $*"; exit 1; }

sh scripts/check-layers.sh "$B" >/dev/null || fail "the tree itself does not pass"

# A copy of the sources, headers and objects.
mkdir -p "$tmp/t"
cp -r include scripts core backends plugins accelerators sim harness tools "$tmp/t/"
for d in core backends plugins accelerators sim harness tools; do
    mkdir -p "$tmp/t/$B/$d"
    cp "$B/$d"/*.o "$tmp/t/$B/$d/"
done
plant() { # LAYER NAME SOURCE: a source file and its object in the copy
    printf '%s\n' "$3" >"$tmp/t/$1/$2.c"
    ${CC:-cc} -Iinclude -c "$tmp/t/$1/$2.c" -o "$tmp/t/$B/$1/$2.o"
}
sed -i '1i #include "ddp/plugin.h"' "$tmp/t/sim/sim_trace.c"
# Another room's private header: by a path out of the room (refused
# whatever the direction), from the top against the layers, in a public header.
sed -i '1i #include "../harness/x.h"' "$tmp/t/core/err.c"
sed -i '1i #include "../../core/kvmap.h"' "$tmp/t/tools/opt.c"
sed -i '1i #include "harness/progress.h"' "$tmp/t/core/log.c"
sed -i '1i #include "core/kvmap.h"' "$tmp/t/include/ddp/err.h"
# The host's header in code that runs on a rank's sys.
sed -i '1i #include "ddp/host.h"' "$tmp/t/plugins/ddp_plugin.c"
plant core planted '#include "ddp/sim.h"
void planted(void);
void planted(void) { ddp_sim_run(0); }'
plant plugins planted_dl '#include <dlfcn.h>
void *planted_dl(void);
void *planted_dl(void) { return dlopen("x.so", RTLD_NOW); }'
plant harness planted_clock '#include <time.h>
long planted_clock(void);
long planted_clock(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec; }'
plant core planted_limit '#include <sys/resource.h>
int planted_limit(void);
int planted_limit(void) { struct rlimit r = {64, 64}; return setrlimit(RLIMIT_NOFILE, &r); }'

out=$(sh "$tmp/t/scripts/check-layers.sh" "$B" 2>&1) && fail "a tree with planted violations passed"
want() { # TEXT WHAT: the check's output must name TEXT
    case $out in *"$1"*) ;; *) fail "$2 is not named: $out" ;; esac
}
want 'sim/sim_trace.c (sim) includes ddp/plugin.h (plugins)' "a sim file including ddp/plugin.h"
want 'core/planted.c (core) includes ddp/sim.h (sim)' "core including ddp/sim.h"
want 'core/err.c includes "../harness/x.h", out of its room: name it from the top ("harness/x.h"' \
    "a core file including ../harness/x.h"
want 'tools/opt.c includes "../../core/kvmap.h", out of its room' "a tools file including ../../core/kvmap.h"
want 'core/log.c (core) includes harness/progress.h (harness)' "a core file including harness/progress.h"
want 'include/ddp/err.h (public) includes "core/kvmap.h", a private header' \
    "a public header including core/kvmap.h"
want 'plugins/ddp_plugin.c (plugins) includes ddp/host.h: code that runs on a rank' \
    "a plugin including ddp/host.h"
want 'core calls into sim: ddp_sim_run' "core calling ddp_sim_run"
want 'plugins/planted_dl.o calls the dynamic loader (dlopen' "a plugin calling dlopen"
want 'harness/planted_clock.o calls the OS (clock_gettime' "harness calling clock_gettime"
want 'core/planted_limit.o calls the OS (setrlimit' "a core file outside the POSIX sys calling setrlimit"
echo "layers selftest: ok (planted includes, a call, a dlopen, a clock read and a limit change are caught)"
