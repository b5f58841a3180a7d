# tests/real/lib.sh — what the real-launcher tests share; sourced by each
# (`. "$root/tests/real/lib.sh"` after setting root and test, the test's
# name):
#   $ddpsim       the command under test (DDPSIM=path, else ./ddpsim), made
#                 absolute; the test stops at once when it is not built
#   need CMD HOW  stop at once when CMD is missing, saying how to get it
#   $work         a temporary directory (under $TMPDIR: run-all.sh finds it
#                 there by its name ddpsim-$test.*), removed on every exit by
#                 cleanup(), which a test may redefine (keep the rm)
#   ok/fail MSG   one "ok: " / "FAIL: " line; fail counts into $failed
#   show FILE     the output a failed check looked at, indented
#   scrub_env RE  unset every variable whose name matches the sed regex RE,
#                 and the torchrun/Lightning variables, so that nothing of
#                 the caller's own job decides the detection
#   finish        the last line: exit 1 with the count of failed checks, or
#                 "all checks passed"
#   slurm_up      a single-node SLURM (tests/slurm/start.sh) in $work/slurm,
#                 stopped by cleanup() on every exit; the caller's SLURM_*
#                 scrubbed first; SLURM_CONF exported; an "ok:" line, or
#                 exit 1 with start.sh's errors
#   slurm_queue_empty  ok when no job is left in its queue (a job still
#                 COMPLETING gets 15 s to leave it), else FAIL
ddpsim=${DDPSIM:-$root/ddpsim}
case $ddpsim in /*) ;; *) ddpsim=$(pwd)/$ddpsim ;; esac
[ -x "$ddpsim" ] || {
    echo "FAIL: $ddpsim is not built (run: make)" >&2
    exit 1
}

need() {
    command -v "$1" >/dev/null 2>&1 || {
        echo "FAIL: $1 not found (run: $2)" >&2
        exit 1
    }
}

work=$(mktemp -d "${TMPDIR:-/tmp}/ddpsim-$test.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

failed=0
ok() { echo "ok: $*"; }
fail() {
    echo "FAIL: $*"
    failed=$((failed + 1))
}
show() { sed 's/^/    | /' "$1" | head -n 40; }

scrub_env() {
    for v in $(env | sed -n "s/^\\($1\\)=.*/\\1/p"); do unset "$v"; done
    unset MASTER_ADDR MASTER_PORT NODE_RANK RANK LOCAL_RANK GROUP_RANK \
        LOCAL_WORLD_SIZE WORLD_SIZE 2>/dev/null
}

finish() {
    [ $failed -eq 0 ] || {
        echo "$test: $failed check(s) failed"
        exit 1
    }
    echo "$test: all checks passed"
}

slurm_up() {
    need srun "sh scripts/deps.sh --real"
    sdir=$work/slurm
    cleanup() {
        sh "$root/tests/slurm/stop.sh" "$sdir" >/dev/null 2>&1
        rm -rf "$work"
    }
    # Nothing of the caller's own SLURM job (if any) may leak into the tasks.
    scrub_env 'SLURM_[A-Z_]*'
    _t0=$(date +%s)
    if ! sh "$root/tests/slurm/start.sh" "$sdir" >"$work/start.out" 2>"$work/start.err"; then
        fail "tests/slurm/start.sh could not bring up SLURM"
        show "$work/start.err"
        exit 1
    fi
    . "$sdir/env.sh"
    ok "single-node SLURM up ($(sinfo -h -o '%N %T %c CPUs') in $(($(date +%s) - _t0)) s)"
}

slurm_queue_empty() {
    _i=0
    while _left=$(squeue -h -o '%i %T' 2>/dev/null) && [ -n "$_left" ] && [ $_i -lt 30 ]; do
        case $_left in *PENDING* | *RUNNING*) break ;; esac # not just finishing
        sleep 0.5
        _i=$((_i + 1))
    done
    if [ -z "$_left" ]; then ok "no job left in the queue"; else fail "jobs left in the queue: $_left"; fi
}
