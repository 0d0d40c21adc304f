"""The PPO-clip update over an iteration's recorded steps: one function, read top to bottom.

:func:`ppo_update` runs the epochs and mini-batches of one iteration: per mini-batch, forward
passes in micro-batches, the clipped loss (:func:`trainers.loop.losses.ppo_clip_loss`) weighted so that
the mini-batch's loss is its token-weighted mean, backward, gradient clipping, one AdamW step.
Everything that several processes change (sums over ranks, the gradient all-reduce of replicated
weights, the lockstep padding of sharded ones) sits behind a :class:`Comm`
(:func:`comm_for`): with one process every call is the identity.

What feeds it (:meth:`trainers.loop.updater.Updater.update`): one :class:`UpdateBatch` -- the chosen steps' policy outputs,
their old and reference log-probs, advantages (the invalid-action penalty already paid, see
:func:`trainers.advantages.penalized_advantages`), token weights (:func:`token_weights`)
and token costs -- a :class:`PPOConfig` and a :class:`Learner` (forward passes and the optimizer).
Micro-batches hold ``micro_batch_size`` decisions, or, with ``micro_batch_tokens``, as many as fit
in that many padded token positions (:func:`micro_batches`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, runtime_checkable

import numpy as np
import torch

from agents.batching import chunks
from trainers import distributed, stop_request
from trainers.finite import check_finite
from trainers.loop.losses import PolicyLoss, ppo_clip_loss

if TYPE_CHECKING:
    from trainers.config import TrainConfig

__all__ = [
    "AuxTerm",
    "Comm",
    "Learner",
    "PPOConfig",
    "RoutingTerm",
    "UpdateBatch",
    "comm_for",
    "micro_batches",
    "ppo_update",
    "token_weights",
]

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
    return [
        1.0 / (float(traj_len[step_traj[i]]) * max(n, 1)) if agg == "traj-mean" else 1.0
        for i, n in zip(chosen, n_tokens)
    ]


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
    by_length: bool = False  # token passes take the steps longest first, not by prompt prefix (generate mode)

    @classmethod
    def from_config(cls, cfg: TrainConfig) -> "PPOConfig":
        """The PPO fields of a :class:`~trainers.config.TrainConfig` (token micro-batches when
        ``batch_decisions`` is on)."""
        tokens = int(cfg.micro_batch_tokens) if cfg.batch_decisions != "off" else 0
        # the fields of the config's own names, as the numbers they are
        same: dict[str, Any] = {
            k: float(getattr(cfg, k)) for k in ("clip_eps", "kl_coef", "entropy_coef", "max_grad_norm")
        }
        same.update({k: int(getattr(cfg, k)) for k in ("ppo_epochs", "num_minibatches", "micro_batch_size")})
        return cls(**same, micro_batch_tokens=tokens, by_length=cfg.policy_mode == "generate")


class AuxTerm(Protocol):
    """An auxiliary loss beside PPO-clip's, as the targets of one update (a teacher's term:
    :class:`trainers.teachers.HindsightTargets` is one). It adds a term to each micro-batch's
    loss (:meth:`micro_term`) and reports its statistics summed over ranks (:meth:`stats`)."""

    def micro_term(
        self,
        micro: Sequence[int],
        lp: torch.Tensor,
        w_t: torch.Tensor,
        batch: "UpdateBatch",
        mb_weight: float,
        loss_scale: float,
    ) -> torch.Tensor | None:
        """A term added to a micro-batch's RL loss (``lp``: its new log-probs, ``w_t``: token weights)."""

    def stats(self, comm: "Comm") -> dict[str, float]:
        """The term's statistics of the update, over every rank."""


@runtime_checkable
class RoutingTerm(AuxTerm, Protocol):
    """An :class:`AuxTerm` that also takes some steps of a mini-batch in place of the RL loss
    (:meth:`split`) and trains them with its own (:meth:`routed_loss`):
    :class:`trainers.teachers.PrivilegedTargets`, on the all-failed groups' steps."""

    def split(self, part: list[int]) -> tuple[list[int], list[int]]:
        """``part``'s steps for the RL loss and those for this loss alone (in their order)."""

    def routed_loss(
        self, routed: list[int], batch: "UpdateBatch", cfg: "PPOConfig", learner: "Learner", comm: "Comm", share: float
    ) -> None:
        """Backward of this loss on the ``routed`` steps of a mini-batch, times ``share``."""


