#!/usr/bin/env bash
# Build a venv in which a verl-agent checkout imports beside this package, for
# scripts/check_verl_agent.py. verl-agent vendors verl 0.3, which wants transformers 4.51 and
# tensordict; the venv sees the main install's packages (this package, the ALFWorld engine, torch,
# ray) and adds only those, so it builds in about a minute. The main install is PYTHON's own
# environment: a venv's packages when PYTHON is a venv's interpreter (`--system-site-packages`
# alone would give the base interpreter's instead), linked by a .pth file rewritten on every call.
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
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv --system-site-packages "$VENV"
# PYTHON's own site-packages (its venv's, if it is one), after the new venv's own: site.addsitedir
# also runs their .pth files (an editable install of this package is one)
parent_sites=$("$PYTHON" -c "import site, sysconfig; print(repr(list(dict.fromkeys([*site.getsitepackages(), sysconfig.get_path('purelib'), sysconfig.get_path('platlib')]))))")
new_site=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_path('purelib'))")
echo "import site; list(map(site.addsitedir, $parent_sites))" > "$new_site/_progpo_main_install.pth"
if recipe_changed "import tensordict, codetiming, omegaconf, transformers, trainers.integrations.verl_agent"; then
  pip_q install -q "transformers==4.51.1" "datasets<4" "tensordict==0.10.0" codetiming omegaconf hydra-core \
    "torchdata==0.11.0" pylatexenc
  recipe_done
fi
"$VENV/bin/python" -c "import transformers, tensordict; print('transformers', transformers.__version__, '| tensordict', tensordict.__version__)"
