#!/bin/sh
# tests/check-junit.sh — the checks of `make test` that are not CUnit
# (check-layers, check-exports, check-fault-points-doc, example-test, the
# mutants selftest) in JUnit XML, with their times (docs/testing.md):
#
#   sh tests/check-junit.sh run DIR NAME CMD...   runs CMD (its output shown
#        as usual), records NAME, its status, its seconds and its output in
#        DIR; When CMD fails, writes the file at
#        once (see write), so that a check that stops make is in it.
#   sh tests/check-junit.sh write DIR FILE   FILE: one <testsuite
#        name="make test checks"> with a <testcase> per record of DIR (a
#        failure with the output's last 40 lines where the check failed);
#        then removes DIR. FILE is refused if it exists, and is written
#        through FILE.tmp renamed into place.
#   sh tests/check-junit.sh summary DIR [FILE]   prints each record's wall
#        time, slowest first (the end of `make test`), then write DIR FILE,
#        or without FILE removes DIR.
#
# `make test JUNIT=F.xml` writes F-checks.xml beside F.xml (CUnit's).
# tests/test_junit.c validates what this writes against tests/junit.xsd.
set -u

ms() { date +%s%3N; }

# xml_esc: stdin to stdout, XML-escaped, control characters dropped.
xml_esc() {
    tr -d '\000-\010\013\014\016-\037' |
        sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g'
}

write() {
    _dir=$1 _file=$2
    if [ -e "$_file" ]; then
        echo "check-junit: $_file exists: not overwritten (remove it first)" >&2
        return 1
    fi
    _n=0 _f=0 _t=0
    for _r in "$_dir"/*.rec; do
        [ -f "$_r" ] || continue
        read -r _st _ms <"$_r"
        _n=$((_n + 1))
        [ "$_st" = 0 ] || _f=$((_f + 1))
        _t=$((_t + _ms))
    done
    secs() { awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }'; }
    {
        echo '<?xml version="1.0" encoding="UTF-8"?>'
        echo "<testsuites tests=\"$_n\" failures=\"$_f\" time=\"$(secs $_t)\">"
        echo "  <testsuite name=\"make test checks\" tests=\"$_n\" failures=\"$_f\" time=\"$(secs $_t)\">"
        for _r in "$_dir"/*.rec; do
            [ -f "$_r" ] || continue
            read -r _st _ms <"$_r"
            _name=$(basename "$_r" .rec)
            printf '    <testcase classname="make test" name="%s" time="%s"' \
                "$(printf '%s' "$_name" | xml_esc)" "$(secs "$_ms")"
            if [ "$_st" = 0 ]; then
                echo '/>'
            else
                echo '>'
                printf '      <failure message="%s exited %s">' "$_name" "$_st"
                tail -n 40 "${_r%.rec}.log" | xml_esc
                echo '</failure>'
                echo '    </testcase>'
            fi
        done
        echo '  </testsuite>'
        echo '</testsuites>'
    } >"$_file.tmp" && mv "$_file.tmp" "$_file" || {
        rm -f "$_file.tmp"
        echo "check-junit: writing $_file failed" >&2
        return 1
    }
    rm -rf "$_dir"
}

summary() {
    _dir=$1
    echo "Checks (not CUnit) wall times:"
    for _r in "$_dir"/*.rec; do
        [ -f "$_r" ] || continue
        read -r _st _ms <"$_r"
        awk -v m="$_ms" -v n="$(basename "$_r" .rec)" -v s="$_st" \
            'BEGIN { printf "%d  %8.3f s  %s%s\n", m, m / 1000, n, s == 0 ? "" : "  (FAILED, exit " s ")" }'
    done | sort -rn | cut -d' ' -f2-
}

case ${1:-} in
summary)
    [ $# -ge 2 ] && [ $# -le 3 ] || { echo "usage: check-junit.sh summary DIR [FILE]" >&2; exit 2; }
    summary "$2"
    if [ $# -eq 3 ]; then write "$2" "$3"; else rm -rf "$2"; fi ;;
run)
    [ $# -ge 4 ] || { echo "usage: check-junit.sh run DIR|- NAME CMD..." >&2; exit 2; }
    dir=$2 name=$3
    shift 3
    case $name in *[!A-Za-z0-9_.-]*) echo "check-junit: bad name \"$name\"" >&2; exit 2 ;; esac
    mkdir -p "$dir" || exit 2
    t0=$(ms)
    # The output is shown and kept: through a file, so the status is CMD's.
    "$@" >"$dir/$name.log" 2>&1
    rc=$?
    cat "$dir/$name.log"
    echo "$rc $(($(ms) - t0))" >"$dir/$name.rec"
    if [ $rc -ne 0 ] && [ -n "${CHECK_JUNIT_FILE:-}" ]; then
        write "$dir" "$CHECK_JUNIT_FILE" || true
    fi
    exit $rc ;;
write)
    [ $# -eq 3 ] || { echo "usage: check-junit.sh write DIR FILE" >&2; exit 2; }
    write "$2" "$3" ;;
*)
    echo "usage: check-junit.sh run DIR|- NAME CMD... | write DIR FILE" >&2
    exit 2 ;;
esac
