#!/bin/sh
# tests/torch-python-test.sh — scripts/torch-python picks its Python
# without importing torch (issue 42: every rank imported torch twice, once
# to probe): a fake `torch` package on PYTHONPATH appends a line to a
# marker file each time it is imported; the program that imports torch
# once must leave exactly one line. A Python that has no torch is passed
# over (DDPSIM_TORCH_PYTHON naming one that fails), and the program's
# arguments and exit status come through. Run by make test.
set -u
cd "$(dirname "$0")/.." || exit 1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "torch-python-test: FAIL: $*"; exit 1; }
py=$(command -v python3) || { echo "torch-python-test: skipped: no python3"; exit 0; }

mkdir "$dir/torch"
cat >"$dir/torch/__init__.py" <<'PY'
import os
with open(os.environ["FAKE_TORCH_MARKER"], "a") as f:
    f.write("imported\n")
PY
export FAKE_TORCH_MARKER="$dir/marker" PYTHONPATH="$dir"

DDPSIM_TORCH_PYTHON="$py" sh scripts/torch-python -c 'import sys, torch; sys.exit(int(sys.argv[1]))' 3
st=$?
[ "$st" = 3 ] || fail "the program's exit status 3 came back as $st"
n=$(wc -l <"$dir/marker" 2>/dev/null || echo 0)
[ "$n" = 1 ] || fail "torch was imported $n times for one import in the program (the probe must not import it)"

# a first choice that is no Python: passed over for the next
rm -f "$dir/marker"
DDPSIM_TORCH_PYTHON=/bin/false sh scripts/torch-python -c 'import torch' ||
    fail "a DDPSIM_TORCH_PYTHON that fails was not passed over"
n=$(wc -l <"$dir/marker" 2>/dev/null || echo 0)
[ "$n" = 1 ] || fail "torch was imported $n times after passing over /bin/false"
echo "torch-python-test: ok"
