"""The update stage: PPO-clip epochs over an iteration's steps, and what they need.

:class:`Updater` owns the optimizer (AdamW over the trainable parameters), the frozen reference
of the KL term (a copy of the starting model, or with LoRA the base under a disabled adapter) and
bf16 autocast (fp32 master weights). :meth:`Updater.update` picks the steps that take a loss,
re-scores their old and reference log-probs where it must, builds the
:class:`~trainers.loop.ppo.UpdateBatch` and runs :func:`~trainers.loop.ppo.ppo_update`. A loss term beside
PPO's (a teacher's distillation) comes in through :class:`AuxiliaryLoss`; the update knows no
teacher.
"""

from __future__ import annotations

import contextlib
import copy
import time
from typing import Any, Iterator, Protocol, Sequence

import numpy as np
import torch

from agents.batching import step_key, step_tokens
from agents.contract import TrainablePolicy, scoring_with
from agents.logprobs import logprob_mismatch
from trainers import distributed, seeds
from trainers.config import ConfigError
from trainers.finite import check_finite_weights
from trainers.loop.ppo import Learner, PPOConfig, UpdateBatch, comm_for, micro_batches, ppo_update
from trainers.loop.sections import UpdateSection
from trainers.runs.console import progress_bar

__all__ = ["AuxiliaryLoss", "Updater", "rollout_mismatch", "warmup_factor"]


def warmup_factor(iteration: int, warmup_iterations: int) -> float:
    """Linear learning-rate warm-up: iteration ``i`` (1-based) runs at ``min(1, i / (W + 1))`` x lr.

    A fresh AdamW moves every weight by about ``lr`` at its first steps whatever the gradient's
    size (its second-moment estimate starts from one noisy sample), which on a small model is a
    large random change of the policy; a warm-up lets the estimates settle first.

    >>> [round(warmup_factor(i, 2), 3) for i in (1, 2, 3, 10)], warmup_factor(1, 0)
    ([0.333, 0.667, 1.0, 1.0], 1.0)
    """
    if warmup_iterations <= 0:
        return 1.0
    return min(1.0, iteration / (warmup_iterations + 1))


def rollout_mismatch(sampler: Sequence[torch.Tensor], trainer: Sequence[torch.Tensor]) -> dict[str, float]:
    """:func:`agents.logprobs.logprob_mismatch` (max / mean ``|logp_sampler - logp_trainer|`` over the
    action tokens) under the metric names ``rollout/logprob_mismatch_max`` / ``_mean``.

    >>> rollout_mismatch([torch.tensor([-1.0, -2.0])], [torch.tensor([-1.5, -2.0])])["rollout/logprob_mismatch_max"]
    0.5
    """
    m = logprob_mismatch(list(sampler), list(trainer))
    return {
        "rollout/logprob_mismatch_max": m["logprob_mismatch_max"],
        "rollout/logprob_mismatch_mean": m["logprob_mismatch_mean"],
    }


class AuxiliaryLoss(Protocol):
    """A loss term the update adds to PPO-clip's (a :class:`trainers.teachers.Teacher` is one).

    ``inputs`` is what the term was given for this iteration's rollout, opaque to the update.
    """

    def kept(self, inputs: Any, n_steps: int) -> Sequence[bool]:
        """Steps that take a loss even at zero advantage (they carry this term)."""

    def loss_targets(
        self, steps: Sequence[Any], chosen: Sequence[int], inputs: Any, iteration: int
    ) -> tuple[Any, dict[str, float]]:
        """What the loss compares the chosen steps with (``UpdateBatch.aux``), and its statistics."""

    def after_step(self) -> None:
        """Called after every optimizer step."""


def enable_gradient_checkpointing(model: torch.nn.Module) -> None:
    """Recompute each layer's activations in the backward pass (transformers' own checkpointing,
    non-reentrant): less memory per token, so longer micro-batches fit; it acts in training mode
    only, so acting and sampling are unchanged."""
    # transformers' and peft's methods, looked up by name: a plain torch module has neither
    base: Any = getattr(model, "get_base_model")() if hasattr(model, "get_base_model") else model
    if not hasattr(base, "gradient_checkpointing_enable"):
        raise ConfigError(f"gradient_checkpointing: {type(base).__name__} has no gradient_checkpointing_enable")
    base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if hasattr(model, "enable_input_require_grads"):  # LoRA: frozen embeddings would cut the graph
        getattr(model, "enable_input_require_grads")()


