#!/bin/sh
# bench/sigkill_torch.sh — issue 42's acceptance: `ddpsim run --real` (and
# `--netns`, as root) of a real PyTorch job (scenarios/torch-clean.scn on
# its own port), SIGKILLed at a random moment of its run, TRIALS times a
# mode: how many processes of the run and network namespaces are left
# 3 s after each kill (and after the next run, which sweeps stale
# namespaces). Figures only, no assertions.
#
#   DDPSIM=build/default/ddpsim [TRIALS=20] [PORT=44100] [MAXWAIT=12]
#   [MODES="real netns"] [COLD=1] sh bench/sigkill_torch.sh
#
# A process of the run is one whose command line holds the trial's
# scenario folder or the job's port token, or a python running
# examples/torch_ddp.py; a namespace is one named ddpsim-* of `ip netns`.
# Without a Python that imports torch it says so and exits 0.
set -u
ddpsim=${DDPSIM:-build/default/ddpsim}
if ! scripts/torch-python -c 'import torch' >/dev/null 2>&1; then
    echo "sigkill_torch: skipped: no Python here imports torch (sh scripts/deps.sh --torch)"
    exit 0
fi
tmp=$(mktemp -d /tmp/ddpsim-sigkill-bench-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cp -r scenarios/common "$tmp/"
sed "s/^port [0-9]*/port ${PORT:-44100}/" scenarios/torch-clean.scn > "$tmp/job.scn"
modes=${MODES:-real netns}
[ "$(id -u)" -eq 0 ] || modes=real
flag=
[ "${COLD:-0}" = 1 ] && flag=--cold
# the run's processes: its runner, ranks, fork servers, hosted store
left_procs() {
    pgrep -f "torch_ddp.py|ddpsim-forkserver|$tmp" 2>/dev/null | grep -vx "$$" | wc -l
}
left_ns() {
    ip netns list 2>/dev/null | grep -c '^ddpsim' || true
}
rnd() { # 0..$1-1 from /dev/urandom
    od -An -N2 -tu2 /dev/urandom | awk -v m="$1" '{ print $1 % m }'
}
for mode in $modes; do
    procs=0 nss=0 bad=0
    before=$(left_ns)
    for t in $(seq "${TRIALS:-20}"); do
        "$ddpsim" run --$mode $flag --no-progress "$tmp/job.scn" >"$tmp/out.$t" 2>&1 &
        pid=$!
        ms=$(rnd $((${MAXWAIT:-12} * 1000)))
        sleep "$(awk -v m="$ms" 'BEGIN { printf "%.3f", m / 1000 }')"
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        sleep 3
        p=$(left_procs)
        n=$(($(left_ns) - before))
        [ "$n" -lt 0 ] && n=0
        procs=$((procs + p))
        nss=$((nss + n))
        [ "$p" -gt 0 ] || [ "$n" -gt 0 ] && bad=$((bad + 1))
        printf '%s trial %2d: killed at %5.2f s: %d process(es), %d namespace(s) left\n' \
            "$mode" "$t" "$(awk -v m="$ms" 'BEGIN { print m / 1000 }')" "$p" "$n"
        pkill -KILL -f "torch_ddp.py|ddpsim-forkserver|$tmp" 2>/dev/null
    done
    # the next run sweeps what a killed run's namespaces left
    "$ddpsim" run --$mode $flag --no-progress "$tmp/job.scn" >"$tmp/after" 2>&1
    echo "sigkill_torch: --$mode: ${TRIALS:-20} SIGKILLs: $bad trial(s) left something" \
         "($procs process(es), $nss namespace(s) in all); after the next run" \
         "($(tail -1 "$tmp/after")): $(($(left_ns) - before)) namespace(s), $(left_procs) process(es)"
done