@dataclass
class UpdateBatch:
    """What the loss needs of the steps of one update.

    Attributes:
        outputs: each step's policy output (what ``Learner.forward`` re-scores).
        old_logprobs: per step, the old (behaviour) log-probs, CPU float32.
        ref_logprobs: per step, the reference log-probs, CPU float32.
        advantages: per step, its advantage (invalid-action penalty included).
        token_counts: per step, log-prob elements (tokens; score mode: 1).
        token_weights: per step, the loss weight of each of its tokens.
        cost: per step, the token positions its forward pass takes (micro-batch sizing).
        keys: per step, :func:`agents.batching.step_key` (steps with one key share a computation).
        n_global: steps over all ranks.
        aux: an auxiliary loss's targets (:class:`AuxTerm`; a teacher's), or None (RL only).
    """

    outputs: list[Any]
    old_logprobs: list[torch.Tensor]
    ref_logprobs: list[torch.Tensor] | None
    advantages: torch.Tensor
    token_counts: list[int]
    token_weights: list[float]
    cost: list[int] = field(default_factory=list)
    keys: list[tuple[Any, ...]] = field(default_factory=list)
    n_global: int = 0
    aux: AuxTerm | None = None

    @classmethod
    def build(
        cls,
        outputs: list[Any],
        old: list[torch.Tensor],
        ref: list[torch.Tensor] | None,
        adv: torch.Tensor,
        step_traj: Sequence[int],
        chosen: Sequence[int],
        loss_agg: str,
        cost: list[int],
        keys: list[tuple[Any, ...]],
        n_global: int,
    ) -> "UpdateBatch":
        """The batch of the ``chosen`` steps (indices into ``step_traj``, every step's trajectory):
        token counts from ``old``, token weights by ``loss_agg``; ``cost`` / ``keys``:
        :func:`agents.batching.step_tokens` / :func:`~agents.batching.step_key` of each output."""
        n_tok = [int(o.numel()) for o in old]
        return cls(
            outputs, old, ref, adv, n_tok, token_weights(step_traj, chosen, n_tok, loss_agg), cost, keys, n_global
        )

    def passes(self, part: Sequence[int], cfg: "PPOConfig") -> list[list[int]]:
        """``part`` (indices into the batch) in the update's forward passes (:func:`micro_batches`):
        what an auxiliary term's own loss runs its passes in."""
        return micro_batches(part, self.cost, cfg, self.keys or None)


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


def micro_batches(
    part: Sequence[int], cost: Sequence[int], cfg: PPOConfig, keys: Sequence[Any] | None = None
) -> list[list[int]]:
    """``part`` (step indices) split into forward/backward passes: ``micro_batch_size`` steps each,
    or, with ``micro_batch_tokens``, as many as fit in that many token positions. Token passes take
    the steps in ``keys`` order: steps of one key (one decision, drawn by several members) land in
    one pass and are computed once (they cost nothing after the first), and prompts that share a
    prefix sit side by side. Gradients are summed over a mini-batch's passes, so the grouping
    changes float rounding only.

    With ``by_length`` (generate mode, whose passes pad every sequence to the longest and share no
    prefix) the steps go longest first, steps of one key still side by side, and a pass holds as
    many as fit with padding counted: rows x its first (longest) row.

    >>> micro_batches([0, 1, 2], [5, 5, 9], PPOConfig(micro_batch_size=2))
    [[0, 1], [2]]
    >>> micro_batches([2, 0, 1], [5, 9, 9], PPOConfig(micro_batch_tokens=9), keys=["b", "a", "a"])
    [[2, 1], [0]]
    >>> micro_batches([0, 1, 2, 3], [3, 9, 4, 8], PPOConfig(micro_batch_tokens=18, by_length=True), keys=list("abcd"))
    [[1, 3], [2, 0]]
    """
    part = list(part)
    if cfg.micro_batch_tokens <= 0:
        return chunks(part, cfg.micro_batch_size)
    if cfg.by_length:
        return _by_length(part, cost, cfg.micro_batch_tokens, keys)
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


