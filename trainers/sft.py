"""Behaviour cloning warm start: imitate the searching ALFWorld expert in score mode.

The policy's score-mode distribution is a softmax over the admissible commands; cloning
maximizes log pi(expert command | prompt) under exactly that distribution (the prompt the policy
itself builds, memory line included), so RL later starts from the cloned policy with PPO ratios
of 1. Demonstrations come from :class:`agents.search_expert.ALFWorldSearchAgent`, which reads
only what the agent reads (the handcoded expert reads hidden facts and cannot be imitated).

Pieces: :func:`collect_demos` (play the expert, keep every decision), :func:`behaviour_clone`
(AdamW on the mean negative log-likelihood, with held-out step accuracy).

Example (toy-sized; the trainer runs this as its ``warm_start: bc`` stage)::

    >>> from trainers.envs import make_env_fn                                # doctest: +SKIP
    >>> demos, wins = collect_demos(make_env_fn("alfworld", "easy-train", 20), n_episodes=12)  # doctest: +SKIP
    >>> stats = behaviour_clone(policy, demos, steps=50)                      # doctest: +SKIP
    >>> stats["bc/step_accuracy"]                                            # doctest: +SKIP
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch

from agents.search_expert import ALFWorldSearchAgent

__all__ = ["Demo", "behaviour_clone", "collect_demos"]

_INFO_KEYS = ("goal", "task_type", "admissible_commands", "step", "task_id")


@dataclass
class Demo:
    """One expert decision: what the agent saw and the command the expert chose."""

    observation: str
    info: dict[str, Any]
    history: list[tuple[str, str]]
    action: str


def collect_demos(
    env_fn: Callable[[], Any], n_episodes: int | None = None, seed: int = 0, agent: Any = None
) -> tuple[list[Demo], list[bool]]:
    """Play the searching expert on the tasks of ``env_fn``'s split; every decision becomes a Demo.

    Episodes cycle through the split's task ids in order (``n_episodes`` default: each once); an
    env without task ids (WebShop) plays ``n_episodes`` episodes of seeds ``seed, seed + 1, ...``.
    Returns ``(demos, won per episode)``; demos of lost episodes are kept too (the expert's
    decisions are still the imitation target).
    """
    agent = agent or ALFWorldSearchAgent()
    env = env_fn()
    try:
        ids = getattr(env.unwrapped, "task_ids", None)  # WebShop has none: its goal comes from the seed
        if ids is None and n_episodes is None:
            raise ValueError("collect_demos: this env lists no task ids; pass n_episodes (bc_episodes)")
        n = len(ids) if n_episodes is None and ids is not None else int(n_episodes)  # type: ignore[arg-type]  # one of the two is set, checked above
        demos: list[Demo] = []
        wins: list[bool] = []
        for e in range(n):
            options = {"task_id": ids[e % len(ids)]} if ids else None
            obs, info = env.reset(seed=seed + e, options=options)
            history: list[tuple[str, str]] = []
            while True:
                action = agent.act([obs], [info], [history])[0]
                demos.append(Demo(obs, {k: info[k] for k in _INFO_KEYS if k in info}, list(history), action))
                nxt, _, term, trunc, info = env.step(action)
                history.append((obs, action))
                obs = nxt
                if term or trunc:
                    wins.append(bool(info.get("won", False)))
                    break
        return demos, wins
    finally:
        env.close()


def behaviour_clone(
    policy: Any,
    demos: Sequence[Demo],
    steps: int = 300,
    batch_size: int = 16,
    lr: float = 1e-3,
    seed: int = 0,
    holdout: float = 0.1,
    on_step: Callable[[int], None] | None = None,
    lr_schedule: str = "constant",
    micro_batch: int = 0,
) -> dict[str, float]:
    """Fit ``policy`` (an :class:`agents.score_policy.ScorePolicy`) to the demos: ``steps`` AdamW steps of
    mean -log pi(expert command). ``lr_schedule``: ``"constant"`` or ``"cosine"`` (lr decays to 0
    over the steps, so the clone ends at a settled point rather than wherever the last noisy step
    left it). ``micro_batch``: decisions per forward/backward pass, their gradients summed into the
    batch's (0: the whole batch in one pass); a real model's activations over 16 prompts of
    hundreds of tokens take tens of GB in one pass. Returns ``bc/*`` metrics (loss, held-out step
    accuracy)."""
    if lr_schedule not in ("constant", "cosine"):
        raise ValueError(f"lr_schedule must be 'constant' or 'cosine', got {lr_schedule!r}")
    outs = [o for d in demos if (o := policy.forced_step(d.observation, d.info, d.history, d.action)) is not None]
    if not outs:
        raise ValueError("behaviour_clone: no demonstration whose command is among the policy's candidates")
    rng = random.Random(seed)
    order = list(range(len(outs)))
    rng.shuffle(order)
    n_hold = int(len(outs) * holdout) if len(outs) >= 20 else 0
    held, train = [outs[i] for i in order[:n_hold]], [outs[i] for i in order[n_hold:]]
    model = policy.model
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    total = max(int(steps), 1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, (lambda k: 0.5 * (1.0 + math.cos(math.pi * k / total))) if lr_schedule == "cosine" else (lambda k: 1.0)
    )
    model.train()
    losses: list[float] = []
    cursor = len(train)
    for _ in range(int(steps)):
        if cursor + batch_size > len(train):
            rng.shuffle(train)
            cursor = 0
        batch = train[cursor : cursor + batch_size]
        cursor += batch_size
        opt.zero_grad(set_to_none=True)
        if micro_batch <= 0 or micro_batch >= len(batch):
            lps = torch.cat([lp.reshape(-1) for lp in policy.compute_logprobs(batch)])
            loss = -lps.mean()
            loss.backward()
        else:  # the same mean: each pass's sum of -log-probs, the gradients scaled by the count at the end
            neg_sum, count = 0.0, 0
            for start in range(0, len(batch), micro_batch):
                part = torch.cat([lp.reshape(-1) for lp in policy.compute_logprobs(batch[start : start + micro_batch])])
                (-part.sum()).backward()
                neg_sum, count = neg_sum - float(part.detach().sum()), count + part.numel()
            for p in params:
                if p.grad is not None:
                    p.grad.div_(max(count, 1))
            loss = torch.tensor(neg_sum / max(count, 1))
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(1)
    model.eval()
    stats = {
        "bc/demos": float(len(outs)),
        "bc/steps": float(steps),
        "bc/loss": float(np.mean(losses[-20:])) if losses else math.nan,
        "bc/step_accuracy": step_accuracy(policy, held) if held else math.nan,
    }
    return stats


def step_accuracy(policy: Any, outs: Sequence[Any]) -> float:
    """Fraction of decisions where the expert's command is the policy's most likely candidate
    (one scoring pass per decision)."""
    hits = 0
    with torch.no_grad():
        for o in outs:
            hits += int(torch.argmax(policy.command_scores(o))) == o.chosen_index
    return hits / max(len(outs), 1)
