#!/bin/sh
# Make sure PYTHON (default python3) builds opcore's package: pyproject.toml's
# `license` (an SPDX expression) needs setuptools >= 77, and `make python`
# builds without isolation, with the setuptools PYTHON imports. A venv made
# with --system-site-packages on Python 3.11 holds its own setuptools 65,
# which shadows a newer one of the system: upgrade it in that environment.
#     scripts/ensure-setuptools.sh [PYTHON]
set -eu
PY=${1:-${PYTHON:-python3}}
have=$("$PY" -c 'import setuptools; print(setuptools.__version__)' 2>/dev/null || echo none)
major=${have%%.*}
case "$major" in
    ''|*[!0-9]*) major=0 ;;
esac
[ "$major" -ge 77 ] && exit 0
echo "opcore: $PY has setuptools $have; building opcore needs setuptools>=77: installing it"
if ! "$PY" -m pip install -q --disable-pip-version-check 'setuptools>=77'; then
    echo "opcore: cannot install setuptools>=77 into $PY;" \
         "run: $PY -m pip install 'setuptools>=77'" >&2
    exit 1
fi
