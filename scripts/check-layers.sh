#!/bin/sh
# scripts/check-layers.sh [BUILD_DIR] — the dependency direction of
# docs/architecture.md, checked on includes and on calls:
#
#   core <- backends <- plugins <- accelerators <- harness <- tools
#   core <- sim <- harness
#
# A layer may include the headers of, and call functions defined in, the
# layers to its left only (and itself); sim names nothing of backends,
# plugins, accelerators or harness. Includes are read from the sources and
# the public headers: a public one ("ddp/NAME.h"), or another room's
# private one named from the top of the tree ("core/kvmap.h": the Makefile's
# -iquote .), both checked for direction; an include that climbs out of its
# room ("../core/kvmap.h") is refused, as is a public header naming a
# private one (it would not be installed). ddp/host.h (the host's process,
# files and /proc) is core's but not for backends, plugins and accelerators:
# they run on a rank's sys. Calls from the objects of BUILD_DIR (default
# build/default: `make` first): every undefined symbol of a layer's object
# must be defined by an allowed layer's objects (or outside the library).
# Exit 1 with one line per violation; 0 when clean. Run by `make test`.
set -eu
cd "$(dirname "$0")/.."
B=${1:-build/default}
LAYERS="core backends plugins accelerators sim harness tools"

allowed() { # the layers $1 may depend on
    case $1 in
    core) echo "core" ;;
    backends) echo "core backends" ;;
    plugins) echo "core backends plugins" ;;
    accelerators) echo "core backends plugins accelerators" ;;
    sim) echo "core sim" ;;
    harness) echo "core backends plugins accelerators sim harness" ;;
    tools) echo "core backends plugins accelerators sim harness tools" ;;
    esac
}

bad=0
say() { echo "layer violation: $*"; bad=1; }

is_in() { # is word $1 in list $2?
    for w in $2; do [ "$w" = "$1" ] && return 0; done
    return 1
}

# The layer of each public header (include/ddp/NAME.h), NAME=LAYER.
HEADERS="err=core;env=core;sys=core;log=core;store=core;cluster=core;pg=core;faults=core;\
export=core;fmt=core;nccl_api=core;host=core;plugin=plugins;accel=accelerators;sim=sim;launch=harness;\
plan=harness;scenario=harness;real=harness;check=harness"

