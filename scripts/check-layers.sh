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
# the public headers; calls from the objects of BUILD_DIR (default
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

# The layer of a public header (include/ddp/NAME.h).
header_layer() {
    case $1 in
    err | env | sys | log | store | cluster | pg | faults | export | fmt | nccl_api) echo core ;;
    plugin) echo plugins ;;
    accel) echo accelerators ;;
    sim) echo sim ;;
    launch | plan | scenario | real | check) echo harness ;;
    *) echo unknown ;;
    esac
}

bad=0
say() { echo "layer violation: $*"; bad=1; }

is_in() { # is word $1 in list $2?
    for w in $2; do [ "$w" = "$1" ] && return 0; done
    return 1
}

check_includes() { # layer file
    layer=$1 file=$2
    for h in $(sed -n 's/^#include "ddp\/\([a-z_]*\)\.h".*/\1/p' "$file"); do
        hl=$(header_layer "$h")
        if [ "$hl" = unknown ]; then
            say "$file includes ddp/$h.h, which has no layer in scripts/check-layers.sh"
        elif ! is_in "$hl" "$(allowed "$layer")"; then
            say "$file ($layer) includes ddp/$h.h ($hl); $layer may use: $(allowed "$layer")"
        fi
    done
}

for layer in $LAYERS; do
    for f in "$layer"/*.c "$layer"/*.h; do
        [ -f "$f" ] && check_includes "$layer" "$f"
    done
done
for f in include/ddp/*.h; do
    n=$(basename "$f" .h)
    check_includes "$(header_layer "$n")" "$f"
done

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
# The dynamic loader is an OS call: only the POSIX sys calls it (its
# lib_* ops for plugin libraries; its nccl_api op, core/sys_posix_nccl.c,
# for libnccl and the CUDA runtime).
for layer in $LAYERS; do
    for o in $(objs "$layer"); do
        case $o in */core/sys_posix.o | */core/sys_posix_nccl.o) continue ;; esac
        dl=$(nm -u "$o" | awk '{ print $NF }' | grep -E '^dl(open|mopen|sym|vsym|close|error)(@.*)?$' |
            tr '\n' ' ') || true
        [ -n "$dl" ] && say "$o calls the dynamic loader ($dl): only the POSIX sys may (ddp_sys_lib_open, ddp_sys_nccl_api)"
    done
done
[ $bad -eq 0 ] && echo "layers ok: $(echo $LAYERS | wc -w) layers, includes and calls follow docs/architecture.md"
exit $bad
