"""Speed and memory of generate mode's PPO update by path: one update, median of runs.

    python benchmarks/update_paths.py                                    # CPU: tiny-128x2
    python benchmarks/update_paths.py --device cuda --model random-qwen2.5-1.5b --groups 16 --group-size 8 \\
        --steps 3 --prompt-tokens 600 --response-tokens 256 --profile

The steps are shaped like a rollout's: per group a prompt prefix its members share, growing by a
history turn each step, and fixed-length answers. Each path runs the package's own update,
:func:`trainers.loop.ppo.ppo_update` (one mini-batch: forward and backward per micro-batch of
``--micro-batch-tokens`` positions, gradient clipping, one AdamW step, fused on a GPU), after the
old log-probs' forward passes over the same micro-batches, as the trainer runs them:

* ``prefix``: micro-batches in prompt-prefix order (score mode's order; generate mode's before it
  sorted by length);
* ``length``: longest first, padding counted in the budget (generate mode's default);
* ``length + logit chunks``: the same, the output head and log-softmax over ``--logit-chunk``
  response positions at a time (``--logit-chunk-tokens``);
* ``length + checkpointing``: the same with activation checkpointing (``--gradient-checkpointing``).

Prints one table: seconds, input tokens/s, padding (padded positions over real ones), TFLOP/s at
6 N FLOPs per input token (2 N for the old log-probs' forward), peak GPU memory, ratio to
``prefix``; ``--profile`` adds the ten costliest operators of one ``length`` update. ``--json``
writes the rows.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_timing import model_parser

from agents.backends import SamplingConfig, TransformersBackend
from agents.batching import step_key, step_tokens
from agents.contract import StepOutput
from agents.generate_policy import GeneratePolicy
from agents.models import load_model
from trainers.loop.ppo import Comm, Learner, PPOConfig, UpdateBatch, micro_batches, ppo_update
from trainers.loop.updater import enable_gradient_checkpointing

PATHS = ("prefix", "length", "length + logit chunks", "length + checkpointing")


def rollout_steps(
    groups: int, group_size: int, steps: int, prompt_tokens: int, response_tokens: int, vocab: int, seed: int = 0
) -> list[StepOutput]:
    """Steps shaped like a rollout's: a group's members share the head of their prompt (the
    instructions and the goal, a third of ``prompt_tokens``), then each has its own history, which
    grows by a turn per step up to ``prompt_tokens`` at the last step (give or take a few tokens)."""
    gen = torch.Generator().manual_seed(seed)
    head_n = max(1, prompt_tokens // 3)
    turn = max(1, (prompt_tokens - head_n) // max(steps, 1))
    out = []
    for _ in range(groups):
        head = torch.randint(3, vocab, (head_n,), generator=gen).tolist()
        for _member in range(group_size):
            history = torch.randint(3, vocab, (prompt_tokens,), generator=gen).tolist()
            for k in range(steps):
                jitter = int(torch.randint(0, max(1, turn // 4), (1,), generator=gen))
                prompt = head + history[: max(0, (k + 1) * turn - jitter)]
                response = torch.randint(3, vocab, (response_tokens,), generator=gen).tolist()
                out.append(
                    StepOutput(
                        action="look",
                        prompt_ids=prompt,
                        response_ids=response,
                        old_logprobs=[-1.0] * response_tokens,
                        finish_reason="length",
                    )
                )
    return out


def padding(passes: list[list[int]], cost: list[int]) -> float:
    """Padded positions over real ones, minus 1 (every pass pads its rows to its longest)."""
    padded = sum(len(p) * max(cost[j] for j in p) for p in passes)
    return padded / max(1, sum(cost)) - 1.0


def run_update(
    policy: GeneratePolicy, steps: list[StepOutput], cfg: PPOConfig, optimizer: torch.optim.Optimizer, autocast: Any
) -> dict[str, float]:
    """Old log-probs (no grad) then one PPO update over ``steps``, as the trainer's Updater runs them."""
    cost, keys = [step_tokens(s) for s in steps], [step_key(s) for s in steps]
    passes = micro_batches(range(len(steps)), cost, cfg, keys)
    device = next(policy.model.parameters()).device
    _sync(device)
    t0 = time.perf_counter()
    old: list[torch.Tensor | None] = [None] * len(steps)
    policy.model.eval()
    with torch.no_grad(), autocast():
        for p in passes:
            for j, lp in zip(p, policy.compute_logprobs([steps[j] for j in p], batch_size=len(p))):
                old[j] = lp.detach().float().cpu()
    _sync(device)
    t1 = time.perf_counter()
    adv = torch.as_tensor(np.random.default_rng(0).standard_normal(len(steps)), dtype=torch.float32)
    batch = UpdateBatch.build(
        list(steps),
        old,  # type: ignore[arg-type]  # every entry was set by the passes above
        None,
        adv,
        [i // 3 for i in range(len(steps))],
        list(range(len(steps))),
        "token-mean",
        cost,
        keys,
        len(steps),
    )

    def forward(micro: list[Any]) -> tuple[list[torch.Tensor], Any]:
        with autocast():
            return policy.compute_logprobs(micro, batch_size=len(micro)), None

    learner = Learner(
        forward, lambda: forward(steps[:1])[0], optimizer, [p for p in policy.model.parameters() if p.requires_grad]
    )
    policy.model.train()
    stats = ppo_update(batch, cfg, learner, Comm(), torch.Generator().manual_seed(0))
    _sync(device)
    t2 = time.perf_counter()
    return {
        "old_s": t1 - t0,
        "update_s": t2 - t1,
        "passes": float(len(passes)),
        "padding": padding(passes, cost),
        "input_tokens": float(sum(cost)),
        "pg_loss": stats["update/pg_loss"],
    }


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(
    name: str,
    policy: GeneratePolicy,
    steps: list[StepOutput],
    args: argparse.Namespace,
    optimizer: torch.optim.Optimizer,
    autocast: Any,
    params: int,
) -> dict[str, Any]:
    """One path: a warm-up update, then the median of ``args.repeats`` updates."""
    cfg = PPOConfig(micro_batch_tokens=args.micro_batch_tokens, num_minibatches=1, by_length=name != "prefix")
    policy.options = policy.options.replace(logit_chunk=args.logit_chunk if "chunks" in name else 0)
    model = policy.model
    if "checkpointing" in name:
        enable_gradient_checkpointing(model)
    device = next(model.parameters()).device
    try:
        run_update(policy, steps, cfg, optimizer, autocast)  # warm-up: allocator, kernels
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        runs = [run_update(policy, steps, cfg, optimizer, autocast) for _ in range(args.repeats)]
    finally:
        if "checkpointing" in name:
            model.gradient_checkpointing_disable()
    old_s = statistics.median(r["old_s"] for r in runs)
    update_s = statistics.median(r["update_s"] for r in runs)
    tokens = runs[0]["input_tokens"]
    return {
        "path": name,
        "old_logprob_s": old_s,
        "update_s": update_s,
        "seconds": old_s + update_s,
        "input_tokens": tokens,
        "passes": runs[0]["passes"],
        "padding": runs[0]["padding"],
        "update_tokens_per_s": tokens / update_s,
        "update_tflops": 6 * params * tokens / update_s / 1e12,
        "old_logprob_tflops": 2 * params * tokens / old_s / 1e12,
        "peak_gpu_mem_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
        "pg_loss": runs[0]["pg_loss"],
    }


def profile(
    policy: GeneratePolicy,
    steps: list[StepOutput],
    args: argparse.Namespace,
    optimizer: torch.optim.Optimizer,
    autocast: Any,
) -> list[dict[str, Any]]:
    """The ten operators with the most self time over one ``length`` update (device time on a GPU)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    device = next(policy.model.parameters()).device
    policy.options = policy.options.replace(logit_chunk=0)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    cfg = PPOConfig(micro_batch_tokens=args.micro_batch_tokens, num_minibatches=1, by_length=True)
    with torch_profile(activities=activities) as prof:
        run_update(policy, steps, cfg, optimizer, autocast)
    attr = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    events = sorted(prof.key_averages(), key=lambda e: getattr(e, attr, 0.0), reverse=True)
    total = sum(getattr(e, attr, 0.0) for e in prof.key_averages()) or 1.0
    return [
        {"op": e.key, "self_ms": getattr(e, attr, 0.0) / 1e3, "share": getattr(e, attr, 0.0) / total, "calls": e.count}
        for e in events[:10]
    ]


def _parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    ap = model_parser(__doc__)
    ap.add_argument("--groups", type=int, default=4, help="task groups")
    ap.add_argument("--group-size", type=int, default=4, help="members per group")
    ap.add_argument("--steps", type=int, default=3, help="steps per episode")
    ap.add_argument("--prompt-tokens", type=int, default=160, help="the last step's prompt; earlier ones are shorter")
    ap.add_argument("--response-tokens", type=int, default=32, help="tokens per answer")
    ap.add_argument("--micro-batch-tokens", type=int, default=1024, help="token positions per forward/backward pass")
    ap.add_argument("--logit-chunk", type=int, default=256, help="response positions per output-head chunk")
    ap.add_argument("--repeats", type=int, default=3, help="timed updates per path (after a warm-up)")
    ap.add_argument("--paths", default=",".join(PATHS), help=f"comma-separated, of: {', '.join(PATHS)}")
    ap.add_argument("--profile", action="store_true", help="print the costliest operators of one length update")
    ap.add_argument("--threads", type=int, default=1, help="torch threads on the CPU")
    ap.add_argument("--json", help="write the rows here")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    unknown = [p for p in paths if p not in PATHS]
    if unknown:
        raise SystemExit(f"update_paths: unknown path(s) {', '.join(unknown)}; choose from {', '.join(PATHS)}")
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    model, tok = load_model(args.model, device=device)
    params = sum(p.numel() for p in model.parameters())
    policy = GeneratePolicy(
        model,
        tok,
        TransformersBackend(model, tok),
        "alfworld",
        fmt="action",
        sampling=SamplingConfig(max_new_tokens=args.response_tokens),
    )
    vocab = min(int(model.config.vocab_size), len(tok))
    steps = rollout_steps(args.groups, args.group_size, args.steps, args.prompt_tokens, args.response_tokens, vocab)
    fused = {"fused": True} if device.type == "cuda" else {}
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-7, **fused)

    def autocast() -> Any:  # the trainer's: bf16 compute over fp32 master weights on a GPU
        if device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    rows = [measure(name, policy, steps, args, optimizer, autocast, params) for name in paths]
    base = next((r for r in rows if r["path"] == "prefix"), rows[0])
    print(
        f"{args.model} ({params / 1e6:,.1f} M parameters) on {device.type}: {len(steps)} steps "
        f"({args.groups} groups x {args.group_size} x {args.steps} steps), prompts <= {args.prompt_tokens} tokens, "
        f"{args.response_tokens}-token answers, {args.micro_batch_tokens}-position passes, median of {args.repeats}"
    )
    print(
        "| path | old log-probs (s) | update (s) | passes | padding | update tokens/s | update TFLOP/s | "
        "peak GPU GiB | x prefix |\n|---|---|---|---|---|---|---|---|---|"
    )
    for r in rows:
        mem = f"{r['peak_gpu_mem_gib']:.1f}" if r["peak_gpu_mem_gib"] is not None else "-"
        print(
            f"| {r['path']} | {r['old_logprob_s']:.2f} | {r['update_s']:.2f} | {r['passes']:.0f} | "
            f"{100 * r['padding']:.1f}% | {r['update_tokens_per_s']:,.0f} | {r['update_tflops']:.3g} | {mem} | "
            f"{base['seconds'] / r['seconds']:.2f} |"
        )
    top = profile(policy, steps, args, optimizer, autocast) if args.profile else []
    if top:
        print(
            "\ncostliest operators of one length update (self time):\n| operator | ms | share | calls |\n|---|---|---|---|"
        )
        for t in top:
            print(f"| {t['op']} | {t['self_ms']:.1f} | {100 * t['share']:.1f}% | {t['calls']} |")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(
            json.dumps(
                {
                    "model": args.model,
                    "params": params,
                    "device": device.type,
                    "steps": len(steps),
                    "rows": rows,
                    "profile": top,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