class Updater:
    """The optimizer, the KL reference and autocast of a run, and its update.

    Args:
        cfg: the update stage's section of the run's configuration (``lr``, ``bf16``, PPO-clip's options...).
        policy: the policy whose model is trained.
        dist: the run's processes (:func:`trainers.distributed.setup`).
        device: where the model is.
        aux: a loss term beside PPO's, or ``None``.
    """

    def __init__(
        self,
        cfg: UpdateSection,
        policy: TrainablePolicy,
        dist: distributed.DistInfo,
        device: torch.device,
        aux: AuxiliaryLoss | None = None,
    ) -> None:
        self.cfg, self.policy, self.dist, self.device, self.aux = cfg, policy, dist, device, aux
        self.model: torch.nn.Module = policy.model
        #: bf16 autocast compute over fp32 master weights and fp32 AdamW state: an
        #: update of 1e-6 is kept in the fp32 weights instead of rounding away in bf16
        self.amp_dtype: torch.dtype | None = torch.bfloat16 if (cfg.bf16 and device.type == "cuda") else None
        #: when the sampler runs other weights or kernels (vLLM, a bf16 rollout copy) the old
        #: log-probs are recomputed by the trainer's forward pass, and the measured mismatch is
        #: logged (rollout/logprob_mismatch_*)
        sampler = getattr(getattr(policy, "backend", None), "model", policy.model)
        self.recompute_old = bool(cfg.recompute_old_logprobs or cfg.vllm or sampler is not policy.model)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        if not self.params:
            raise ConfigError("the policy model has no trainable parameters")
        # a GPU steps every parameter in one fused kernel (the same AdamW, fp32 state)
        fused: dict[str, Any] = {"fused": True} if device.type == "cuda" else {}
        self.optimizer = torch.optim.AdamW(self.params, lr=cfg.lr, weight_decay=cfg.weight_decay, **fused)
        if cfg.gradient_checkpointing:
            enable_gradient_checkpointing(self.model)
        self.ref_model: torch.nn.Module | None = None
        if cfg.ppo.kl_coef > 0 and not cfg.lora:
            self.ref_model = copy.deepcopy(self.model).eval()
            for p in self.ref_model.parameters():
                p.requires_grad_(False)

    def autocast(self) -> Any:
        """bf16 autocast for forward passes when ``amp_dtype`` is set (weights stay fp32)."""
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)

    def reset_reference(self) -> None:
        """Make the KL reference the policy as it is now (after a warm start: RL starts here)."""
        if self.ref_model is not None:
            self.ref_model.load_state_dict(self.model.state_dict())

    def _chosen(self, advantages: np.ndarray, aux_inputs: Any) -> list[int]:
        """The steps that take a loss: all, or, with ``skip_zero_advantage`` and no KL or entropy
        term, those with an advantage or that the auxiliary term keeps."""
        cfg, idx = self.cfg, list(range(len(advantages)))
        if not (cfg.skip_zero_advantage and cfg.ppo.kl_coef == 0 and cfg.ppo.entropy_coef == 0):
            return idx
        kept = self.aux.kept(aux_inputs, len(idx)) if self.aux is not None and aux_inputs is not None else None
        return [i for i in idx if advantages[i] != 0.0 or (kept is not None and kept[i])]

    def update(
        self, steps: Sequence[Any], advantages: np.ndarray, iteration: int, aux_inputs: Any = None
    ) -> dict[str, float]:
        """PPO-clip epochs over ``steps`` (per mini-batch: token-mean loss, or trajectory-mean with
        ``loss_agg: traj-mean``), with the auxiliary term when ``aux_inputs`` is given."""
        cfg = self.cfg
        ppo_cfg = cfg.ppo
        idx = self._chosen(advantages, aux_inputs)
        comm = comm_for(self.dist)
        n_global = int(comm.sum([len(idx)])[0])
        stats: dict[str, float] = {"update/steps": float(n_global), "update/optimizer_steps": 0.0}
        if not n_global:
            return stats
        outputs = [steps[i].output for i in idx]
        cost, keys = [step_tokens(o) for o in outputs], [step_key(o) for o in outputs]
        t_old = time.perf_counter()
        old, ref = self._old_and_reference(outputs, cost, keys, ppo_cfg, stats)
        stats["time/old_logprob_s"] = time.perf_counter() - t_old
        # prompt + candidate (or response) tokens of the update's steps, over every rank
        stats["update/input_tokens"] = float(comm.sum([float(sum(cost))])[0])
        batch = UpdateBatch.build(
            outputs,
            old,
            ref,
            torch.as_tensor(advantages[idx], dtype=torch.float32),
            [s.traj for s in steps],
            idx,
            cfg.loss_agg,
            cost,
            keys,
            n_global,
        )
        if aux_inputs is not None and self.aux is not None:
            t_aux = time.perf_counter()
            with self.autocast():
                batch.aux, aux_stats = self.aux.loss_targets(steps, idx, aux_inputs, iteration)
            stats.update(aux_stats)
            stats["time/teacher_s"] = time.perf_counter() - t_aux
        lr_now = cfg.lr * warmup_factor(iteration, cfg.lr_warmup_iterations)
        for group in self.optimizer.param_groups:
            group["lr"] = lr_now
        stats["update/lr"] = lr_now
        self.model.train()
        gen = torch.Generator().manual_seed(seeds.update_order(cfg.seed, iteration))
        passes = len(micro_batches(range(len(idx)), cost, ppo_cfg, keys))  # about the same per mini-batch
        bar = progress_bar(ppo_cfg.ppo_epochs * passes, f"update {iteration}", cfg.progress_bars, estimated=True)
        try:
            stats.update(
                ppo_update(
                    batch,
                    ppo_cfg,
                    self._learner(outputs[0] if outputs else steps[0].output),
                    comm,
                    gen,
                    on_micro_batch=lambda: bar.update(1),
                )
            )
        finally:
            bar.close()
        check_finite_weights(self.params)  # an lr of 1e30 steps into inf with finite gradients
        self.policy.sync()
        return stats

    def _old_and_reference(
        self, outputs: list[Any], cost: list[int], keys: list[Any], ppo_cfg: PPOConfig, stats: dict[str, float]
    ) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
        """The old log-probs (the sampler's, or recomputed with the mismatch into ``stats``) and
        the reference's (with a KL term), detached."""
        with torch.no_grad(), self.autocast():
            if self.recompute_old:
                self.model.eval()
                old = self._detached_logprobs(outputs, cost, keys, ppo_cfg)
                stats.update(rollout_mismatch([self.policy.behaviour_logprobs(o) for o in outputs], old))
            else:
                old = [self.policy.behaviour_logprobs(o) for o in outputs]
            ref: list[torch.Tensor] | None = None
            if self.cfg.ppo.kl_coef > 0:
                with self._reference():
                    ref = self._detached_logprobs(outputs, cost, keys, ppo_cfg)
        return old, ref

    def _learner(self, pad_step: Any) -> Learner:
        """The forward passes of the update, under autocast, with the optimizer they train."""

        def forward(micro: list[Any]) -> tuple[list[torch.Tensor], Any]:
            with self.autocast():
                return self._logprobs_entropy(micro)

        def pad_forward() -> list[torch.Tensor]:
            with self.autocast():
                return self._logprobs([pad_step])

        learner = Learner(forward, pad_forward, self.optimizer, self.params)
        if self.aux is not None:

            def distributions(micro: list[Any]) -> list[torch.Tensor]:
                with self.autocast():
                    return self.policy.distributions(micro)  # type: ignore[attr-defined]  # a policy with a teacher has distributions(), checked when the teacher is built

            learner.distributions, learner.after_step = distributions, self.aux.after_step
        return learner

    # ------------------------------------------------------------------ log-prob adapters
    def _logprobs(self, outputs: Sequence[Any]) -> list[torch.Tensor]:
        return list(
            self.policy.compute_logprobs_and_entropy(list(outputs), with_entropy=False, **self._pass_size(outputs))[0]
        )

    def _logprobs_entropy(self, outputs: Sequence[Any]) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
        """New log-probs, plus exact entropies when the bonus is on."""
        if self.cfg.ppo.entropy_coef > 0:
            lps, ents = self.policy.compute_logprobs_and_entropy(
                list(outputs), with_entropy=True, **self._pass_size(outputs)
            )
            return list(lps), list(ents)
        return self._logprobs(outputs), None

    def _pass_size(self, outputs: Sequence[Any]) -> dict[str, int]:
        """With token micro-batches a micro-batch is one forward pass (generate mode's sequence
        batch included); the per-decision path keeps the policy's own batch size."""
        return {"batch_size": max(1, len(outputs))} if self.cfg.batch_decisions != "off" else {}

    @contextlib.contextmanager
    def _reference(self) -> Iterator[None]:
        """Make ``policy.compute_logprobs`` use the frozen initial policy."""
        if self.cfg.lora:
            with self.model.disable_adapter():  # type: ignore[operator]  # only with LoRA, whose peft model has disable_adapter
                yield
            return
        assert self.ref_model is not None
        with scoring_with(self.policy, self.ref_model):
            yield

    def _detached_logprobs(
        self, outputs: Sequence[Any], cost: Sequence[int], keys: Sequence[Any], ppo_cfg: PPOConfig
    ) -> list[torch.Tensor]:
        """Log-probs of ``outputs`` under the live policy (or the reference, inside
        :meth:`_reference`), in the update's micro-batches, detached on the CPU, in step order."""
        out: list[torch.Tensor | None] = [None] * len(outputs)
        for c in micro_batches(range(len(outputs)), cost, ppo_cfg, keys):
            for j, lp in zip(c, self._logprobs([outputs[j] for j in c])):
                out[j] = lp.detach().float().cpu()
        return out  # type: ignore[return-value]  # every slot is filled by the micro-batches, which cover every step