def _by_length(part: list[int], cost: Sequence[int], budget: int, keys: Sequence[Any] | None) -> list[list[int]]:
    """``part`` longest first in passes of at most ``budget`` padded positions (rows x the first row's cost)."""
    part.sort(key=lambda j: (-int(cost[j]), keys[j]) if keys is not None else (-int(cost[j]), j))
    out: list[list[int]] = []
    for j in part:
        if out and (len(out[-1]) + 1) * int(cost[out[-1][0]]) <= budget:
            out[-1].append(j)
        else:
            out.append([j])
    return out


class Comm:
    """One process: every collective is the identity."""

    loss_scale = 1.0

    def sum(self, values: Sequence[float]) -> list[float]:
        return list(values)

    def pad_micro_batches(self, micros: Sequence[list[int] | None]) -> list[list[int] | None]:
        return list(micros)

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

    def pad_micro_batches(self, micros: Sequence[list[int] | None]) -> list[list[int] | None]:
        return [*micros, *[None] * (int(distributed.all_reduce_max([len(micros)])[0]) - len(micros))]

    def after_backward(self, params: Sequence[torch.nn.Parameter]) -> None:
        pass  # FSDP2 reduce-scatters the gradients itself


def comm_for(info: distributed.DistInfo) -> Comm:
    """The :class:`Comm` of this process's place in a run."""
    if not info.enabled:
        return Comm()
    return ShardedComm(info.world_size) if info.strategy == "fsdp2" else ReplicatedComm()


def ppo_update(
    batch: UpdateBatch,
    cfg: PPOConfig,
    learner: Learner,
    comm: Comm,
    gen: torch.Generator,
    on_micro_batch: Callable[[], Any] = lambda: None,
) -> dict[str, float]:
    """PPO-clip epochs over ``batch``; ``gen`` draws the mini-batch order; returns the update's
    statistics."""
    n_global, optimizer, params = batch.n_global, learner.optimizer, learner.params
    sums = {"pg_loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_fraction": 0.0, "approx_kl_old": 0.0}
    tok_total, w_total, grad_norms, optimizer_steps = 0, 0.0, [], 0
    n_tok, tok_w = batch.token_counts, batch.token_weights
    aux = batch.aux
    for _ in range(cfg.ppo_epochs):
        perm = torch.randperm(len(batch.outputs), generator=gen).tolist()
        for chunk in np.array_split(np.array(perm), min(cfg.num_minibatches, n_global)):
            part: list[int] = chunk.tolist()
            kd_part: list[int] = []
            if isinstance(aux, RoutingTerm):  # the term takes some steps to its own loss (a privileged teacher)
                part, kd_part = aux.split(part)
            mb_tokens, mb_weight = comm.sum([sum(n_tok[j] for j in part), sum(tok_w[j] * n_tok[j] for j in part)])
            mb_tokens = int(mb_tokens)
            if mb_tokens == 0 and not kd_part:
                continue
            optimizer.zero_grad(set_to_none=True)
            share = len(part) / (len(part) + len(kd_part))  # each step counts once, in one of the two losses
            if kd_part:
                aux.routed_loss(kd_part, batch, cfg, learner, comm, 1.0 - share)  # type: ignore[union-attr]  # kd_part is non-empty only for a RoutingTerm
            for micro in (
                comm.pad_micro_batches(micro_batches(part, batch.cost, cfg, batch.keys or None)) if part else []
            ):
                if micro is None:  # padding: a zero-weight pass over any step
                    pad = learner.pad_forward()
                    (torch.cat([x.float().reshape(-1) for x in pad]).sum() * 0.0).backward()  # type: ignore[no-untyped-call]  # torch's Tensor.backward is unannotated
                    continue
                stop_request.raise_if_requested()
                out, k, w_sum = _micro_backward(batch, cfg, learner, comm, micro, mb_weight, share if kd_part else None)
                check_finite("loss", float(out.loss.detach()))
                for key in sums:  # pg_loss and kl are means under the token weights, the others token means
                    sums[key] += float(getattr(out, key)) * (w_sum if key in WEIGHTED else k)
                tok_total += k
                w_total += w_sum
                on_micro_batch()
            comm.after_backward(params)
            grad_norms.append(float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)))
            check_finite("gradient", grad_norms[-1])  # before the step: the weights stay finite
            optimizer.step()
            optimizer_steps += 1
            if learner.after_step is not None:
                learner.after_step()
    optimizer.zero_grad(set_to_none=True)
    return _update_stats(sums, tok_total, w_total, grad_norms, optimizer_steps, comm, aux)


