#!/bin/sh
# scripts/deps.sh — install ddpsim's Debian build and test dependencies when
# any is missing. Called by `make deps` (and by the other targets through it).
# Needs root (apt-get) only when something is missing.
set -eu
# libxml2-utils: xmllint, which validates the JUnit files (tests/test_junit.c).
# go-md2man: the manual page ddpsim.1 from docs/ddpsim.1.md (make install);
# groff-base renders it in tests/install-check.sh.
PKGS="build-essential pkg-config libfiu-dev fiu-utils libcunit1-dev lcov gcovr libxml2-utils go-md2man groff-base"
[ "${1:-}" = "--bench" ] && PKGS="$PKGS redis-server redis-tools openmpi-bin libopenmpi-dev time"
# --fuzz: make fuzz (clang with its libFuzzer runtime).
[ "${1:-}" = "--fuzz" ] && PKGS="$PKGS clang libclang-rt-dev"
# --real: real runs (a single-node SLURM, OpenMPI, ip netns, nft, setsid).
[ "${1:-}" = "--real" ] && PKGS="$PKGS slurmctld slurmd slurm-client munge openmpi-bin iproute2 nftables util-linux"
# --torch: Debian's PyTorch (imports in /usr/bin/python3) for make torch-test
# and the torch scenarios, with what those run in namespaces.
[ "${1:-}" = "--torch" ] && PKGS="$PKGS python3-torch iproute2 nftables util-linux"
# --chromium: the headless-browser tests of the HTML pages (.ci/run).
[ "${1:-}" = "--chromium" ] && PKGS="$PKGS chromium"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "ddpsim: installing missing packages:$missing"
if [ "$(id -u)" -ne 0 ]; then
    echo "ddpsim: need root to install:$missing (run: sudo apt-get install$missing)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing
