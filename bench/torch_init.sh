#!/bin/sh
# bench/torch_init.sh — 8 torch gloo processes initialising through ddpsim's
# store and through torch's own, alternating (bench/torch_init.py).
#
#   DDPSIM=./ddpsim [N=8] [REPS=7] sh bench/torch_init.sh
#
# Figures only, no assertions. Without a Python that imports torch it says
# so and exits 0.
set -u
. "$(dirname "$0")/../tests/torch/find-python.sh"
py=$(ddp_torch_python) || {
    echo "torch_init: skipped: no Python that imports torch (sh scripts/deps.sh --torch)"
    exit 0
}
exec "$py" "$(dirname "$0")/torch_init.py"
