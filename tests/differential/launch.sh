#!/bin/sh
# tests/differential/launch.sh BIN COUNT [SEED [REAL]] — make differential's
# launch-contract family: COUNT torchrun configurations through torch 1.13's
# own code (launch_oracle.py, one Python process) against ddpsim's launchers
# (BIN, tests/differential/launch.c), then the oracle itself against real
# torchrun on REAL one-node configurations (launch_real.py, default 40).
# Without torch: "skipped: ...", exit 0.
bin=$1 count=${2:-10000} seed=${3:-41} real=${4:-40}
here=$(dirname "$0")
if ! sh "$here/../../scripts/torch-python" -c '' 2>/dev/null; then
    echo "torchrun     skipped: no Python with torch here (sh scripts/deps.sh --torch)"
    exit 0
fi
out=$(mktemp "${TMPDIR:-/tmp}/ddpsim-launch-oracle.XXXXXX") || exit 2
trap 'rm -f "$out"' EXIT
sh "$here/../../scripts/torch-python" "$here/launch_oracle.py" "$count" "$seed" >"$out" || {
    echo "torchrun     the oracle failed (launch_oracle.py $count $seed)" >&2; exit 2; }
"$bin" "$out" || exit 1
[ "$real" -gt 0 ] || exit 0
if [ ! -x "${DDPSIM_TORCHRUN:-/usr/bin/torchrun}" ]; then
    echo "torchrun (real) skipped: no ${DDPSIM_TORCHRUN:-/usr/bin/torchrun} (DDPSIM_TORCHRUN names another)"
    exit 0
fi
sh "$here/../../scripts/torch-python" "$here/launch_real.py" "$real" "$seed"
