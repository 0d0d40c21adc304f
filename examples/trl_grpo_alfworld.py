"""ProGPO with TRL's GRPOTrainer on ProGPO-ALFWorld-v0 (multi-turn rollouts via rollout_func).

CPU, no arguments (a tiny model, cloned from the searching expert for a few seconds in the
rollout's own turn format, then a few GRPO steps; about a minute)::

    python examples/trl_grpo_alfworld.py

A random tiny model would answer gibberish: every action invalid, every reward 0, every advantage
0. The short clone (``--warm-start-steps``, 0 to skip) makes it answer ``<action>CMD</action>``,
so the G episodes of a task reach different numbers of new places and the progress-conditioned
reward, the advantages and the loss are non-zero from the first step.

GPU variant (Qwen2.5-1.5B-Instruct from a local path or the hub, TRL's colocated vLLM; needs the
extras ``[trl,alfworld]`` and a vLLM that matches your torch)::

    python examples/trl_grpo_alfworld.py --model Qwen/Qwen2.5-1.5B-Instruct --vllm \\
        --steps 200 --num-generations 8 --prompts-per-step 8 --max-steps 50 --max-tokens 256 --lr 1e-6

The reward is ProGPO's progress-conditioned reward, scaled so that TRL's group normalisation gives
exactly ``sqrt((G-1)/G)`` x ProGPO(GRPO)'s advantages (see trainers/integrations/trl.py);
``outcome_reward`` is logged with weight 0.
"""

from __future__ import annotations

import argparse
import os
import tempfile


def _parse() -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="tiny-128x2", help="agents.models.load_model name or path")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--prompts-per-step", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=6, help="env steps per episode")
    parser.add_argument("--max-tokens", type=int, default=24, help="generated tokens per turn")
    parser.add_argument("--warm-start-steps", type=int, default=60, help="expert-cloning steps before GRPO (0: none)")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--vllm", action="store_true", help="generate with TRL's colocated vLLM (GPU)")
    parser.add_argument("--output-dir", default=None)
    return parser.parse_args()


def main() -> None:
    args = _parse()
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from agents.models import load_model
    from trainers.integrations.trl import (
        expert_warm_start,
        make_progress_conditioned_reward,
        make_rollout_func,
        outcome_reward,
    )

    on_gpu = torch.cuda.is_available() and args.vllm
    if not on_gpu:
        torch.set_num_threads(1)
    model, tokenizer = load_model(args.model, device="cuda" if on_gpu else "cpu")
    prompt = (
        "You are an agent in a text environment. Answer with <action>...</action>.\n"
        "Task: {goal}\nObservation: {observation}\nAdmissible actions: [{admissible}]\n"
    )
    rollout = make_rollout_func(
        "ProGPO-ALFWorld-v0",
        max_steps=args.max_steps,
        split="easy-train",
        prompt_template=prompt,
        action_format="action",
    )
    if args.warm_start_steps:
        stats = expert_warm_start(model, tokenizer, rollout, steps=args.warm_start_steps)
        print(
            f"warm start: {args.warm_start_steps} cloning steps, answer loss {stats['loss_first']:.2f} -> "
            f"{stats['loss_last']:.2f}"
        )
    g = args.num_generations
    config = GRPOConfig(
        output_dir=args.output_dir or tempfile.mkdtemp(prefix="trl_grpo_alfworld_"),
        num_generations=g,
        per_device_train_batch_size=g * args.prompts_per_step,
        max_steps=args.steps,
        max_completion_length=args.max_tokens,
        learning_rate=args.lr,
        beta=0.0,
        scale_rewards="group",
        reward_weights=[1.0, 0.0],
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=0,
        use_cpu=not on_gpu,
        bf16=on_gpu,
        use_vllm=args.vllm,
        **({"vllm_mode": "colocate"} if args.vllm else {}),
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        reward_funcs=[make_progress_conditioned_reward(g), outcome_reward],
        train_dataset=Dataset.from_dict({"prompt": [str(s) for s in range(1000)]}),
        rollout_func=rollout,
    )
    result = trainer.train()
    for row in trainer.state.log_history:
        if "loss" in row:
            reward = row.get("rewards/progress_conditioned_reward_exact/mean", 0.0)
            print(
                f"step {row['step']}: loss {float(row['loss']):+.4f}  progress-conditioned reward {float(reward):.3g}  "
                f"success {float(row.get('rewards/outcome_reward/mean', 0)):.2f}"
            )
    print(f"done: {result.global_step} steps, mean loss {result.training_loss:.4f}")


if __name__ == "__main__":
    main()