def _micro_backward(
    batch: UpdateBatch,
    cfg: PPOConfig,
    learner: Learner,
    comm: Comm,
    micro: list[int],
    mb_weight: float,
    share: float | None,
) -> tuple[PolicyLoss, int, float]:
    """One micro-batch's forward pass, PPO-clip loss (plus the auxiliary term) and backward pass.

    ``share``: the RL loss's share of the mini-batch where an auxiliary loss took some of its
    steps, else None. Returns the loss's parts, the micro-batch's token count and its weight.
    """
    n_tok, tok_w, aux = batch.token_counts, batch.token_weights, batch.aux
    new, ents = learner.forward([batch.outputs[j] for j in micro])
    lp = torch.cat([x.float().reshape(-1) for x in new])
    dev, k = lp.device, int(lp.numel())
    ent_t = torch.cat([e.float().reshape(-1) for e in ents]).to(dev) if ents else None
    if ent_t is not None and ent_t.numel() != k:  # per-step (score mode) -> per token
        ent_t = None
    w_t = torch.cat([torch.full((n_tok[j],), tok_w[j]) for j in micro]).to(dev)
    w_sum = float(w_t.sum())
    scale = comm.loss_scale * w_sum / mb_weight
    out = ppo_clip_loss(
        lp,
        torch.cat([batch.old_logprobs[j] for j in micro]).to(dev),
        torch.cat([batch.advantages[j].expand(n_tok[j]) for j in micro]).to(dev),
        cfg.clip_eps,
        torch.cat([batch.ref_logprobs[j] for j in micro]).to(dev) if batch.ref_logprobs is not None else None,
        cfg.kl_coef,
        cfg.entropy_coef,
        weight=scale * share if share is not None else scale,
        entropies=ent_t,
        token_weights=w_t,
    )
    loss = out.loss
    term = aux.micro_term(micro, lp, w_t, batch, mb_weight, comm.loss_scale) if aux is not None else None
    if term is not None:
        loss = loss + term
    loss.backward()  # type: ignore[no-untyped-call]  # torch's Tensor.backward is unannotated
    return out, k, w_sum


def _update_stats(
    sums: dict[str, float],
    tok_total: int,
    w_total: float,
    grad_norms: list[float],
    optimizer_steps: int,
    comm: Comm,
    aux: AuxTerm | None,
) -> dict[str, float]:
    """The update's statistics, summed over processes: token- or weight-means of the loss's parts."""
    totals = comm.sum([*sums.values(), tok_total, w_total])
    sums, tok_total, w_total = dict(zip(sums, totals[:-2])), int(totals[-2]), float(totals[-1])
    stats = {
        key if key in ("kl", "clip_fraction") else f"update/{key}": value / (w_total if key in WEIGHTED else tok_total)
        if (w_total if key in WEIGHTED else tok_total) > 0
        else 0.0
        for key, value in sums.items()
    }
    stats.update(
        {
            "update/tokens": float(tok_total),
            "update/optimizer_steps": float(optimizer_steps),
            "update/grad_norm": float(np.mean(grad_norms)) if grad_norms else 0.0,
        }
    )
    if aux is not None:
        stats.update(aux.stats(comm))
    return stats
