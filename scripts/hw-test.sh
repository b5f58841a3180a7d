#!/bin/sh
# scripts/hw-test.sh — the nccl backend on real GPUs (`make hw-test`).
#
# Without a GPU (no nvidia-smi, nvidia-smi lists no device, or the CUDA
# runtime sees none) it prints "no GPU: skipped" and succeeds, so CI
# machines without GPUs pass. With GPUs it runs $B/bench/nccl_hw: one
# process per GPU on loopback, the store on rank 0, an allreduce check per
# world size, the fault runs (unique id never published, a non-blocking init
# stalled and aborted, a rank killed during init) and four 1-rank
# communicators side by side; docs/hardware.md says what each checks.
# Then the nccl scenarios (scenarios/ tagged gpu) run in the simulator and
# as real processes on this machine's GPUs (ddpsim run --compare: the same
# files, the real libnccl in place of the simulated one), node i on GPUs
# i*gpus .. (CUDA_VISIBLE_DEVICES); the table of outcome classes, the
# hardware column of docs/fidelity.md, goes to $HW_FIDELITY.
#   HW_DEADLINE_MS   deadline of the fault runs (default 5000)
#   HW_FIDELITY      where the table goes (default docs/fidelity-gpu.md)
# Exit status: 0 when every scenario went as expected (or no GPU), else 1.
set -u
B=${B:-build/default}
BIN=$B/bench/nccl_hw

if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "no GPU: skipped (nvidia-smi not found)"
    exit 0
fi
# nvidia-smi exits non-zero ("couldn't communicate with the NVIDIA driver",
# "No devices were found") on machines that have the tools but no GPU.
n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [ "${n:-0}" -eq 0 ]; then
    echo "no GPU: skipped (nvidia-smi lists no device)"
    exit 0
fi
nvidia-smi -L

[ -x "$BIN" ] || make -s "$BIN" || exit 1
# nccl_hw probes cudaGetDeviceCount itself and prints "no GPU: skipped"
# when the runtime sees none (CUDA_VISIBLE_DEVICES="", a driver mismatch).
rc=0
if [ -n "${HW_DEADLINE_MS:-}" ]; then
    "$BIN" --deadline-ms "$HW_DEADLINE_MS" || rc=1
else
    "$BIN" || rc=1
fi

# The nccl scenarios: simulated NCCL vs the real one, outcome classes side
# by side. DDPSIM_REAL_GPUS lends the real runner this machine's GPUs; a
# scenario needing more is a skip with its reason.
DDPSIM=${DDPSIM:-$B/ddpsim}
OUT=${HW_FIDELITY:-docs/fidelity-gpu.md}
tmp=${TMPDIR:-/tmp}/ddpsim-hw.$$
DDPSIM_REAL_GPUS=$n "$DDPSIM" run --compare --tag gpu scenarios/*.scn --no-progress \
    --markdown "$tmp.md" || rc=1
{
    echo "## NCCL on GPUs (\`make hw-test\`: \`ddpsim run --compare --tag gpu\`)"
    echo
    echo "Recorded by scripts/hw-test.sh on $(date -u +%Y-%m-%d): $(nvidia-smi -L | head -1 | cut -d'(' -f1)x $n."
    echo "simulator: the simulated NCCL (sim/sim_nccl.c); real: ddpsim train processes"
    echo "on loopback with the machine's libnccl.so.2, node i on its own GPUs."
    echo
    cat "$tmp.md"
} >"$OUT"
rm -f "$tmp.md"
echo "hw-test: wrote $OUT"
exit $rc
