#!/bin/sh
# tests/differential/launch.sh BIN COUNT [SEED] — make differential's
# launch-contract family: COUNT torchrun configurations through torch 1.13's
# own code (launch_oracle.py, one Python process) against ddpsim's launchers
# (BIN, tests/differential/launch.c). Without torch: "skipped: ...", exit 0.
bin=$1 count=${2:-10000} seed=${3:-41}
here=$(dirname "$0")
if ! sh "$here/../../scripts/torch-python" -c '' 2>/dev/null; then
    echo "torchrun     skipped: no Python with torch here (sh scripts/deps.sh --torch)"
    exit 0
fi
out=$(mktemp "${TMPDIR:-/tmp}/ddpsim-launch-oracle.XXXXXX") || exit 2
trap 'rm -f "$out"' EXIT
sh "$here/../../scripts/torch-python" "$here/launch_oracle.py" "$count" "$seed" >"$out" || {
    echo "torchrun     the oracle failed (launch_oracle.py $count $seed)" >&2; exit 2; }
"$bin" "$out"
