# tests/torch/find-python.sh — sourced: ddp_torch_python prints the first
# interpreter that imports torch and fails when there is none: TORCH_PYTHON
# when set (only that one), else /usr/bin/python3 (Debian's python3-torch),
# python3, python. Used by the torch tests and bench/torch_init.sh.
ddp_torch_python() {
    for c in ${TORCH_PYTHON:-/usr/bin/python3 python3 python}; do
        command -v "$c" >/dev/null 2>&1 || continue
        if "$c" -c 'import torch.distributed' >/dev/null 2>&1; then
            command -v "$c"
            return 0
        fi
    done
    return 1
}
