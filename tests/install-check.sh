#!/bin/sh
# tests/install-check.sh — checks that `make install` gives a usable library.
#
# Installs into a fresh temporary prefix, then, using only pkg-config and the
# installed files:
#   1. compiles and links a tiny program against the installed STATIC
#      library (pkg-config --static), runs it, and checks that it really is
#      static (no libddpsim.so in its NEEDED entries);
#   2. links the same program against the installed shared library and runs
#      it with LD_LIBRARY_PATH pointing at the prefix;
#   3. runs the installed `ddpsim --version`;
#   4. renders the installed manual page share/man/man1/ddpsim.1 with
#      `man --warnings -l` (groff where man is absent): no warning.
# Removes the prefix afterwards. Exit status: 0 pass, 1 a check failed.
#
#   sh tests/install-check.sh            (from anywhere; uses $CC, default cc)
#   KEEP=1 sh tests/install-check.sh     (keep the temporary prefix)
set -eu

cd "$(dirname "$0")/.."
CC=${CC:-cc}
MAKE=${MAKE:-make}

fail() {
    echo "install-check: FAIL: $*" >&2
    exit 1
}

command -v pkg-config >/dev/null 2>&1 || fail "pkg-config is not installed"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddpsim-install-check.XXXXXX")
cleanup() {
    if [ "${KEEP:-0}" = 1 ]; then
        echo "install-check: kept $tmp"
    else
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT INT TERM
prefix=$tmp/prefix

echo "install-check: make install PREFIX=$prefix"
$MAKE install PREFIX="$prefix" >"$tmp/install.log" 2>&1 || {
    cat "$tmp/install.log" >&2
    fail "make install failed"
}

for f in lib/libddpsim.a lib/libddpsim.so lib/libddpsim.so.0 \
         lib/pkgconfig/ddpsim.pc include/ddp/err.h bin/ddpsim; do
    [ -e "$prefix/$f" ] || fail "$prefix/$f was not installed"
done

PKG_CONFIG_PATH=$prefix/lib/pkgconfig
export PKG_CONFIG_PATH
cflags=$(pkg-config --cflags ddpsim) || fail "pkg-config --cflags ddpsim"
libs=$(pkg-config --libs ddpsim) || fail "pkg-config --libs ddpsim"
slibs=$(pkg-config --static --libs ddpsim) || fail "pkg-config --static --libs ddpsim"
echo "install-check: pkg-config --cflags: $cflags"
echo "install-check: pkg-config --static --libs: $slibs"

cat >"$tmp/prog.c" <<'EOF'
#include <stdio.h>
#include <string.h>

#include <ddp/err.h>

int main(void)
{
    const char *s = ddp_strerror(DDP_ETIMEOUT);
    const char *n = ddp_err_name(DDP_ETIMEOUT);
    printf("%s: %s\n", n, s);
    return strcmp(s, "deadline expired") == 0 &&
                   strcmp(n, "DDP_ETIMEOUT") == 0
               ? 0
               : 1;
}
EOF

# 1. Static. With both libddpsim.a and libddpsim.so in libdir, the linker
# prefers the .so for -lddpsim even with pkg-config --static (which only adds
# Libs.private); -Bstatic around -lddpsim makes it take the archive.
static_libs=$(printf '%s\n' "$slibs" |
    sed 's/-lddpsim/-Wl,-Bstatic -lddpsim -Wl,-Bdynamic/')
# shellcheck disable=SC2086 # word splitting of the flags is intended
$CC -std=c11 $cflags -o "$tmp/prog-static" "$tmp/prog.c" $static_libs ||
    fail "linking against the installed static library"
if readelf -d "$tmp/prog-static" 2>/dev/null | grep -q 'libddpsim\.so'; then
    fail "prog-static is linked against libddpsim.so, not the archive"
fi
out=$("$tmp/prog-static") || fail "prog-static ran and failed: $out"
echo "install-check: static:  $out"

# 2. Shared.
# shellcheck disable=SC2086
$CC -std=c11 $cflags -o "$tmp/prog-shared" "$tmp/prog.c" $libs ||
    fail "linking against the installed shared library"
out=$(LD_LIBRARY_PATH=$prefix/lib "$tmp/prog-shared") ||
    fail "prog-shared ran and failed: $out"
echo "install-check: shared:  $out"

# 3. The installed shared library exports exactly the public headers'
# DDP_API functions.
out=$(sh tests/exports-check.sh "$prefix/lib/libddpsim.so") || fail "$out"
echo "install-check: $out"

# 4. The installed command.
out=$("$prefix/bin/ddpsim" --version) || fail "installed ddpsim --version"
echo "install-check: command: $out"

# 5. The manual page (go-md2man from docs/ddpsim.1.md) renders without a
# troff warning and holds the command's sections.
page=$prefix/share/man/man1/ddpsim.1
[ -s "$page" ] || fail "$page was not installed"
if command -v man >/dev/null 2>&1; then
    warn=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >"$tmp/man.txt") ||
        fail "man -l $page failed: $warn"
elif command -v groff >/dev/null 2>&1; then
    warn=$(groff -k -man -Tutf8 -t -ww "$page" 2>&1 >"$tmp/man.txt") ||
        fail "groff -man $page failed: $warn"
else
    fail "neither man nor groff is installed to render $page"
fi
[ -z "$warn" ] || fail "rendering $page warns: $warn"
for s in NAME SYNOPSIS 'EXIT STATUS' 'ddpsim run'; do
    grep -q "$s" "$tmp/man.txt" || fail "the rendered manual page lacks \"$s\""
done
echo "install-check: man page: $(grep -c '' "$tmp/man.txt") lines, no warning"

echo "install-check: PASS"
