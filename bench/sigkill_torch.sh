#!/bin/sh
# bench/sigkill_torch.sh — issue 42's acceptance: `ddpsim run --real` (and
# `--netns`, as root) of a real PyTorch job (scenarios/torch-clean.scn on
# its own port), SIGKILLed at a random moment of its run (within the length
# of a whole run, measured first, or MAXWAIT seconds), TRIALS times a
# mode: how many processes of the run and network namespaces are left
# 3 s after each kill (and after the next run, which sweeps stale
# namespaces). Figures only, no assertions.
#
#   DDPSIM=build/default/ddpsim [TRIALS=20] [PORT=44100] [MAXWAIT=S]
#   [MODES="real netns"] [COLD=1] sh bench/sigkill_torch.sh
#
# A process of the run is one whose command line holds the trial's
# scenario folder, or a python running examples/torch_ddp.py or the fork
# server with the job's MASTER_PORT in its environment; a namespace is one
# named ddpsXXXXnN of `ip netns` (harness/real_net.c).
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
# the run's processes: its runner, ranks, fork servers, hosted store (its
# scenario folder in the command line, or the job's port in the environment:
# never another job's torch processes, which this must neither count nor kill)
port=${PORT:-44100}
run_pids() {
    for p in $(pgrep -f "torch_ddp.py|ddpsim-forkserver|$tmp" 2>/dev/null); do
        [ "$p" = "$$" ] && continue
        if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q "$tmp" ||
            tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "MASTER_PORT=$port"; then
            echo "$p"
        fi
    done
}
left_procs() {
    run_pids | wc -l
}
# a run's namespaces: ddps + 4 hex digits + n + node (harness/real_net.c)
left_ns() {
    ip netns list 2>/dev/null | grep -c '^ddps[0-9a-f]\{4\}n' || true
}
rnd() { # 0..$1-1 from /dev/urandom
    od -An -N2 -tu2 /dev/urandom | awk -v m="$1" '{ print $1 % m }'
}
now_ms() { date +%s%3N; }
for mode in $modes; do
    procs=0 nss=0 bad=0
    before=$(left_ns)
    # one whole run first: the kills fall within a run's length (MAXWAIT
    # seconds if set), not after its end
    t0=$(now_ms)
    "$ddpsim" run --$mode $flag --no-progress "$tmp/job.scn" >"$tmp/whole" 2>&1
    whole_ms=$(($(now_ms) - t0))
    maxwait_ms=$(( ${MAXWAIT:-0} > 0 ? ${MAXWAIT:-0} * 1000 : whole_ms ))
    echo "sigkill_torch: --$mode: a whole run takes $(awk -v m="$whole_ms" 'BEGIN { printf "%.1f", m / 1000 }') s" \
         "($(tail -1 "$tmp/whole")); kills at 0..$(awk -v m="$maxwait_ms" 'BEGIN { printf "%.1f", m / 1000 }') s"
    for t in $(seq "${TRIALS:-20}"); do
        "$ddpsim" run --$mode $flag --no-progress "$tmp/job.scn" >"$tmp/out.$t" 2>&1 &
        pid=$!
        ms=$(rnd "$maxwait_ms")
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
        run_pids | xargs -r kill -KILL 2>/dev/null
    done
    # the next run sweeps what a killed run's namespaces left
    "$ddpsim" run --$mode $flag --no-progress "$tmp/job.scn" >"$tmp/after" 2>&1
    echo "sigkill_torch: --$mode: ${TRIALS:-20} SIGKILLs: $bad trial(s) left something" \
         "($procs process(es), $nss namespace(s) in all); after the next run" \
         "($(tail -1 "$tmp/after")): $(($(left_ns) - before)) namespace(s), $(left_procs) process(es)"
done
