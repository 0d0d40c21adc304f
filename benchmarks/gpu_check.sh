#!/usr/bin/env bash
# The GPU check: one command, HF backend (no vLLM), no network; each step runs under its own timeout.
# Writes $OUT/gpu_check.json and prints one table:
#   1. preflight: GPU, versions, bf16 matmul TFLOP/s;
#   2. a paper-shaped iteration: a randomly initialised Qwen2.5-1.5B (hidden 1536, 28 layers, 12
#      heads, 2 KV heads, MLP 8960, vocab 151936, tied embeddings), full fine-tune, bf16 autocast
#      over fp32 master weights, answers sampled from a bf16 copy by the static-cache engine
#      (decode steps compiled once per shape bucket), 16 x 8 ALFWorld envs, <think>/<action>
#      answers of exactly 256 tokens, 3 steps per episode, old log-probs recomputed, one PPO
#      update: generation and update tokens/s, the update's TFLOP/s, peak memory, the seconds of
#      every phase (one-time compilation, per-iteration env reset, per-step phases), the 50-step
#      iteration they imply and its ratio to verl-agent's published ~363 s (2 GPUs) / ~454 s
#      (4 GPUs) per iteration (weights do not change speed);
#   3. the generation engines at the paper shape, in one process: the loop against the static-cache
#      engine (compiled, bf16 weights), tokens/s and their ratio (benchmarks/decode_engines.py);
#      3b. the update's paths on rollout-shaped steps of the paper model (a quarter of its groups):
#      micro-batches in prefix vs length order, with and without logit chunks, TFLOP/s, padding,
#      peak memory, and the costliest operators of one update (benchmarks/update_paths.py);
#   4. FSDP2 at world size 1 (torchrun --nproc-per-node 1, --dist-strategy fsdp2): one update,
#      checked against the plain update on the same batch;
#   5. one short ProGPO iteration end to end with a small random model, with its report.
#
#   bash benchmarks/gpu_check.sh                      # on the GPU machine (OUT defaults to runs/gpu_check)
#   DEVICE=cpu bash benchmarks/gpu_check.sh           # the CPU rehearsal: same steps, scaled down (CI)
#
# Needs: torch, transformers, peft (the image's), and this package with gymnasium, textworld,
# alfworld, tatsu, bm25s...: scripts/build_device_bundle.sh writes the wheels the image lacks.
# Env: DEVICE (cuda | cpu), OUT, PYTHON, and the shape: MODEL, NGROUPS, SIZE, STEPS, TOKENS,
# SMALL_MODEL (steps 3-4), TIMEOUT_PAPER (s), DECODE (auto | loop | static: the generation engine).
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
DEVICE="${DEVICE:-cuda}"
OUT="${OUT:-runs/gpu_check}"
if [ "$DEVICE" = "cuda" ]; then
  MODEL="${MODEL:-random-qwen2.5-1.5b}"; NGROUPS="${NGROUPS:-16}"; SIZE="${SIZE:-8}"; STEPS="${STEPS:-3}"
  TOKENS="${TOKENS:-256}"; SMALL_MODEL="${SMALL_MODEL:-random-qwen2.5-0.5b}"; BACKEND="${ENV_BACKEND:-async}"
  GEN_BATCH="${GEN_BATCH:-128}"; MICRO="${MICRO:-8}"; TIMEOUT_PAPER="${TIMEOUT_PAPER:-420}"; TORCHTHREADS=0
  ENGINES="${ENGINES:-loop,static+compile bf16}"; ENGINE_TOKENS="${ENGINE_TOKENS:-128}"; UPD_GROUPS="${UPD_GROUPS:-4}"
else
  MODEL="${MODEL:-tiny-128x2}"; NGROUPS="${NGROUPS:-2}"; SIZE="${SIZE:-2}"; STEPS="${STEPS:-2}"
  TOKENS="${TOKENS:-16}"; SMALL_MODEL="${SMALL_MODEL:-tiny-128x2}"; BACKEND="${ENV_BACKEND:-sync}"
  GEN_BATCH="${GEN_BATCH:-32}"; MICRO="${MICRO:-4}"; TIMEOUT_PAPER="${TIMEOUT_PAPER:-300}"; TORCHTHREADS=1
  ENGINES="${ENGINES:-loop,static bf16}"; ENGINE_TOKENS="${ENGINE_TOKENS:-16}"; UPD_GROUPS="${UPD_GROUPS:-2}"
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT"
: > "$OUT/steps.txt"
start=$(date +%s)
step() { echo; echo "== $* ($(( $(date +%s) - start )) s)"; }
record() { echo "$1 $2" >> "$OUT/steps.txt"; }
run_step() {  # run_step NAME TIMEOUT CMD...: runs CMD, records ok / failed (exit N) / timed out
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@"; local rc=$?
  if [ $rc = 0 ]; then record "$name" ok; elif [ $rc = 124 ]; then record "$name" "timed-out"; else record "$name" "failed(exit-$rc)"; fi
  return $rc
}
# the trainer with what every step shares: generate mode, <think>/<action>, no warm start, no eval
COMMON=(--env alfworld --train-split easy-train --policy-mode generate --answer-format think_action --template alfworld
        --history-k 2 --warm-start none --eval-episodes 0 --no-baseline-random --no-progress-bars --no-tensorboard --overwrite
        --device "$DEVICE" --torch-threads "$TORCHTHREADS")
