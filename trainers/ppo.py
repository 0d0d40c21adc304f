"""The PPO-clip update over an iteration's recorded steps: one function, read top to bottom.

:func:`ppo_update` runs the epochs and mini-batches of one iteration: per mini-batch, forward
passes in micro-batches, the clipped loss (:func:`trainers.losses.ppo_clip_loss`) weighted so that
the mini-batch's loss is its token-weighted mean, backward, gradient clipping, one AdamW step.
Everything that several processes change (sums over ranks, the gradient all-reduce of replicated
weights, the lockstep padding of sharded ones) sits behind a :class:`Comm`
(:func:`comm_for`): with one process every call is the identity.

What feeds it (``Trainer.update``): one :class:`UpdateBatch` -- the chosen steps' policy outputs,
their old and reference log-probs, advantages (the invalid-action penalty already paid, see
:func:`trainers.advantages.penalized_advantages`), token weights (:func:`token_weights`)
and token costs -- a :class:`PPOConfig` and a :class:`Learner` (forward passes and the optimizer).
Micro-batches hold ``micro_batch_size`` decisions, or, with ``micro_batch_tokens``, as many as fit
in that many padded token positions (:func:`micro_batches`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import torch

from agents.batching import chunks
from trainers import distributed, stop_request
from trainers.losses import ppo_clip_loss
from trainers.teachers import DistillTargets, gated_distill, symmetric_kl, topk_symmetric_kl

if TYPE_CHECKING:
    from trainers.config import TrainConfig

__all__ = ["Comm", "Learner", "PPOConfig", "UpdateBatch", "comm_for", "micro_batches", "ppo_update", "token_weights"]

#: update statistics that are means under the loss's token weights (traj-mean: 1 / trajectory length)
WEIGHTED = ("pg_loss", "kl")


def token_weights(step_traj: Sequence[int], chosen: Sequence[int], n_tokens: Sequence[int], agg: str) -> list[float]:
    """Per-token loss weight of each chosen step: 1 (``token-mean``), or, ``traj-mean``, 1 / (steps
    in its trajectory x tokens in the step), so that every trajectory weighs the same whatever its
    length. ``step_traj``: the trajectory of every step; ``chosen``: the steps in the update;
    ``n_tokens``: their token counts.

    >>> token_weights([0, 0, 1], [0, 2], [4, 2], "traj-mean"), token_weights([0, 0, 1], [0, 2], [4, 2], "token-mean")
    ([0.125, 0.5], [1.0, 1.0])
    """
    traj_len = np.bincount(list(step_traj)) if len(step_traj) else np.zeros(0)
    return [1.0 / (float(traj_len[step_traj[i]]) * max(n, 1)) if agg == "traj-mean" else 1.0
            for i, n in zip(chosen, n_tokens)]


@dataclass(frozen=True)
class PPOConfig:
    """The PPO-clip update's settings (the PPO fields of :class:`trainers.config.TrainConfig`).

    >>> PPOConfig(micro_batch_tokens=4096).clip_eps
    0.2
    """

    clip_eps: float = 0.2  # PPO clip range
    kl_coef: float = 0.0  # weight of the k3 KL to the reference policy
    entropy_coef: float = 0.0  # entropy bonus weight
    max_grad_norm: float = 1.0  # gradient clipping norm
    ppo_epochs: int = 1  # passes over the batch
    num_minibatches: int = 4  # optimizer steps per epoch
    micro_batch_size: int = 4  # decisions per forward/backward pass (when micro_batch_tokens is 0)
    micro_batch_tokens: int = 0  # > 0: a pass holds as many decisions as fit in this many padded positions

    @classmethod
    def from_config(cls, cfg: TrainConfig) -> "PPOConfig":
        """The PPO fields of a :class:`~trainers.config.TrainConfig` (token micro-batches when
        ``batch_decisions`` is on)."""
        tokens = int(cfg.micro_batch_tokens) if cfg.batch_decisions != "off" else 0
        return cls(clip_eps=float(cfg.clip_eps), kl_coef=float(cfg.kl_coef), entropy_coef=float(cfg.entropy_coef),
                   max_grad_norm=float(cfg.max_grad_norm), ppo_epochs=int(cfg.ppo_epochs),
                   num_minibatches=int(cfg.num_minibatches), micro_batch_size=int(cfg.micro_batch_size),
                   micro_batch_tokens=tokens)


@dataclass
class UpdateBatch:
    """What the loss needs of the steps of one update.

    Attributes:
        outputs: each step's policy output (what ``Learner.forward`` re-scores).
        old_logprobs / ref_logprobs: per step, the old (behaviour) and reference log-probs, CPU float32.
        advantages: per step, its advantage (invalid-action penalty included).
        token_counts: per step, log-prob elements (tokens; score mode: 1).
        token_weights: per step, the loss weight of each of its tokens.
        cost: per step, the token positions its forward pass takes (micro-batch sizing).
        keys: per step, :func:`agents.batching.step_key` (steps with one key share a computation).
        n_global: steps over all ranks.
        distill: the teacher's targets (:mod:`trainers.teachers`), or None (RL only).
    """

    outputs: list[Any]
    old_logprobs: list[torch.Tensor]
    ref_logprobs: list[torch.Tensor] | None
    advantages: torch.Tensor
    token_counts: list[int]
    token_weights: list[float]
    cost: list[int] = field(default_factory=list)
    keys: list[tuple] = field(default_factory=list)
    n_global: int = 0
    distill: DistillTargets | None = None

    @classmethod
    def build(cls, outputs: list[Any], old: list[torch.Tensor], ref: list[torch.Tensor] | None, adv: torch.Tensor,
              step_traj: Sequence[int], chosen: Sequence[int], loss_agg: str, cost: list[int], keys: list[tuple],
              n_global: int) -> "UpdateBatch":
        """The batch of the ``chosen`` steps (indices into ``step_traj``, every step's trajectory):
        token counts from ``old``, token weights by ``loss_agg``; ``cost`` / ``keys``:
        :func:`agents.batching.step_tokens` / :func:`~agents.batching.step_key` of each output."""
        n_tok = [int(o.numel()) for o in old]
        return cls(outputs, old, ref, adv, n_tok, token_weights(step_traj, chosen, n_tok, loss_agg), cost, keys,
                   n_global)


@dataclass
class Learner:
    """The trainable side of an update: ``forward(outputs)`` gives new log-probs and entropies (or
    ``None``) of some steps, ``pad_forward()`` the log-probs of any one step (a sharded rank's
    padding pass), both under autocast; the optimizer and the parameters it steps."""

    forward: Callable[[list[Any]], tuple[list[torch.Tensor], Any]]
    pad_forward: Callable[[], list[torch.Tensor]]
    optimizer: torch.optim.Optimizer
    params: Sequence[torch.nn.Parameter]
    #: the student's whole log-distributions of some steps (a privileged teacher's loss compares them)
    distributions: Callable[[list[Any]], list[torch.Tensor]] | None = None
    #: called after every optimizer step (an EMA teacher follows the student)
    after_step: Callable[[], None] | None = None


def micro_batches(part: Sequence[int], cost: Sequence[int], cfg: PPOConfig,
                  keys: Sequence[Any] | None = None) -> list[list[int]]:
    """``part`` (step indices) split into forward/backward passes: ``micro_batch_size`` steps each,
    or, with ``micro_batch_tokens``, as many as fit in that many token positions. Token passes take
    the steps in ``keys`` order: steps of one key (one decision, drawn by several members) land in
    one pass and are computed once (they cost nothing after the first), and prompts that share a
    prefix sit side by side. Gradients are summed over a mini-batch's passes, so the grouping
    changes float rounding only.

    >>> micro_batches([0, 1, 2], [5, 5, 9], PPOConfig(micro_batch_size=2))
    [[0, 1], [2]]
    >>> micro_batches([2, 0, 1], [5, 9, 9], PPOConfig(micro_batch_tokens=9), keys=["b", "a", "a"])
    [[2, 1], [0]]
    """
    part = list(part)
    if cfg.micro_batch_tokens <= 0:
        return chunks(part, cfg.micro_batch_size)
    if keys is not None:
        part.sort(key=lambda j: keys[j])
    out: list[list[int]] = []
    current: list[int] = []
    used = 0
    for j in part:
        new = not current or keys is None or keys[j] != keys[current[-1]]
        c = int(cost[j]) if new else 0
        if current and new and used + c > cfg.micro_batch_tokens:
            out.append(current)
            current, used = [], 0
        current.append(j)
        used += c
    if current:
        out.append(current)
    return out


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


def ppo_update(batch: UpdateBatch, cfg: PPOConfig, learner: Learner, comm: Comm, gen: torch.Generator,
               on_micro_batch: Callable[[], Any] = lambda: None) -> dict[str, float]:
    """PPO-clip epochs over ``batch``; ``gen`` draws the mini-batch order; returns the update's
    statistics."""
    n_global, optimizer, params = batch.n_global, learner.optimizer, learner.params
    sums = {"pg_loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_fraction": 0.0, "approx_kl_old": 0.0}
    tok_total, w_total, grad_norms, optimizer_steps = 0, 0.0, [], 0
    n_tok, tok_w = batch.token_counts, batch.token_weights
    teacher = batch.distill
    routed = teacher.routed if teacher is not None and teacher.mode == "privileged" else None
    dsum = {"kl": 0.0, "kl_weight": 0.0, "gate": 0.0, "gate_tokens": 0.0}
    for _ in range(cfg.ppo_epochs):
        perm = torch.randperm(len(batch.outputs), generator=gen).tolist()
        for part in np.array_split(np.array(perm), min(cfg.num_minibatches, n_global)):
            part = part.tolist()
            kd_part = [j for j in part if routed[j]] if routed is not None else []
            if kd_part:  # a privileged teacher's steps take the distillation loss, not the RL loss
                part = [j for j in part if not routed[j]]  # type: ignore[index]
            mb_tokens, mb_weight = comm.sum([sum(n_tok[j] for j in part), sum(tok_w[j] * n_tok[j] for j in part)])
            mb_tokens = int(mb_tokens)
            if mb_tokens == 0 and not kd_part:
                continue
            optimizer.zero_grad(set_to_none=True)
            share = len(part) / (len(part) + len(kd_part))  # each step counts once, in one of the two losses
            if kd_part:
                _distill_pass(kd_part, batch, cfg, learner, comm, 1.0 - share, dsum)
            for micro in comm.pad_micro_batches(micro_batches(part, batch.cost, cfg, batch.keys or None)) if part else []:
                if micro is None:  # padding: a zero-weight pass over any step
                    pad = learner.pad_forward()
                    (torch.cat([x.float().reshape(-1) for x in pad]).sum() * 0.0).backward()
                    continue
                stop_request.raise_if_requested()
                new, ents = learner.forward([batch.outputs[j] for j in micro])
                lp = torch.cat([x.float().reshape(-1) for x in new])
                dev, k = lp.device, int(lp.numel())
                ent_t = torch.cat([e.float().reshape(-1) for e in ents]).to(dev) if ents else None
                if ent_t is not None and ent_t.numel() != k:  # per-step (score mode) -> per token
                    ent_t = None
                w_t = torch.cat([torch.full((n_tok[j],), tok_w[j]) for j in micro]).to(dev)
                w_sum = float(w_t.sum())
                scale = comm.loss_scale * w_sum / mb_weight
                out = ppo_clip_loss(lp, torch.cat([batch.old_logprobs[j] for j in micro]).to(dev),
                                    torch.cat([batch.advantages[j].expand(n_tok[j]) for j in micro]).to(dev), cfg.clip_eps,
                                    torch.cat([batch.ref_logprobs[j] for j in micro]).to(dev) if batch.ref_logprobs is not None else None,
                                    cfg.kl_coef, cfg.entropy_coef, weight=scale * share if kd_part else scale,
                                    entropies=ent_t, token_weights=w_t)
                loss = out.loss
                if teacher is not None and teacher.mode == "hindsight":
                    loss = loss + _hindsight_term(micro, lp, w_t, batch, mb_weight, comm.loss_scale, dsum)
                loss.backward()
                for key in sums:  # pg_loss and kl are means under the token weights, the others token means
                    sums[key] += float(getattr(out, key)) * (w_sum if key in WEIGHTED else k)
                tok_total += k
                w_total += w_sum
                on_micro_batch()
            comm.after_backward(params)
            grad_norms.append(float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)))
            optimizer.step()
            optimizer_steps += 1
            if learner.after_step is not None:
                learner.after_step()
    optimizer.zero_grad(set_to_none=True)
    totals = comm.sum([*sums.values(), tok_total, w_total])
    sums, tok_total, w_total = dict(zip(sums, totals[:-2])), int(totals[-2]), float(totals[-1])
    stats = {key if key in ("kl", "clip_fraction") else f"update/{key}": value / (w_total if key in WEIGHTED else tok_total)
             if (w_total if key in WEIGHTED else tok_total) > 0 else 0.0 for key, value in sums.items()}
    stats.update({"update/tokens": float(tok_total), "update/optimizer_steps": float(optimizer_steps),
                  "update/grad_norm": float(np.mean(grad_norms)) if grad_norms else 0.0})
    if teacher is not None:
        kl, kl_w, gate, gate_n = comm.sum(list(dsum.values()))
        if teacher.mode == "privileged":  # the mean symmetric KL under the entropy weights
            stats["distill/kl"] = kl / kl_w if kl_w > 0 else 0.0
        else:  # the mean gate of the hindsight term
            stats["distill/gate"] = gate / gate_n if gate_n > 0 else 0.0
    return stats


def _hindsight_term(micro: Sequence[int], lp: torch.Tensor, w_t: torch.Tensor, batch: UpdateBatch,
                    mb_weight: float, loss_scale: float, dsum: dict[str, float]) -> torch.Tensor:
    """SEED's gated term of a micro-batch, ``lambda * sum(w * g * (sg[l_skill] - l_theta)) /
    mb_weight`` (the RL loss's token weights and normaliser), over the steps that have a skill."""
    teacher = batch.distill
    assert teacher is not None
    offsets = np.cumsum([0] + [batch.token_counts[j] for j in micro])
    terms, gates, weights = [], [], []
    for i, j in enumerate(micro):
        skill = teacher.skill[j]
        if skill is None:
            continue
        mine = lp[offsets[i]: offsets[i + 1]]
        term, gate = gated_distill(mine, skill.to(lp.device).reshape(mine.shape), teacher.beta)
        terms.append(term)
        gates.append(gate)
        weights.append(w_t[offsets[i]: offsets[i + 1]])
    if not terms:
        return lp.sum() * 0.0
    gate = torch.cat(gates)
    dsum["gate"] += float(gate.sum())
    dsum["gate_tokens"] += float(gate.numel())
    return teacher.coef * loss_scale * (torch.cat(weights) * torch.cat(terms)).sum() / mb_weight


def _distill_pass(kd_part: Sequence[int], batch: UpdateBatch, cfg: PPOConfig, learner: Learner, comm: Comm,
                  share: float, dsum: dict[str, float]) -> None:
    """The privileged teacher's loss on a mini-batch's routed steps: the weighted mean of the
    symmetric KL between teacher and student over their decisions (score mode) or response
    tokens (generate mode), times ``share`` (the routed steps' part of the mini-batch)."""
    teacher = batch.distill
    assert teacher is not None
    if learner.distributions is None:
        raise RuntimeError("a privileged teacher needs Learner.distributions (the student's whole distributions)")
    total_w = float(comm.sum([sum(float(teacher.weight[j].sum()) for j in kd_part)])[0])  # type: ignore[union-attr]
    if total_w <= 0:
        return
    for micro in micro_batches(kd_part, batch.cost, cfg, batch.keys or None):
        dists = learner.distributions([batch.outputs[j] for j in micro])
        losses = []
        for j, d in zip(micro, dists):
            t, w = teacher.teacher[j].to(d.device), teacher.weight[j].to(d.device)  # type: ignore[union-attr]
            idx = teacher.index[j]
            kl = topk_symmetric_kl(t, idx.to(d.device), d) if idx is not None else symmetric_kl(t, d.float()).reshape(1)
            losses.append((w.reshape(-1) * kl.reshape(-1)).sum())
            dsum["kl"] += float((w.reshape(-1) * kl.detach().reshape(-1)).sum())
            dsum["kl_weight"] += float(w.sum())
        (comm.loss_scale * share * torch.stack(losses).sum() / total_w).backward()

