#!/bin/sh
# tests/torch/run.sh — real PyTorch against ddpsim's store (make torch-test).
#
#   DDPSIM=./ddpsim [TORCH_PYTHON=/usr/bin/python3] sh tests/torch/run.sh
#
# Finds a Python that imports torch (TORCH_PYTHON if set, else
# /usr/bin/python3, python3, python: the first python3 on PATH may be one
# without it; tests/torch/find-python.sh) and runs
# tests/torch/torch_interop.py with it. Without torch it prints one line and
# exits 0 (scripts/deps.sh --torch installs Debian's python3-torch).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/find-python.sh"
py=$(ddp_torch_python) || {
    echo "torch-test: skipped: no Python that imports torch (sh scripts/deps.sh --torch installs python3-torch)"
    exit 0
}
DDPSIM=${DDPSIM:-./ddpsim}
[ -x "$DDPSIM" ] || { echo "torch-test: $DDPSIM is not built (make all)" >&2; exit 1; }
exec "$py" "$here/torch_interop.py" --ddpsim "$DDPSIM" "$@"
