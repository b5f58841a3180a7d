#!/bin/sh
# tests/exports-check.sh SHARED_LIB — libddpsim.so exports exactly the
# public API: the functions the public headers (include/ddp/*.h) declare
# with DDP_API, no more (no internal ddp__* or helper leaks out) and no
# fewer (every declared function is defined and exported). Also: every
# function a public header declares is marked DDP_API. Run by
# tests/install-check.sh and `make test`.
set -eu
cd "$(dirname "$0")/.."
lib=${1:?usage: tests/exports-check.sh path/to/libddpsim.so}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# Prototypes at the start of a line of a public header (not static inline,
# typedef, macro or member).
decls() {
    awk '/^(static|typedef|extern|#|[ \t}\/]|enum |struct |union )/ { next }
         { if (match($0, /ddp_[a-z0-9_]+[ \t]*\(/)) {
               n = substr($0, RSTART, RLENGTH); sub(/[ \t]*\($/, "", n);
               print FILENAME ":" FNR ":" ($1 == "DDP_API" ? "api" : "bare") ":" n } }' \
        include/ddp/*.h
}
decls >"$tmp/decls"
if grep -q ':bare:' "$tmp/decls"; then
    echo "exports-check: declared without DDP_API (so not exported):"
    grep ':bare:' "$tmp/decls" | sed 's/:bare:/: /; s/^/  /'
    fail=1
fi
cut -d: -f4 "$tmp/decls" | sort -u >"$tmp/declared"
nm -D --defined-only "$lib" | awk '$2 ~ /^[TWDBRVi]$/ { print $3 }' |
    grep -v '^_' | sed 's/@.*//' | sort -u >"$tmp/exported"
extra=$(comm -13 "$tmp/declared" "$tmp/exported")
missing=$(comm -23 "$tmp/declared" "$tmp/exported")
if [ -n "$extra" ]; then
    echo "exports-check: exported but not in a public header: $(echo $extra)"
    fail=1
fi
if [ -n "$missing" ]; then
    echo "exports-check: declared in a public header but not exported: $(echo $missing)"
    fail=1
fi
[ $fail -eq 0 ] && echo "exports-check: ok: $(wc -l <"$tmp/exported") functions exported, exactly the public headers' DDP_API declarations"
exit $fail
