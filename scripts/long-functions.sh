#!/bin/sh
# scripts/long-functions.sh — the longest functions (docs/testing.md).
#
#   sh scripts/long-functions.sh [N]        functions over N lines (100),
#                                           longest first: LINES FILE:LINE NAME
#   sh scripts/long-functions.sh --check    exit 1 when more than 6 are over
#                                           100 lines or any is over 150
#
# Every tracked .c file. A function is a line at column 0 that starts with
# a name and holds a '(' (not a declaration: no ';' at its end), up to the
# next '}' at column 0: the tree's format (.clang-format) puts both there.
cd "$(dirname "$0")/.." || exit 2
list() {
    git ls-files '*.c' | while read -r f; do
        awk -v f="$f" -v n="$1" '
            /^[A-Za-z_].*\(/ && !/;[ \t]*$/ { name = $0; start = NR }
            /^}/ && start {
                len = NR - start + 1
                if (len > n) {
                    sub(/\(.*/, "", name); sub(/.*[ *]/, "", name)
                    print len, f ":" start, name
                }
                start = 0
            }' "$f"
    done | sort -rn
}
if [ "${1:-}" = --check ]; then
    over=$(list 100 | wc -l) worst=$(list 100 | head -1)
    if [ "$over" -gt 6 ] || [ "${worst%% *}" -gt 150 ] 2>/dev/null; then
        echo "long-functions: $over function(s) over 100 lines (at most 6), the longest" \
             "${worst:-none} (at most 150): cut the longest into named steps" >&2
        list 100 >&2
        exit 1
    fi
    exit 0
fi
list "${1:-100}"
