#!/usr/bin/env bash
# Build a venv in which a verl-agent checkout imports beside this package, for
# scripts/check_verl_agent.py. verl-agent vendors verl 0.3, which wants transformers 4.51 and
# tensordict; the venv sees the main install's packages (--system-site-packages: this package, the
# ALFWorld engine, torch) and adds only those, so it builds in about a minute.
#
#   bash scripts/setup_verl_agent.sh
#   ~/.cache/progpo/venv-verl-agent/bin/python scripts/check_verl_agent.py PATH_TO_VERL_AGENT
#
# Env: PYTHON (the main install's interpreter, default python3), VERL_AGENT_VENV (default
# ~/.cache/progpo/venv-verl-agent).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${VERL_AGENT_VENV:-$HOME/.cache/progpo/venv-verl-agent}"
STAMP="$VENV/.progpo-verl-agent-ok"
source scripts/venv_common.sh  # pip_q, recipe_changed, recipe_done
if recipe_changed "import tensordict, codetiming, omegaconf, transformers, trainers.integrations.verl_agent"; then
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv --system-site-packages "$VENV"
  pip_q install -q "transformers==4.51.1" "datasets<4" "tensordict==0.10.0" codetiming omegaconf hydra-core \
    "torchdata==0.11.0" pylatexenc
  recipe_done
fi
"$VENV/bin/python" -c "import transformers, tensordict; print('transformers', transformers.__version__, '| tensordict', tensordict.__version__)"
