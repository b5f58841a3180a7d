# scripts/progress.sh — the progress line of long work in the scripts
# (sourced: `. scripts/progress.sh`), the same line as the tools'
# (harness/progress.c; tests/test_progress.c compares the two):
#
#   progress_start WHAT UNIT TOTAL   e.g. progress_start coverage runs 14
#   progress_tick DONE [NOTE]        draws when due
#   progress_fmt DONE [NOTE]         prints the line: "coverage 3/14 runs (21%),
#                                    0.2 runs/s, ETA 55s, 15s elapsed; NOTE"
#   progress_end                     erases the terminal's line
#
# On a terminal (stderr) one line redrawn in place; elsewhere a plain line
# on stderr every 10 s, none for shorter work. PROGRESS_MODE=bar|lines|off
# overrides the choice; PROGRESS_NOW (epoch seconds) stands in for the
# clock (tests).
# shellcheck shell=sh

progress_now() { printf '%s\n' "${PROGRESS_NOW:-$(date +%s)}"; }

progress_start() {
    PROGRESS_WHAT=$1 PROGRESS_UNIT=$2 PROGRESS_TOTAL=$3
    PROGRESS_T0=$(progress_now)
    PROGRESS_LAST=$PROGRESS_T0
    PROGRESS_SHOWN=0
    if [ -z "${PROGRESS_MODE:-}" ]; then
        if [ -t 2 ]; then PROGRESS_MODE=bar; else PROGRESS_MODE=lines; fi
    fi
}

progress_fmt() {
    awk -v w="$PROGRESS_WHAT" -v u="$PROGRESS_UNIT" -v d="$1" -v t="$PROGRESS_TOTAL" \
        -v el="$(($(progress_now) - PROGRESS_T0))" -v note="${2:-}" '
        function dur(s,  x) {
            x = int(s + 0.5)
            if (x >= 3600) return sprintf("%dh%02dm", int(x / 3600), int(x % 3600 / 60))
            if (x >= 60) return sprintf("%dm%02ds", int(x / 60), x % 60)
            return sprintf("%ds", x)
        }
        BEGIN {
            r = 0; if (el > 0) r = d / el
            eta = "?"; if (d >= t) eta = "0s"; else if (d > 0 && r > 0) eta = dur((t - d) / r)
            p = 100; if (t > 0) p = int(d * 100 / t)
            tail = ""; if (note != "") tail = "; " note
            printf "%s %d/%d %s (%d%%), %.1f %s/s, ETA %s, %s elapsed%s\n", w, d, t, u,
                p, r, u, eta, dur(el), tail
        }'
}

progress_tick() {
    case $PROGRESS_MODE in
    bar)
        printf '\r\033[K%s' "$(progress_fmt "$@")" >&2
        PROGRESS_SHOWN=1 ;;
    lines)
        _pn=$(progress_now)
        if [ $((_pn - PROGRESS_LAST)) -ge 10 ]; then
            progress_fmt "$@" >&2
            PROGRESS_LAST=$_pn
        fi ;;
    esac
}

progress_end() {
    [ "$PROGRESS_SHOWN" = 1 ] && printf '\r\033[K' >&2
    PROGRESS_SHOWN=0
}
