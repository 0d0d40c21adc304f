"""The PPO-clip update over an iteration's recorded steps: one function, read top to bottom.

:func:`ppo_update` runs the epochs and mini-batches of one iteration: per mini-batch, forward
passes in micro-batches, the clipped loss (:func:`trainers.losses.ppo_clip_loss`) weighted so that
the mini-batch's loss is its token-weighted mean, backward, gradient clipping, one AdamW step.
Everything that several processes change (sums over ranks, the gradient all-reduce of replicated
weights, the lockstep padding of sharded ones) sits behind a :class:`Comm`
(:func:`comm_for`): with one process every call is the identity.

What feeds it (``Trainer.update``): the chosen steps' policy outputs, their old and reference
log-probs, advantages and token weights (:func:`trainers.losses.token_weights`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch

from trainers import distributed
from trainers.losses import ppo_clip_loss

__all__ = ["Comm", "UpdateBatch", "comm_for", "ppo_update"]

#: update statistics that are means under the loss's token weights (traj-mean: 1 / trajectory length)
WEIGHTED = ("pg_loss", "kl")


@dataclass
class UpdateBatch:
    """The steps of one update: policy outputs, per-step old / reference log-probs (CPU float32),
    advantages, token counts and per-token loss weights."""

    outputs: list[Any]
    old: list[torch.Tensor]
    ref: list[torch.Tensor] | None
    adv: torch.Tensor
    n_tok: list[int]
    tok_w: list[float]


class Comm:
    """One process: every collective is the identity."""

    loss_scale = 1.0

    def sum(self, values: Sequence[float]) -> list[float]:
        return list(values)

    def pad_micro_batches(self, micros: list[list[int] | None]) -> list[list[int] | None]:
        return micros

    def after_backward(self, params: Sequence[torch.nn.Parameter]) -> None:
        pass


class ReplicatedComm(Comm):
    """Replicated weights (ddp): sums over ranks, gradients all-reduced after each mini-batch."""

    def sum(self, values: Sequence[float]) -> list[float]:
        return distributed.all_reduce_sum(values)

    def after_backward(self, params: Sequence[torch.nn.Parameter]) -> None:
        distributed.all_reduce_grads(params)


class ShardedComm(ReplicatedComm):
    """FSDP2: sharded forwards stay in lockstep (zero-weight padding passes); FSDP2 averages
    gradients over ranks, so the loss is scaled back up by the world size."""

    def __init__(self, world_size: int) -> None:
        self.loss_scale = float(world_size)

    def pad_micro_batches(self, micros: list[list[int] | None]) -> list[list[int] | None]:
        return micros + [None] * (int(distributed.all_reduce_max([len(micros)])[0]) - len(micros))

    def after_backward(self, params: Sequence[torch.nn.Parameter]) -> None:
        pass  # FSDP2 reduce-scatters the gradients itself


def comm_for(info: distributed.DistInfo) -> Comm:
    """The :class:`Comm` of this process's place in a run."""
    if not info.enabled:
        return Comm()
    return ShardedComm(info.world_size) if info.strategy == "fsdp2" else ReplicatedComm()


def ppo_update(batch: UpdateBatch, n_global: int, forward: Callable[[list[Any]], tuple[list[torch.Tensor], Any]],
               pad_forward: Callable[[], list[torch.Tensor]], optimizer: torch.optim.Optimizer,
               params: Sequence[torch.nn.Parameter], cfg: Any, comm: Comm, gen: torch.Generator,
               on_micro_batch: Callable[[], Any] = lambda: None) -> dict[str, float]:
    """PPO-clip epochs over ``batch`` (``n_global`` steps over all ranks); ``forward(outputs)``
    gives new log-probs and entropies (or ``None``) and ``pad_forward()`` the log-probs of any one
    step (a sharded rank's padding pass), both under autocast; returns the update's statistics."""
    sums = {"pg_loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_fraction": 0.0, "approx_kl_old": 0.0}
    tok_total, w_total, grad_norms, optimizer_steps = 0, 0.0, [], 0
    n_tok, tok_w = batch.n_tok, batch.tok_w
    for _ in range(cfg.ppo_epochs):
        perm = torch.randperm(len(batch.outputs), generator=gen).tolist()
        for part in np.array_split(np.array(perm), min(cfg.num_minibatches, n_global)):
            part = part.tolist()
            mb_tokens, mb_weight = comm.sum([sum(n_tok[j] for j in part), sum(tok_w[j] * n_tok[j] for j in part)])
            mb_tokens = int(mb_tokens)
            if mb_tokens == 0:
                continue
            optimizer.zero_grad(set_to_none=True)
            for micro in comm.pad_micro_batches(list(_chunks(part, cfg.micro_batch_size))):
                if micro is None:  # padding: a zero-weight pass over any step
                    pad = pad_forward()
                    (torch.cat([x.float().reshape(-1) for x in pad]).sum() * 0.0).backward()
                    continue
                new, ents = forward([batch.outputs[j] for j in micro])
                lp = torch.cat([x.float().reshape(-1) for x in new])
                dev, k = lp.device, int(lp.numel())
                ent_t = torch.cat([e.float().reshape(-1) for e in ents]).to(dev) if ents else None
                if ent_t is not None and ent_t.numel() != k:  # per-step (score mode) -> per token
                    ent_t = None
                w_t = torch.cat([torch.full((n_tok[j],), tok_w[j]) for j in micro]).to(dev)
                w_sum = float(w_t.sum())
                out = ppo_clip_loss(lp, torch.cat([batch.old[j] for j in micro]).to(dev),
                                    torch.cat([batch.adv[j].expand(n_tok[j]) for j in micro]).to(dev), cfg.clip_eps,
                                    torch.cat([batch.ref[j] for j in micro]).to(dev) if batch.ref is not None else None,
                                    cfg.kl_coef, cfg.entropy_coef, weight=comm.loss_scale * w_sum / mb_weight,
                                    entropies=ent_t, token_weights=w_t)
                out.loss.backward()
                for key in sums:  # pg_loss and kl are means under the token weights, the others token means
                    sums[key] += float(getattr(out, key)) * (w_sum if key in WEIGHTED else k)
                tok_total += k
                w_total += w_sum
                on_micro_batch()
            comm.after_backward(params)
            grad_norms.append(float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)))
            optimizer.step()
            optimizer_steps += 1
    optimizer.zero_grad(set_to_none=True)
    totals = comm.sum([*sums.values(), tok_total, w_total])
    sums, tok_total, w_total = dict(zip(sums, totals[:-2])), int(totals[-2]), float(totals[-1])
    stats = {key if key in ("kl", "clip_fraction") else f"update/{key}": value / (w_total if key in WEIGHTED else tok_total)
             if (w_total if key in WEIGHTED else tok_total) > 0 else 0.0 for key, value in sums.items()}
    stats.update({"update/tokens": float(tok_total), "update/optimizer_steps": float(optimizer_steps),
                  "update/grad_norm": float(np.mean(grad_norms)) if grad_norms else 0.0})
    return stats


def _chunks(items: Sequence[int], size: int) -> Any:
    for start in range(0, len(items), size):
        yield list(items[start:start + size])
