#!/bin/sh
# tests/real/interrupt-test.sh — `ddpsim run --real` stopped by a signal
# leaves nothing behind: SIGINT mid-run exits 130 with the run marked
# "interrupted" and the later ones "not run: interrupted", no `ddpsim train`
# process of this build survives, and (as root, with --netns) the network
# namespaces the run made are deleted. Then SIGTERM: exit 143.
#
#   sh tests/real/interrupt-test.sh       (DDPSIM=path overrides ./ddpsim)
#
# Prints "ok: ..." / "FAIL: ..." per check; exit 0 all passed, 1 otherwise.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
test=interrupt-test
. "$root/tests/real/lib.sh"
scrub_env 'SLURM_[A-Z_]*\|TORCHELASTIC_[A-Z_]*\|OMPI_[A-Z_]*\|PMI_[A-Z_]*'

trains() { pgrep -f "^$ddpsim train" 2>/dev/null; }
namespaces() { ip netns list 2>/dev/null | awk '/^ddps/ {print $1}' | sort; }

# interrupt NAME SIGNAL WANT_RC [--netns] FILE: start the run, wait (20 s at
# most) until its first rank runs, signal it, check what it left.
interrupt() {
    name=$1 sig=$2 want=$3
    shift 3
    namespaces >"$work/ns-before"
    "$ddpsim" run --real "$@" --no-progress >"$work/$name.out" 2>&1 &
    pid=$!
    n=0
    while [ -z "$(trains)" ] && [ $n -lt 200 ]; do sleep 0.1; n=$((n + 1)); done
    if [ -z "$(trains)" ]; then
        fail "$name: no \`ddpsim train\` process started within 20 s"
        kill -KILL $pid 2>/dev/null
        wait $pid 2>/dev/null
        show "$work/$name.out"
        return
    fi
    namespaces | comm -13 "$work/ns-before" - >"$work/ns-made"
    kill -"$sig" $pid
    n=0
    while kill -0 $pid 2>/dev/null && [ $n -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
    if kill -0 $pid 2>/dev/null; then
        fail "$name: ddpsim run still running 30 s after SIG$sig"
        kill -KILL $pid 2>/dev/null
    fi
    wait $pid
    rc=$?
    if [ $rc -eq "$want" ] && grep -q "interrupted: its processes were killed" "$work/$name.out" &&
        grep -q "not run: interrupted" "$work/$name.out"; then
        ok "$name: SIG$sig mid-run: exit $rc, the run interrupted, the later ones not run"
    else
        fail "$name: SIG$sig mid-run: exit $rc (want $want) or no \"interrupted\" rows"
        show "$work/$name.out"
    fi
    sleep 0.5
    if [ -n "$(trains)" ]; then
        fail "$name: \`ddpsim train\` processes left: $(trains | tr '\n' ' ')"
        trains | xargs kill -KILL 2>/dev/null
    else
        ok "$name: no \`ddpsim train\` process left"
    fi
    if [ -s "$work/ns-made" ]; then
        # every namespace that was not there before: a later run's too
        left=$(namespaces | comm -13 "$work/ns-before" - | tr '\n' ' ')
        if [ -n "$left" ]; then
            fail "$name: namespaces left: $left"
        else
            ok "$name: its namespaces ($(tr '\n' ' ' <"$work/ns-made")) deleted"
        fi
    fi
}

interrupt loopback INT 130 scenarios/refuse-briefly.scn
interrupt loopback-term TERM 143 scenarios/refuse-briefly.scn
if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null 2>&1; then
    interrupt netns INT 130 --netns scenarios/partition-heals.scn
else
    echo "skip: netns (needs root and iproute2)"
fi
finish
