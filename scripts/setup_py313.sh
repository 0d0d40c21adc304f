#!/usr/bin/env bash
# Build (or refresh) a Python 3.13 venv for the fast suite on 3.13 (`make test-py313`, .ci/run).
# The main install is Python 3.11; this checks the package on the newest CPython it supports.
# First build compiles alfworld's jericho + fast-downward (~5 min); later calls take seconds.
#
#   bash scripts/setup_py313.sh        # create / update ~/.cache/progpo/venv-py313 (idempotent)
#
# Env: PY313 (interpreter, default: python3.13 on PATH, else pyenv's 3.13.x), PY313_VENV
# (default ~/.cache/progpo/venv-py313). Exit 3 (no venv built) when no Python 3.13 is found.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${PY313_VENV:-$HOME/.cache/progpo/venv-py313}"
STAMP="$VENV/.progpo-py313-ok"
source scripts/venv_common.sh  # pip_q, recipe_changed, recipe_done, install_deps, link_checkout, find_python
if ! PY="$(find_python 3.13 "${PY313:-}")"; then
  echo "setup_py313: no Python 3.13 found (python3.13 on PATH or pyenv 3.13.x); skipped" >&2
  exit 3
fi
# dependencies are re-installed only when the recipe (this script or pyproject.toml) changed
if recipe_changed "import torch, textworld"; then
  install_deps "$PY" "all"
  recipe_done
fi
link_checkout
"$VENV/bin/python" -c "import sys, torch, textworld, agents; print('python', sys.version.split()[0], '| torch', torch.__version__, '| textworld', textworld.__version__, '| progpo from', agents.__path__[0])"
