#!/usr/bin/env bash
# Install everything `make test`, `make demo` and `make bench` need, from
# Debian's packages and PyPI. Idempotent: quick when all is in place.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential pkg-config libffi-dev libcmocka-dev libdlpack-dev libxxhash-dev
              zlib1g-dev valgrind strace chromium dataset-fashion-mnist python3-venv
              clang-16 libclang-rt-16-dev
              libblis-serial-dev   # the tile layer's GEMM (docs/gemm_library.md)
              libxsmm-dev)         # its small float32 products: JIT kernels (static, linked in)

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "opcore: installing Debian packages: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
# pip is quick when the pinned versions are already there.
if ! $PYTHON - <<'PY' 2>/dev/null
import importlib.metadata as m, sys
req = {l.split("==")[0].strip(): (l.split("==")[1].strip() if "==" in l else None)
       for l in open("requirements-dev.txt") if l.strip() and not l.startswith("#")}
for name, ver in req.items():
    have = m.version(name).split("+")[0]  # torch reports 2.13.0+cpu
    if ver and have != ver: sys.exit(1)
PY
then
    echo "opcore: installing Python packages from requirements-dev.txt"
    $PYTHON -m pip install -q --disable-pip-version-check -r requirements-dev.txt
fi
# `make python` builds opcore with the setuptools $PYTHON imports (no isolation)
sh scripts/ensure-setuptools.sh "$PYTHON"