# Includes: one grep and one awk over every source and public header (a
# process per file and per include made this take minutes on a loaded host).
ALLOWED=""
for layer in $LAYERS; do ALLOWED="$ALLOWED$layer=$(allowed "$layer");"; done
files=""
for layer in $LAYERS; do
    for f in "$layer"/*.c "$layer"/*.h; do [ -f "$f" ] && files="$files $f"; done
done
# shellcheck disable=SC2086
inc=$(grep -HE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"(ddp/|\.\./|(core|backends|plugins|accelerators|sim|harness|tools)/)' \
    $files include/ddp/*.h /dev/null |
    awk -v allowed="$ALLOWED" -v headers="$HEADERS" '
    function table(text, into,    n, i, kv, rows) {
        n = split(text, rows, ";")
        for (i = 1; i <= n; i++)
            if (split(rows[i], kv, "=") == 2)
                into[kv[1]] = kv[2]
    }
    BEGIN { table(allowed, may); table(headers, hl) }
    {
        file = $0; sub(/:.*/, "", file)
        path = $0; sub(/^[^"]*"/, "", path); sub(/".*/, "", path)
        layer = file; sub(/\/.*/, "", layer) # its folder ...
        if (file ~ /^include\/ddp\//) {     # ... or its public header name
            l = file; sub(/^include\/ddp\//, "", l); sub(/\.h$/, "", l)
            layer = (l in hl) ? hl[l] : "unknown"
        }
        if (path ~ /^\.\.\//) {
            top = path; gsub(/^(\.\.\/)+/, "", top)
            print file " includes \"" path "\", out of its room: name it from the top " \
                "(\"" top "\", checked here) or include a public header (\"ddp/NAME.h\")"
            next
        }
        if (path !~ /^ddp\//) {              # another room\047s private header
            if (file ~ /^include\//) {
                print file " (public) includes \"" path "\", a private header that is " \
                    "not installed: move what it needs into a public header"
                next
            }
            to = path; sub(/\/.*/, "", to)
            if ((" " may[layer] " ") !~ (" " to " "))
                print file " (" layer ") includes " path " (" to "); " layer " may use: " \
                    may[layer]
            next
        }
        hd = path; sub(/^ddp\//, "", hd); sub(/\.h$/, "", hd)
        if (hd == "host" && layer ~ /^(backends|plugins|accelerators)$/)
            print file " (" layer ") includes ddp/host.h: code that runs on a rank\047s sys " \
                "uses ddp/sys.h alone (the simulator cannot answer the host\047s questions)"
        else if (!(hd in hl))
            print file " includes ddp/" hd ".h, which has no layer in scripts/check-layers.sh"
        else if ((" " may[layer] " ") !~ (" " hl[hd] " "))
            print file " (" layer ") includes ddp/" hd ".h (" hl[hd] "); " layer \
                " may use: " may[layer]
    }')
[ -z "$inc" ] || { printf '%s\n' "$inc" | sed 's/^/layer violation: /'; bad=1; }

# Calls: symbols defined per layer, then each layer's undefined ones.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
objs() { # the objects of a layer's current sources
    for s in "$1"/*.c; do
        [ -f "$s" ] || continue
        o="$B/${s%.c}.o"
        if [ ! -f "$o" ]; then
            echo "check-layers: $o is missing: build first (make)" >&2
            exit 2
        fi
        echo "$o"
    done
}
for layer in $LAYERS; do
    o=$(objs "$layer")
    : >"$tmp/def.$layer"
    : >"$tmp/und.$layer"
    [ -n "$o" ] || continue
    # shellcheck disable=SC2086
    nm --defined-only -g $o | awk 'NF == 3 { print $3 }' | sort -u >"$tmp/def.$layer"
    # shellcheck disable=SC2086
    nm -u $o | awk '{ print $NF }' | sort -u >"$tmp/und.$layer"
done
for layer in $LAYERS; do
    for other in $LAYERS; do
        is_in "$other" "$(allowed "$layer")" && continue
        used=$(comm -12 "$tmp/und.$layer" "$tmp/def.$other" | tr '\n' ' ')
        [ -n "$used" ] && say "$layer calls into $other: $used"
    done
done
# The OS: only the POSIX sys (core/sys_posix*.c) calls the clock, sockets,
# processes, resource limits, the environment and the dynamic loader (its lib_* ops for
# plugin libraries; its nccl_api op, core/sys_posix_nccl.c, for libnccl and
# the CUDA runtime; its guard, core/sys_posix_guard.c); the rest reaches them through the sys seam
# (docs/architecture.md § 1). One exception, named here: harness/explore.c
# reads the monotonic clock for a sweep's wall times (its own module).
OS_CALLS='clock_gettime|clock_nanosleep|nanosleep|gettimeofday|time|usleep|sleep'
OS_CALLS="$OS_CALLS|getenv|secure_getenv|setenv|putenv|unsetenv|getaddrinfo"
OS_CALLS="$OS_CALLS|socket|connect|accept|accept4|bind|listen"
OS_CALLS="$OS_CALLS|fork|vfork|execv|execve|execvp|posix_spawn|posix_spawnp|waitpid"
OS_CALLS="$OS_CALLS|getrlimit|setrlimit|getrlimit64|setrlimit64|prlimit|prlimit64"
all=""
for layer in $LAYERS; do all="$all $(objs "$layer")"; done
# shellcheck disable=SC2086
os=$(nm -u -A $all | awk -v calls="^(${OS_CALLS})(@.*)?$" '
    { o = $1; sub(/:$/, "", o); sym = $NF; base = sym; sub(/@.*/, "", base) }
    o ~ /\/core\/sys_posix(_[a-z]+)?\.o$/ { next }
    function add(list, sym) { return list == "" ? sym : list " " sym }
    base ~ /^dl(open|mopen|sym|vsym|close|error)$/ { dl[o] = add(dl[o], sym); next }
    base == "clock_gettime" && o ~ /\/harness\/explore\.o$/ { next }
    base ~ calls { os[o] = add(os[o], sym) }
    END {
        for (o in dl)
            print o " calls the dynamic loader (" dl[o] "): only the POSIX sys may " \
                "(ddp_sys_lib_open, ddp_sys_nccl_api)"
        for (o in os)
            print o " calls the OS (" os[o] "): only the POSIX sys may; use the sys " \
                "seam (include/ddp/sys.h: ddp_sys_now, ddp_sys_host_now, ...)"
    }' | sort)
[ -z "$os" ] || { printf '%s\n' "$os" | sed 's/^/layer violation: /'; bad=1; }
[ $bad -eq 0 ] && echo "layers ok: $(echo $LAYERS | wc -w) layers, includes and calls follow docs/architecture.md"
exit $bad
