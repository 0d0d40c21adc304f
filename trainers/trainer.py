"""The training loop: group rollouts -> advantages -> PPO-clip update, with logs, evals, checkpoints.

One iteration (:meth:`Trainer.train_iteration`) reads top to bottom in five files:

1. ``trainer.py`` -- the spine, and :meth:`Trainer.rollout`: the B groups of a
   :class:`~wrappers.GroupVectorEnv` are reset to this iteration's tasks (task seeds are a pure
   function of ``(seed, iteration)``, so a resumed run replays the schedule);
2. ``rollout.py`` -- :func:`~trainers.rollout.collect_rollout` plays one episode per member;
3. ``advantages/`` -- :func:`~trainers.advantages.step_advantages`, the configured estimator, and
   the invalid-action penalty (:func:`~trainers.advantages.penalized_advantages`);
4. ``losses.py`` -- the PPO-clip loss with its optional k3 KL and entropy terms;
5. ``ppo.py`` -- :func:`~trainers.ppo.ppo_update`: epochs, mini-batches, micro-batch gradient
   accumulation, clipping, and the collectives of several processes behind a small ``Comm``.

Metrics go to JSONL + TensorBoard (``metrics.py``); evaluations run every ``eval_every``
iterations (``evaluation.py``); checkpoints are written every ``save_every`` (``checkpoint.py``).

The policy is any :class:`agents.contract.TrainablePolicy` (``act``, ``compute_logprobs_and_entropy``,
``behaviour_logprobs``, ``sync``, ``model``): :func:`build_policy` makes the LLM one of the configured
mode; tests inject small fakes.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from agents.batching import step_key, step_tokens
from agents.contract import TrainablePolicy, scoring_with
from trainers import distributed, seeds, stop_request
from trainers.advantages import penalized_advantages, planpo_alpha, step_advantages
from trainers.checkpoint import (
    TRAINING_ENTRIES,
    CheckpointError,
    capture_rng,
    checkpoint_files,
    latest_checkpoint,
    load_checkpoint,
    load_trainable_state,
    load_weights,
    restore_rng,
    save_checkpoint,
    save_weights,
    trainable_state,
)
from trainers.config import EARLIER_VALUES, ConfigError, TrainConfig, lr_warning, upgrade_names
from trainers.envs import ENV_TABLE, check_split, make_env_fn
from trainers.evaluation import EvalPlan, RandomPolicy, episode_records, example_episodes, run_eval
from trainers.console import bars_shown, iteration_line, progress_bar
from trainers.metrics import MetricsLogger, acted_metrics, advantage_metrics, read_metrics, rollout_metrics, wandb_settings
from trainers.ppo import Learner, PPOConfig, UpdateBatch, comm_for, micro_batches, ppo_update
from trainers.report import write_report
from trainers.rollout import Rollout, StepRecord, collect_rollout
from trainers.teachers import PolicySkillWriter, Teacher, TeacherInputs, TemplateSkillWriter, teacher_inputs
from trainers.tree_rollout import collect_tree_rollout
from trainers.run_dir import RunDirLock, RunManifest, claim_run_dir, earlier_run_files
from trainers.run_files import open_nofollow, write_atomic
from trainers.seeds import task_seeds
from trainers.sharding import merge_rollouts, rollout_summary

__all__ = ["Trainer", "build_policy", "rollout_mismatch", "warmup_factor", "RESUME_COMPATIBLE"]

#: config fields that may differ between a run and its resumption
RESUME_COMPATIBLE = ("iterations", "output_dir", "progress_bars", "tensorboard", "report_to", "eval_every", "save_every", "notes",
                     "step_timeout", "env_backend", "ray_num_cpus")


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


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device cuda requested but no CUDA GPU is visible; use --device cpu")
    return torch.device(name)


def build_policy(cfg: TrainConfig, device: torch.device) -> TrainablePolicy:
    """The LLM policy of ``cfg``: load the model (+ LoRA), make the backend (generate mode) and the policy."""
    from agents.backends import make_backend
    from agents.models import load_model
    from agents.policy import make_policy

    model, tokenizer = load_model(cfg.model, init_std=cfg.tiny_init_std or None, device=device)
    model.to(device)  # fp32 master weights; bf16 is autocast compute (Trainer.autocast), never a cast of the weights
    if cfg.lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, target_modules="all-linear",
                                                 lora_dropout=0.0, task_type="CAUSAL_LM"))
    backend = None
    if cfg.policy_mode == "generate":  # score mode ranks commands with the model itself
        backend_kw: dict[str, Any] = {}
        if cfg.backend == "transformers":
            backend_kw["max_batch_size"] = cfg.gen_batch_size
        if cfg.backend == "vllm" and device.type == "cuda" and cfg.bf16:
            backend_kw["dtype"] = "bfloat16"  # match the trainer's bf16 autocast compute
        backend = make_backend(cfg.backend, model, tokenizer, **backend_kw)
    return make_policy(cfg.policy_mode, model, tokenizer, backend, cfg.resolved_template, cfg.policy_options())


def rollout_mismatch(sampler: Sequence[torch.Tensor], trainer: Sequence[torch.Tensor]) -> dict[str, float]:
    """:func:`agents.logprobs.logprob_mismatch` (max / mean |logp_sampler - logp_trainer| over the
    action tokens) under the metric names ``rollout/logprob_mismatch_max`` / ``_mean``.

    >>> rollout_mismatch([torch.tensor([-1.0, -2.0])], [torch.tensor([-1.5, -2.0])])["rollout/logprob_mismatch_max"]
    0.5
    """
    from agents.logprobs import logprob_mismatch

    m = logprob_mismatch(list(sampler), list(trainer))
    return {"rollout/logprob_mismatch_max": m["logprob_mismatch_max"],
            "rollout/logprob_mismatch_mean": m["logprob_mismatch_mean"]}


class Trainer:
    """Runs :class:`~trainers.config.TrainConfig` end to end.

    Args:
        cfg: the run configuration.
        policy: an already built :class:`~agents.contract.TrainablePolicy`; ``None``: :func:`build_policy`.
        env_fn / eval_env_fn: member env factories (``None``: :func:`trainers.envs.make_env_fn`).
    """

    def __init__(self, cfg: TrainConfig, policy: TrainablePolicy | None = None,
                 env_fn: Callable[[], Any] | None = None, eval_env_fn: Callable[[], Any] | None = None) -> None:
        self.cfg = cfg
        self.run_dir = Path(cfg.output_dir)
        if env_fn is None or eval_env_fn is None:  # a missing split fails here, before anything is written
            for split in {*cfg.splits, *([cfg.resolved_eval_extra_split] if cfg.resolved_eval_extra_split else [])}:
                check_split(cfg.env, split)
        self.device = resolve_device(cfg.device)
        #: rank / world size under torchrun or accelerate launch (world size 1 otherwise)
        self.dist = distributed.setup(self.device.type, cfg.dist_strategy)
        if self.dist.enabled and self.device.type == "cuda":
            self.device = torch.device("cuda", self.dist.local_rank)
        #: the groups this rank plays (all of them for one process)
        self.shard = distributed.shard_groups(cfg.num_groups, self.dist.world_size, self.dist.rank)
        if cfg.rollout_streams > 1:
            self._check_rollout_streams()
            self.shard = distributed.shard_groups(cfg.num_groups, cfg.rollout_streams, 0)  # the rest: forked streams
        if cfg.torch_threads:
            torch.set_num_threads(cfg.torch_threads)
        torch.manual_seed(cfg.seed)
        np.random.seed(cfg.seed % 2**32)
        self.policy: TrainablePolicy = policy if policy is not None else build_policy(cfg, self.device)
        self.model: torch.nn.Module = self.policy.model
        if cfg.weights_file:
            self.load_weights(cfg.weights_file)
        train_split, eval_split = cfg.splits
        # a privileged teacher reads the env's privileged text (the agent never does: train envs only, not in prompts)
        privileged = {"privileged_info": True} if cfg.distill == "privileged" and ENV_TABLE[cfg.env].privileged_info else {}
        self.env_fn = env_fn or make_env_fn(cfg.env, train_split, cfg.max_steps, cfg.state_key, **privileged)
        self.eval_env_fn = eval_env_fn or make_env_fn(cfg.env, eval_split, cfg.max_steps, cfg.state_key)
        self.adv_cfg = cfg.advantage_config()
        #: bf16 autocast compute over fp32 master weights and fp32 AdamW state: an
        #: update of 1e-6 is kept in the fp32 weights instead of rounding away in bf16
        self.amp_dtype: torch.dtype | None = torch.bfloat16 if (cfg.bf16 and self.device.type == "cuda") else None
        #: with vLLM rollouts the old log-probs come from other kernels: recompute them by the
        #: trainer's forward pass and log the measured mismatch (rollout/logprob_mismatch_*)
        self.recompute_old = bool(cfg.recompute_old_logprobs or cfg.backend == "vllm")
        warning = lr_warning(cfg)
        if warning:
            warnings.warn(warning, UserWarning, stacklevel=2)
        if self.dist.enabled:
            distributed.broadcast_parameters(self.model)  # every rank starts from rank 0's weights
            if self.dist.strategy == "fsdp2":
                if cfg.kl_coef > 0 and not cfg.lora:
                    raise ConfigError("dist_strategy fsdp2 does not support kl_coef > 0 with full fine-tuning yet "
                                     "(the frozen reference copy is not sharded); use --lora or --dist-strategy ddp")
                distributed.apply_fsdp2(self.model)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        if not self.params:
            raise ConfigError("the policy model has no trainable parameters")
        self.optimizer = torch.optim.AdamW(self.params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.ref_model: torch.nn.Module | None = None
        if cfg.kl_coef > 0 and not cfg.lora:
            self.ref_model = copy.deepcopy(self.model).eval()
            for p in self.ref_model.parameters():
                p.requires_grad_(False)
        self.teacher: Teacher | None = None
        if cfg.distill != "none":
            if self.dist.enabled:
                raise ConfigError(f"distill {cfg.distill} runs in one process (its teacher is not sharded); drop "
                                  "torchrun / accelerate launch or use --distill none")
            writer = None
            if cfg.distill == "hindsight":
                writer = PolicySkillWriter(self.policy) if cfg.skill_writer == "policy" else TemplateSkillWriter()
            self.teacher = Teacher(cfg.distill, self.policy, self.model, writer, tau=cfg.distill_tau,
                                   coef=cfg.distill_lambda, beta=cfg.distill_gate_beta, top_k=cfg.distill_top_k)
        self.envs: Any = None
        self.env_failures: dict[str, float] = {}
        self.history: list[dict[str, Any]] = []
        self.acted: dict[str, float] = {}  # where the base estimator's own terms acted (StepAdvantages.acted)
        self.start_iteration = 1
        #: the run's identity and files (rank 0, set when training starts)
        self.manifest: RunManifest | None = None
        self._resumed_run_id: str | None = None

    def autocast(self) -> Any:
        """bf16 autocast for forward passes when ``amp_dtype`` is set (weights stay fp32)."""
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)

    # ------------------------------------------------------------------ log-prob adapters
    def _logprobs(self, outputs: Sequence[Any]) -> list[torch.Tensor]:
        return list(self.policy.compute_logprobs_and_entropy(list(outputs), with_entropy=False,
                                                             **self._pass_size(outputs))[0])

    def _logprobs_entropy(self, outputs: Sequence[Any]) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
        """New log-probs, plus exact entropies when the bonus is on."""
        if self.cfg.entropy_coef > 0:
            lps, ents = self.policy.compute_logprobs_and_entropy(list(outputs), with_entropy=True,
                                                                 **self._pass_size(outputs))
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
            with self.model.disable_adapter():  # type: ignore[operator]
                yield
            return
        assert self.ref_model is not None
        with scoring_with(self.policy, self.ref_model):
            yield

    # ------------------------------------------------------------------ update
    def update(self, steps: Sequence[StepRecord], advantages: np.ndarray, iteration: int,
               teach: TeacherInputs | None = None) -> dict[str, float]:
        """PPO-clip epochs over ``steps`` (per mini-batch: token-mean loss, or trajectory-mean with
        ``loss_agg: traj-mean``), with the teacher's term when ``teach`` is given."""
        cfg = self.cfg
        ppo_cfg = PPOConfig.from_config(cfg)
        idx = list(range(len(steps)))
        if cfg.skip_zero_advantage and cfg.kl_coef == 0 and cfg.entropy_coef == 0:
            # a teacher's steps stay: routed ones take its loss, and hindsight's term acts on every step
            keep_all = teach is not None and self.teacher is not None and self.teacher.mode == "hindsight"
            idx = [i for i in idx if advantages[i] != 0.0 or keep_all or (teach is not None and teach.routed[i])]
        comm = comm_for(self.dist)
        n_global = int(comm.sum([len(idx)])[0])
        stats: dict[str, float] = {"update/steps": float(n_global), "update/optimizer_steps": 0.0}
        if not n_global:
            return stats
        outputs = [steps[i].output for i in idx]
        cost, keys = [step_tokens(o) for o in outputs], [step_key(o) for o in outputs]
        t_old = time.perf_counter()
        with torch.no_grad(), self.autocast():
            if self.recompute_old:
                self.model.eval()
                old = self._detached_logprobs(outputs, cost, keys, ppo_cfg)
                stats.update(rollout_mismatch([self.policy.behaviour_logprobs(o) for o in outputs], old))
            else:
                old = [self.policy.behaviour_logprobs(o) for o in outputs]
            ref: list[torch.Tensor] | None = None
            if cfg.kl_coef > 0:
                with self._reference():
                    ref = self._detached_logprobs(outputs, cost, keys, ppo_cfg)
        stats["time/old_logprob_s"] = time.perf_counter() - t_old
        # prompt + candidate (or response) tokens of the update's steps, over every rank
        stats["update/input_tokens"] = float(comm.sum([float(sum(cost))])[0])
        batch = UpdateBatch.build(outputs, old, ref, torch.as_tensor(advantages[idx], dtype=torch.float32),
                                  [s.traj for s in steps], idx, cfg.loss_agg, cost, keys, n_global)
        if teach is not None and self.teacher is not None:
            t_teach = time.perf_counter()
            with self.autocast():
                batch.distill, teacher_stats = self.teacher.targets(steps, idx, teach.texts, teach.routed, iteration)
            stats.update(teacher_stats)
            stats.update(teach.metrics)
            stats["time/teacher_s"] = time.perf_counter() - t_teach
        lr_now = cfg.lr * warmup_factor(iteration, cfg.lr_warmup_iterations)
        for group in self.optimizer.param_groups:
            group["lr"] = lr_now
        stats["update/lr"] = lr_now
        self.model.train()
        gen = torch.Generator().manual_seed(seeds.update_order(cfg.seed, iteration))
        pad_step = outputs[0] if outputs else steps[0].output

        def forward(micro: list[Any]) -> tuple[list[torch.Tensor], Any]:
            with self.autocast():
                return self._logprobs_entropy(micro)

        def pad_forward() -> list[torch.Tensor]:
            with self.autocast():
                return self._logprobs([pad_step])

        passes = len(micro_batches(range(len(idx)), cost, ppo_cfg, keys))  # about the same per mini-batch
        bar = progress_bar(cfg.ppo_epochs * passes, f"update {iteration}", cfg.progress_bars)
        try:
            learner = Learner(forward, pad_forward, self.optimizer, self.params)
            if self.teacher is not None:
                def distributions(micro: list[Any]) -> list[torch.Tensor]:
                    with self.autocast():
                        return self.policy.distributions(micro)  # type: ignore[attr-defined]

                learner.distributions, learner.after_step = distributions, self.teacher.after_step
            stats.update(ppo_update(batch, ppo_cfg, learner, comm, gen, on_micro_batch=lambda: bar.update(1)))
        finally:
            bar.close()
        self.policy.sync()
        return stats

    def _detached_logprobs(self, outputs: Sequence[Any], cost: Sequence[int], keys: Sequence[Any],
                           ppo_cfg: PPOConfig) -> list[torch.Tensor]:
        """Log-probs of ``outputs`` under the live policy (or the reference, inside
        :meth:`_reference`), in the update's micro-batches, detached on the CPU, in step order."""
        out: list[torch.Tensor | None] = [None] * len(outputs)
        for c in micro_batches(range(len(outputs)), cost, ppo_cfg, keys):
            for j, lp in zip(c, self._logprobs([outputs[j] for j in c])):
                out[j] = lp.detach().float().cpu()
        return out  # type: ignore[return-value]

    # ------------------------------------------------------------------ rollout + eval
    def _make_envs(self) -> Any:
        from wrappers import GroupVectorEnv

        cfg = self.cfg
        extra: dict[str, Any] = {"num_cpus": cfg.ray_num_cpus} if cfg.env_backend == "ray" else {}
        return GroupVectorEnv(self.env_fn, num_groups=len(self.shard), group_size=cfg.group_size, backend=cfg.env_backend,
                              seed=cfg.seed, tau_r=cfg.tau_r, step_timeout=cfg.resolved_step_timeout, **extra)

    def rollout(self, iteration: int, shard: range | None = None, shard_index: int | None = None) -> Rollout:
        """One training rollout of this rank's groups (``shard``, default :attr:`shard`: all B
        groups for one process) x G members on this iteration's tasks; shard k samples with
        :func:`trainers.distributed.shard_seed` (shard 0: the single-process seed). With
        ``rollout_streams`` k > 1, the rollout of all B groups that k ranks would play together
        (:meth:`rollout_in_streams`)."""
        cfg = self.cfg
        if cfg.rollout_streams > 1 and shard is None:
            return self.rollout_in_streams(iteration)
        shard = self.shard if shard is None else shard
        shard_index = self.dist.rank if shard_index is None else shard_index
        self.envs = self.envs or self._make_envs()
        tasks = task_seeds(cfg.seed, iteration, cfg.num_groups)[shard.start:shard.stop]
        self.model.eval()
        bar = progress_bar(len(shard) * cfg.group_size * cfg.max_steps, f"rollout {iteration}", cfg.progress_bars and self.dist.is_main)
        restarts, errors = self.envs.worker_restarts, self.envs.member_errors
        try:
            seed = distributed.shard_seed(seeds.rollout(cfg.seed, iteration), shard_index)
            with torch.no_grad(), self.autocast(), distributed.full_weights(self.model, self.dist):
                if cfg.rollout == "tree":
                    return collect_tree_rollout(self.envs, self.policy, tasks, seed=seed, cfg=cfg.tree_config(seed),
                                                max_steps=cfg.max_steps, on_step=bar.update)
                return collect_rollout(self.envs, self.policy, tasks, seed=seed, history_k=cfg.history_k,
                                       on_step=bar.update)
        finally:
            bar.close()
            # crashed / hung / raising members of this rollout (their episodes were truncated)
            self.env_failures = {"rollout/worker_restarts": float(self.envs.worker_restarts - restarts),
                                 "rollout/worker_errors": float(self.envs.member_errors - errors)}

    def rollout_in_streams(self, iteration: int) -> Rollout:
        """Block 0 of the groups played here, block k in a process forked from this one
        (:func:`trainers.forked.run_forked`, its own envs, no progress bar), sampled as rank k of a
        run in ``rollout_streams`` processes; the blocks merged in order
        (:func:`trainers.sharding.merge_rollouts`), the env failures summed."""
        from trainers.forked import run_forked

        n = self.cfg.rollout_streams

        def block(k: int) -> Callable[[Callable[[int], None]], tuple[Rollout, dict[str, float]]]:
            def play(step: Callable[[int], None]) -> tuple[Rollout, dict[str, float]]:
                if k:  # in the forked process: envs of its own, no second bar; the trainer's envs are
                    # kept referenced, never closed or collected here (what they hold is the trainer's)
                    self.cfg = dataclasses.replace(self.cfg, progress_bars=False)
                    self._trainer_envs, self.envs = self.envs, None
                rollout = self.rollout(iteration, distributed.shard_groups(self.cfg.num_groups, n, k), k)
                if k:
                    self.envs.close()
                return rollout, self.env_failures
            return play

        parts = run_forked([block(k) for k in range(n)], name="rollout stream")
        failures = {key: sum(f[key] for _, f in parts) for key in parts[0][1]}
        self.env_failures = failures
        return merge_rollouts([r for r, _ in parts])

    def _check_rollout_streams(self) -> None:
        """Rollout streams are forked processes: one process, a model on the CPU, fork available."""
        from trainers.forked import can_fork

        n = self.cfg.rollout_streams
        if self.dist.enabled:
            raise ConfigError(f"rollout_streams {n}: a run in several processes already splits its groups; use "
                              "--rollout-streams 1 under torchrun")
        if self.device.type != "cpu":
            raise ConfigError(f"rollout_streams {n}: a forked process cannot use {self.device.type}; use it with "
                              "--device cpu")
        if not can_fork():
            raise ConfigError(f"rollout_streams {n}: needs the fork start method, which this platform lacks")

    def eval_plan(self, split: str | None = None, episodes: int | None = None) -> EvalPlan:
        """The fixed episode list of an evaluation on ``split`` (default: the eval split)."""
        cfg = self.cfg
        split = split or cfg.splits[1]
        n = cfg.eval_episodes if episodes is None else episodes
        return EvalPlan.for_env(self._split_env_fn(split), split, n, seed=seeds.eval_plan(cfg.seed))

    def _split_env_fn(self, split: str) -> Callable[[], Any]:
        """Member env factory of ``split`` (the eval split's own factory when it is that split)."""
        if split == self.cfg.splits[1]:
            return self.eval_env_fn
        return make_env_fn(self.cfg.env, split, self.cfg.max_steps, self.cfg.state_key)

    def evaluate(self, iteration: int, split: str | None = None, episodes: int | None = None, kind: str = "eval",
                 policy: Any = None) -> dict[str, Any]:
        """Play the fixed evaluation plan of ``split`` with the policy; returns the eval record.

        The record holds ``eval/success`` (won), ``eval/episodes``, ``eval/split``, the usual
        rollout diagnostics under ``eval/``, and ``eval/won``: the per-episode wins, in plan order,
        so that two evaluations can be compared pairwise (:func:`trainers.evaluation.paired_bootstrap_ci`).
        Several processes: rank 0 evaluates, the others wait and return ``{}``.
        """
        if self.dist.enabled:
            with distributed.full_weights(self.model, self.dist):
                rec = self._evaluate(iteration, split, episodes, kind, policy) if self.dist.is_main else {}
                distributed.barrier()
            return rec
        return self._evaluate(iteration, split, episodes, kind, policy)

    def _evaluate(self, iteration: int, split: str | None, episodes: int | None, kind: str, policy: Any) -> dict[str, Any]:
        cfg = self.cfg
        plan = self.eval_plan(split, episodes)
        fn = self._split_env_fn(plan.split)
        self.model.eval()
        bar = progress_bar(plan.num_episodes * cfg.max_steps, f"{kind} {plan.split} {iteration}", cfg.progress_bars)
        try:
            with torch.no_grad(), self.autocast():
                # the random baseline draws from one generator: one stream keeps its draws in order
                rollout = run_eval(policy or self.policy, fn, plan, on_step=bar.update, step_timeout=cfg.resolved_step_timeout,
                                   streams=cfg.eval_streams if policy is None else 1, processes=self._eval_in_processes())
        finally:
            bar.close()
        rec: dict[str, Any] = {"iteration": iteration, "kind": kind, "eval/split": plan.split,
                               "eval/episodes": len(rollout.trajectories), "eval/panel": plan.panel()}
        if self.cfg.distill_label and policy is None:  # the held-out success of a policy trained with a teacher says so
            rec["distill"] = self.cfg.distill_label
        rec.update(rollout_metrics(rollout, cfg.tau_r, prefix="eval/"))
        episodes = episode_records(rollout)
        rec["eval/won"] = episodes["won"]
        rec["eval/score"] = episodes["score"]  # final score / outcome of each episode (WebShop: partial credit)
        rec["eval/examples"] = example_episodes(rollout)  # one won and one lost episode, abridged, for the report
        return rec

    def _eval_in_processes(self) -> bool:
        """Evaluation streams run in forked processes where they can (a model on the CPU, ``fork``
        available): no two streams then share an interpreter lock; in threads otherwise."""
        from trainers.forked import can_fork

        return self.device.type == "cpu" and can_fork()

    def warm_start(self) -> dict[str, Any]:
        """Behaviour cloning (``init: bc``) from an expert that reads only what the agent reads
        (ALFWorld: the searching expert; WebShop: the instruction-following shopper); returns the
        ``init`` record."""
        from trainers.sft import behaviour_clone, collect_demos

        cfg = self.cfg
        t0 = time.perf_counter()
        agent = ENV_TABLE[cfg.env].make_expert()
        demos, wins = collect_demos(self.env_fn, n_episodes=cfg.bc_episodes or None, seed=cfg.seed, agent=agent)
        bar = progress_bar(cfg.bc_steps, "warm start (bc)", cfg.progress_bars)
        try:
            stats = behaviour_clone(self.policy, demos, steps=cfg.bc_steps, batch_size=cfg.bc_batch_size, lr=cfg.bc_lr,
                                    seed=cfg.seed, on_step=bar.update, lr_schedule=cfg.bc_lr_schedule)
        finally:
            bar.close()
        if self.ref_model is not None:  # the KL reference is the policy RL starts from
            self.ref_model.load_state_dict(self.model.state_dict())
        rec: dict[str, Any] = {"iteration": 0, "kind": "init", "init": "bc", "bc/expert_success": float(np.mean(wins)),
                               "bc/expert_episodes": float(len(wins)), "time/init_s": time.perf_counter() - t0}
        rec.update(stats)
        return rec

    def load_weights(self, path: str | Path) -> None:
        """Load a ``state_dict`` file (as :meth:`save_weights` writes) into the model; clear errors."""
        load_weights(self.model, path, self.cfg.model)

    def save_weights(self, path: str | Path) -> Path:
        """Write the model's ``state_dict`` (e.g. a warm start shared by several runs)."""
        return save_weights(self.model, path)

    def start_records(self) -> Iterator[dict[str, Any]]:
        """Iteration 0, one record at a time: warm start, random baseline, evaluations of the policy
        RL starts from (on the eval split and on the extra held-out split)."""
        cfg = self.cfg
        if cfg.resolved_warm_start == "bc":
            yield self.warm_start()
        if cfg.eval_episodes:
            if cfg.baseline_random:
                base = self.evaluate(0, kind="baseline", policy=RandomPolicy(seed=cfg.seed))
                base["baseline"] = "random admissible command (look, inventory, examine left out)"
                yield base
            yield self.evaluate(0)
            if cfg.resolved_eval_extra_split and cfg.eval_extra_episodes:
                yield self.evaluate(0, cfg.resolved_eval_extra_split, cfg.eval_extra_episodes, kind="eval_extra")

    # ------------------------------------------------------------------ checkpoints
    def save(self, iteration: int) -> Path | None:
        """Write a checkpoint (rank 0; with several processes every rank's RNG state goes in it,
        and the others return ``None`` once it is written)."""
        extra: dict[str, Any] = {}
        if self.dist.enabled:
            if self.dist.strategy == "fsdp2":  # the full state gathered from the shards (FSDP2 runs need GPUs; no test runs it)
                extra["model"], extra["optimizer"] = distributed.full_state_dicts(self.model, self.optimizer)
            rngs = distributed.gather_objects(capture_rng(), self.dist.world_size)
            if not self.dist.is_main:
                distributed.barrier()
                return None
            extra["distributed"] = {"world_size": self.dist.world_size, "rng": rngs}
        if self.manifest is not None:  # recorded first: a crash mid-write leaves no file the run disowns
            self.manifest.record(*checkpoint_files(self.run_dir, iteration))
        path = save_checkpoint(self.run_dir, iteration, {
            "run_id": self.manifest.run_id if self.manifest is not None else None,
            "config": self.cfg.to_dict(),
            "model": trainable_state(self.model, self.cfg.lora),
            "optimizer": self.optimizer.state_dict(),
            "rng": capture_rng(),
            "env_schedule": {"seed": self.cfg.seed, "next_iteration": iteration + 1, "eval_seed": seeds.eval_plan(self.cfg.seed)},
            "history": self.history,
            **({"teacher_ema": self.teacher.ema.state_dict()} if self.teacher is not None and self.teacher.ema is not None
               else {}),
            **extra,
        })
        distributed.barrier()
        return path

    def resume(self, where: str) -> int:
        """Load ``where`` (``"latest"`` or a checkpoint path); returns the next iteration."""
        path = latest_checkpoint(self.run_dir) if where == "latest" else Path(where)
        data = load_checkpoint(path, require=tuple(TRAINING_ENTRIES))
        saved = data.get("config", {})
        if not isinstance(saved, dict):
            raise CheckpointError(f"checkpoint {path}: 'config' must be a mapping, got {type(saved).__name__}")
        saved = upgrade_names(saved, warn=False)  # a checkpoint written before a field was renamed
        now = self.cfg.to_dict()
        # a field added since the checkpoint was written had its earlier meaning, else its default
        defaults = {**TrainConfig().to_dict(), **EARLIER_VALUES}
        diff = sorted(k for k in now if k not in RESUME_COMPATIBLE and saved.get(k, defaults.get(k)) != now[k])
        if diff:
            raise CheckpointError(f"{path} was written with a different config ({', '.join(diff)} differ); "
                                  "resume with the same settings or start a new --output-dir")
        self._check_owner(path, data)
        try:
            load_trainable_state(self.model, data["model"], self.cfg.lora)
            if self.teacher is not None and data.get("teacher_ema") is not None:
                self.teacher.ensure_ema().load_state_dict(data["teacher_ema"])
            self.optimizer.load_state_dict(data["optimizer"])
            restore_rng(data["rng"])
            saved_world = int((data.get("distributed") or {}).get("world_size", 1))
            if saved_world != self.dist.world_size:
                raise CheckpointError(f"checkpoint {path} was written by {saved_world} process(es); resume it with "
                                      f"{saved_world} (this run has {self.dist.world_size})")
            if self.dist.enabled:
                restore_rng(data["distributed"]["rng"][self.dist.rank])
        except (KeyError, RuntimeError, ValueError, TypeError) as err:
            raise CheckpointError(f"checkpoint {path} does not match this model/optimizer "
                                  f"({type(err).__name__}: {str(err).splitlines()[0][:150] if str(err) else ''})") from err
        self.history = list(data["history"])
        self.start_iteration = int(data["iteration"]) + 1
        return self.start_iteration

    def _check_owner(self, path: Path, data: dict[str, Any]) -> None:
        """Refuse a checkpoint of another run than the one in the output dir, before anything is written.

        The run ids decide where both have one; else (a run written before run ids) the dir's
        ``config.yaml`` must be the checkpoint's config and its ``metrics.jsonl`` must start with
        the checkpoint's history. An output dir that holds no run takes any checkpoint.
        """
        ckpt_id = data.get("run_id") if isinstance(data.get("run_id"), str) else None
        self._resumed_run_id = ckpt_id
        if not self.dist.is_main:
            return
        where = f"checkpoint {path} belongs to another run than the one in {self.run_dir}"
        advice = "resume it with its own --output-dir, or with an empty one to continue it there"
        manifest = RunManifest.load(self.run_dir)
        if manifest is not None and ckpt_id is not None:
            if ckpt_id != manifest.run_id:
                raise CheckpointError(f"{where} (run id {ckpt_id[:8]} vs {manifest.run_id[:8]}); {advice}")
            return
        ours, _ = earlier_run_files(self.run_dir)
        if not any(p.parent == self.run_dir for p in ours):
            return  # no config / metrics / report of a run here: the run continues into this dir
        config_file = self.run_dir / "config.yaml"
        if config_file.is_file():
            import yaml

            try:
                there = yaml.safe_load(config_file.read_text(encoding="utf-8")) or {}
            except (OSError, UnicodeDecodeError, yaml.YAMLError):
                there = {}
            saved = upgrade_names(data.get("config") or {}, warn=False)
            there = upgrade_names(there, warn=False) if isinstance(there, dict) else there
            if not isinstance(there, dict) or any(there.get(k) != saved.get(k) for k in saved if k not in RESUME_COMPATIBLE):
                raise CheckpointError(f"{where} (its config differs from {config_file.name}); {advice}")
        metrics_file = self.run_dir / "metrics.jsonl"
        if metrics_file.is_file():
            there_records = [json.dumps(r, sort_keys=True) for r in read_metrics(metrics_file)]
            mine = [json.dumps(r, sort_keys=True) for r in data["history"]]
            if there_records[: len(mine)] != mine:
                raise CheckpointError(f"{where} (its history differs from {metrics_file.name}); {advice}")

    # ------------------------------------------------------------------ main loop
    def train_iteration(self, iteration: int) -> dict[str, Any]:
        """One iteration: play B groups x G members, compute the advantages, update, record."""
        t0 = time.perf_counter()
        rollout = self.rollout(iteration)                                     # 1. rollout.py
        step_adv, all_failed, step_failed = self.advantages(rollout, iteration)  # 2. advantages.py, losses.py
        teach = self.teacher_inputs(rollout, step_failed) if self.teacher is not None else None  # teachers.py
        t1 = time.perf_counter()
        stats = self.update(rollout.steps, step_adv, iteration, teach)        # 3. ppo.py, losses.py
        t2 = time.perf_counter()
        return self.train_record(iteration, rollout, step_adv, all_failed, step_failed, stats, (t0, t1, t2))

    def write_distill_samples(self) -> None:
        """Append the teacher's samples of the last iteration (contexts it read, with the decision they
        re-scored) to ``distill_samples.jsonl``, so that a user can read what the teacher saw."""
        if self.teacher is None:
            return
        if self.teacher.samples and self.dist.is_main:
            path = self.run_dir / "distill_samples.jsonl"
            if self.manifest is not None:
                self.manifest.record(path)
            with open_nofollow(path, "a") as fh:
                fh.writelines(json.dumps(sample) + "\n" for sample in self.teacher.samples)
        self.teacher.samples.clear()

    def teacher_inputs(self, rollout: Rollout, step_failed: np.ndarray) -> TeacherInputs:
        """The teacher's inputs of ``rollout`` (:func:`trainers.teachers.teacher_inputs`)."""
        assert self.teacher is not None
        return teacher_inputs(self.teacher.mode, rollout, step_failed, self.teacher.writer, env=self.cfg.env)

    def advantages(self, rollout: Rollout, iteration: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-step advantages of ``rollout`` (the configured estimator, less the invalid-action
        penalty), each group's all-failed flag, and that flag per step."""
        arrays = rollout.advantage_inputs()
        adv_cfg = dataclasses.replace(self.adv_cfg, shuffle_seed=seeds.shuffle(self.cfg.seed, iteration),
                                      planpo_alpha=self.planpo_turn_weight(iteration))
        adv = step_advantages(**arrays, config=adv_cfg)
        self.acted = adv.acted
        # a tree's shared step: the mean of its leaves' advantages (flat rollout: one row per step)
        step_adv = penalized_advantages(rollout.merge_rows(adv.steps), [s.output for s in rollout.steps])
        _, dense_group = np.unique(arrays["traj_group"], return_inverse=True)
        row_failed = adv.all_failed[dense_group.reshape(-1)[arrays["step_traj"]]] if step_adv.size else np.zeros(0, bool)
        step_failed = rollout.merge_rows(row_failed) > 0.5  # a tree's rows of one step share its group's flag
        return step_adv, adv.all_failed, step_failed

    def planpo_turn_weight(self, iteration: int) -> float:
        """PlanPO's turn-term weight at ``iteration``: the linear schedule in generate mode, 0 in
        score mode (there a response is a command's name, and the term would reward short names)."""
        cfg = self.cfg
        if self.adv_cfg.base != "planpo" or cfg.policy_mode != "generate":
            return 0.0
        return planpo_alpha(min(max(iteration, 1), cfg.iterations), cfg.iterations, cfg.planpo_alpha_start,
                            cfg.planpo_alpha_end)

    def train_record(self, iteration: int, rollout: Rollout, step_adv: np.ndarray, all_failed: np.ndarray,
                     step_failed: np.ndarray, stats: dict[str, float], times: tuple[float, float, float]) -> dict[str, Any]:
        """The iteration's metrics record (over every rank's groups)."""
        t0, t1, t2 = times
        tree_stats = dict(rollout.tree_stats)  # this rank's (a tree rollout's counts are not gathered across ranks)
        rollout, step_adv, all_failed, step_failed = self._gather_shards(rollout, step_adv, all_failed, step_failed)
        rec: dict[str, Any] = {"iteration": iteration, "kind": "train"}
        if self.cfg.distill_label:
            rec["distill"] = self.cfg.distill_label  # a run with a teacher says so in every record
        rec.update(tree_stats)
        rec.update(rollout_metrics(rollout, self.cfg.tau_r))
        rec.update(self.env_failures)
        rec.update(advantage_metrics(step_adv, all_failed, step_failed, self.adv_cfg.progpo, self.adv_cfg.gate))
        rec.update(acted_metrics(self.acted, all_failed.size, step_adv.size))
        rec.setdefault("kl", 0.0)
        rec.setdefault("clip_fraction", 0.0)
        rec.update(stats)
        rec["time/rollout_s"] = t1 - t0
        rec["time/generate_s"] = float(getattr(rollout, "policy_seconds", 0.0))
        rec["time/env_s"] = float(getattr(rollout, "env_seconds", 0.0))
        rec["time/update_s"] = t2 - t1
        rec["time/iteration_s"] = t2 - t0
        rec["tokens_per_s"] = rollout.response_tokens / max(rollout.seconds, 1e-9)
        rec["rollout/response_tokens"] = float(rollout.response_tokens)
        if torch.cuda.is_available() and self.device.type == "cuda":
            rec["gpu/peak_mem_gib"] = torch.cuda.max_memory_allocated(self.device) / 2**30
        rec["env_steps_per_s"] = len(rollout.steps) / max(rollout.seconds, 1e-9)
        return rec

    def _gather_shards(self, rollout: Rollout, step_adv: np.ndarray, all_failed: np.ndarray,
                       step_failed: np.ndarray) -> tuple[Rollout, np.ndarray, np.ndarray, np.ndarray]:
        """Every rank's rollout (summary), step advantages, all-failed flags and env failure counts
        merged on rank 0 in rank order: the metrics then equal a single process's over all groups.
        Other ranks keep their own (their records are not logged). One process: unchanged."""
        if not self.dist.enabled:
            return rollout, step_adv, all_failed, step_failed
        parts = distributed.gather_objects((rollout_summary(rollout), step_adv, np.asarray(all_failed), self.env_failures,
                                            np.asarray(step_failed), self.acted), self.dist.world_size)
        if parts is None:
            return rollout, step_adv, all_failed, step_failed
        failures: dict[str, float] = {}
        for part in parts:
            for key, value in part[3].items():
                failures[key] = failures.get(key, 0.0) + value
        self.env_failures = failures
        self.acted = {key: (value if key.endswith("_alpha") else sum(p[5].get(key, 0.0) for p in parts))
                      for key, value in parts[0][5].items()}  # counts add up over ranks; a weight is shared
        return (merge_rollouts([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                np.concatenate([p[2] for p in parts]), np.concatenate([p[4] for p in parts]))

    def train(self, resume: str | None = None, overwrite: bool = False, run_lock: RunDirLock | None = None) -> Path:
        """Run (or continue) the configured iterations; returns the report's path.

        The run owns ``cfg.output_dir`` (:func:`trainers.run_dir.claim_run_dir`): a fresh run
        refuses a directory holding an earlier run unless ``overwrite``, and a second process on
        the same directory is refused. ``run_lock``: a lock the caller already took.
        """
        main = self.dist.is_main  # rank 0 alone writes logs, checkpoints and the report
        own_lock = claim_run_dir(self.run_dir, resume=bool(resume), overwrite=overwrite) if main and run_lock is None else None
        try:
            return self._train(resume, main)
        finally:
            if own_lock is not None:
                own_lock.release()

    def _train(self, resume: str | None, main: bool) -> Path:
        cfg = self.cfg
        if resume:
            self.resume(resume)
        metrics_path = self.run_dir / "metrics.jsonl"
        if resume and main and not metrics_path.exists():
            write_atomic(metrics_path, "".join(json.dumps(r) + "\n" for r in self.history))
            warnings.warn(f"{metrics_path} was missing; rebuilt it from the checkpoint's history "
                          f"({len(self.history)} records)", UserWarning, stacklevel=2)
        if main:
            self.manifest = self._open_manifest()
        logger: Any = MetricsLogger(self.run_dir, tensorboard="tensorboard" in cfg.trackers,
                                    wandb=wandb_settings(cfg.to_dict(), self.run_dir) if "wandb" in cfg.trackers else None,
                                    config=cfg.to_dict(),
                                    resume_after=self.start_iteration - 1 if resume else None) if main else _DiscardingLogger()
        if main:
            self.manifest.record(*logger.files, self.run_dir / "config.yaml")
            write_atomic(self.run_dir / "config.yaml", _to_yaml(cfg.to_dict()))
            self._record_provenance(self.start_iteration - 1 if resume else 0)
        bar = progress_bar(cfg.iterations, "iterations", cfg.progress_bars and main, leave=True)
        bar.update(self.start_iteration - 1)
        try:
            if not resume:
                for rec in self.start_records():
                    if rec:
                        self.history.append(rec)
                        logger.log(rec)
                if self.dist.enabled and self.dist.strategy == "ddp":  # a warm start ran on every rank: keep them identical
                    distributed.broadcast_parameters(self.model)
                self.save(0)
            for it in range(self.start_iteration, cfg.iterations + 1):
                stop_request.raise_if_requested()
                rec = self.train_iteration(it)
                self.history.append(rec)
                logger.log(rec)
                self.write_distill_samples()
                last = it == cfg.iterations
                if cfg.eval_episodes and ((cfg.eval_every and it % cfg.eval_every == 0) or last):
                    evs = [self.evaluate(it)]
                    if last and cfg.resolved_eval_extra_split and cfg.eval_extra_episodes:
                        evs.append(self.evaluate(it, cfg.resolved_eval_extra_split, cfg.eval_extra_episodes, kind="eval_extra"))
                    for ev in (e for e in evs if e):
                        self.history.append(ev)
                        logger.log(ev)
                if cfg.save_every and (it % cfg.save_every == 0 or last):
                    self.save(it)
                bar.update(1)
                bar.set_postfix(success=f"{rec.get('success', 0):.2f}", all_failed=f"{rec.get('all_failed_frac', 0):.2f}")
                if cfg.progress_bars and main and not bars_shown(True):
                    print(iteration_line(rec, cfg.iterations), file=sys.stderr, flush=True)
        finally:
            bar.close()
            logger.close()
            self.close()
        if not main:
            return self.run_dir / "summary.md"
        self.manifest.record(self.run_dir / "summary.md", self.run_dir / "curves.png")
        return write_report(self.run_dir, self.history, cfg.to_dict())

    def _record_provenance(self, iteration: int) -> None:
        """Append where this process runs the run (:mod:`trainers.provenance`) to
        ``provenance.jsonl``: at the start, and on a resume where anything of it changed."""
        from trainers.provenance import append_provenance

        assert self.manifest is not None
        self.manifest.record(self.run_dir / "provenance.jsonl")
        append_provenance(self.run_dir, iteration, self.cfg.to_dict())

    def _open_manifest(self) -> RunManifest:
        """The run dir's manifest; a resumed run without one (a run from before manifests, or a
        checkpoint continued in a new dir) starts it, taking the earlier run's files as its own."""
        manifest = RunManifest.load(self.run_dir)
        if manifest is None:
            manifest = RunManifest.create(self.run_dir, self._resumed_run_id)
            manifest.record(*earlier_run_files(self.run_dir)[0])
        return manifest

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()
        self.envs = None


class _DiscardingLogger:
    """The metrics logger of ranks other than 0."""

    def log(self, record: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


def _to_yaml(data: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False)
