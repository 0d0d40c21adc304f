#!/usr/bin/env bash
# Build a venv with the real verl 0.9 (`verl[verl-core]`, torch 2.13.0+cpu) for the tests marked
# `verl` (tests/integrations/test_verl_real.py). verl pins transformers<5.11, older than the main
# install's, so it lives in its own venv (~2 GB; ~3 min cold, seconds when up to date). The
# project is installed editable with its `verl.plugins` entry point, as a user's `pip install
# progpo[verl]` would.
#
#   bash scripts/setup_verl.sh         # create / update ~/.cache/progpo/venv-verl (idempotent)
#   ~/.cache/progpo/venv-verl/bin/python -m pytest -m verl tests/integrations/test_verl_real.py
#
# Env: PYTHON (interpreter for the venv, default python3), VERL_VENV (default
# ~/.cache/progpo/venv-verl; the project is re-linked to the current checkout on every call).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${VERL_VENV:-$HOME/.cache/progpo/venv-verl}"
STAMP="$VENV/.progpo-verl-ok"
source scripts/venv_common.sh  # pip_q, recipe_changed, recipe_done, link_checkout
if recipe_changed "import verl.trainer.ppo.ray_trainer, verl.trainer.ppo.v1.trainer_base"; then
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  pip_q install -q "torch==2.13.0"
  pip_q install -q -e ".[verl,dev]"
  recipe_done
fi
link_checkout
"$VENV/bin/python" -c "import verl, transformers, torch, verl.trainer.ppo.ray_trainer, verl.trainer.ppo.v1.trainer_base; from trainers.integrations.verl_plugin import patched_modules; print('verl', verl.__version__, '| transformers', transformers.__version__, '| torch', torch.__version__, '| progpo plugin:', sorted(patched_modules()))" 2>&1 | grep -v Warning | grep -v "warnings.warn"