TRAIN=("$PY" -m trainers.progpo "${COMMON[@]}" --env-backend "$BACKEND")

step "1. preflight ($DEVICE)"
run_step preflight 120 "$PY" benchmarks/gpu_check.py preflight --device "$DEVICE" --json "$OUT/preflight.json" || {
  "$PY" benchmarks/gpu_check.py report "$OUT"; echo "gpu_check: preflight failed: nothing else runs"; exit 2; }

step "2. paper-shaped iteration: $MODEL, $NGROUPS x $SIZE envs, $STEPS steps, $TOKENS-token answers"
run_step paper "$TIMEOUT_PAPER" "${TRAIN[@]}" --model "$MODEL" --num-groups "$NGROUPS" --group-size "$SIZE" --max-steps "$STEPS" \
  --max-new-tokens "$TOKENS" --min-new-tokens "$TOKENS" --gen-batch-size "$GEN_BATCH" --micro-batch-size "$MICRO" \
  --decode "${DECODE:-auto}" \
  --num-minibatches 1 --iterations 1 --save-every 0 --no-skip-zero-advantage --recompute-old-logprobs --lr 1e-6 \
  --output-dir "$OUT/paper" && "$PY" benchmarks/gpu_check.py iteration "$OUT/paper" --json "$OUT/iteration.json"

step "3. generation engines: $ENGINES ($MODEL, $GEN_BATCH prompts x $ENGINE_TOKENS tokens)"
run_step engines 240 "$PY" benchmarks/decode_engines.py --device "$DEVICE" --model "$MODEL" --batch "$GEN_BATCH" \
  --tokens "$ENGINE_TOKENS" --prompt-tokens 600 --repeats 1 --engines "$ENGINES" --json "$OUT/engines.json"

step "3b. update paths: prefix vs length order, logit chunks ($MODEL, $UPD_GROUPS x $SIZE x $STEPS steps), profiled"
run_step update_paths 240 "$PY" benchmarks/update_paths.py --device "$DEVICE" --model "$MODEL" --groups "$UPD_GROUPS" \
  --group-size "$SIZE" --steps "$STEPS" --prompt-tokens 600 --response-tokens "$TOKENS" --micro-batch-tokens 8192 \
  --logit-chunk 1024 --repeats 1 --paths "prefix,length,length + logit chunks" --profile --json "$OUT/update_paths.json"

step "4. FSDP2 at world size 1 vs the plain update ($SMALL_MODEL)"
SHORT=(--model "$SMALL_MODEL" --num-groups 2 --group-size 2 --max-steps 2 --max-new-tokens 16 --iterations 1
       --num-minibatches 1 --micro-batch-size 64 --no-skip-zero-advantage --lr 1e-5 --seed 0)
run_step fsdp_plain 240 "${TRAIN[@]}" "${SHORT[@]}" --output-dir "$OUT/fsdp_plain" &&
run_step fsdp2 240 "$PY" -m torch.distributed.run --nproc-per-node 1 --master-port "${MASTER_PORT:-29517}" \
  -m trainers.progpo "${COMMON[@]}" --env-backend sync --dist-strategy fsdp2 "${SHORT[@]}" --output-dir "$OUT/fsdp2" &&
run_step fsdp_compare 120 "$PY" benchmarks/gpu_check.py fsdp "$OUT/fsdp_plain" "$OUT/fsdp2" --model "$SMALL_MODEL" \
  --device "$DEVICE" --tol "${FSDP_TOL:-0.02}" --json "$OUT/fsdp.json"

step "5. one short ProGPO iteration end to end ($SMALL_MODEL)"
run_step short 240 "${TRAIN[@]}" --model "$SMALL_MODEL" --num-groups 2 --group-size 4 --max-steps 3 --max-new-tokens 32 \
  --iterations 1 --estimator progpo-gigpo --output-dir "$OUT/short" &&
"$PY" benchmarks/gpu_check.py short "$OUT/short" --json "$OUT/short.json"

step "report"
"$PY" benchmarks/gpu_check.py report "$OUT"
rc=$?
echo "gpu_check: $(( $(date +%s) - start )) s"
exit $rc
