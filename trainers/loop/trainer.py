"""The training loop: collect -> credit -> update -> evaluate -> record, each a stage.

One iteration (:meth:`Trainer.train_iteration`) is five calls, each into the module that holds it:

1. collect -- :class:`~trainers.loop.collector.Rollouts`: the B groups of a
   :class:`~wrappers.GroupVectorEnv` reset to this iteration's tasks (task seeds are a pure
   function of ``(seed, iteration)``, so a resumed run replays the schedule), and G members
   played each, flat (:func:`~trainers.rollouts.rollout.collect_rollout`) or as a tree
   (:func:`~trainers.rollouts.tree_rollout.collect_tree_rollout`);
2. credit -- :class:`~trainers.loop.credit.CreditAssigner`: the configured estimator
   (:mod:`trainers.advantages`), the invalid-action penalty, the all-failed flags;
3. update -- :class:`~trainers.loop.updater.Updater`: PPO-clip epochs (:func:`~trainers.loop.ppo.ppo_update`,
   :mod:`trainers.loop.losses`), with a teacher's term (:mod:`trainers.teachers`) when one is set;
4. evaluate -- :class:`~trainers.loop.evaluator.Evaluator`, every ``eval_every`` iterations;
5. record -- :func:`~trainers.loop.train_record.train_record` and :class:`~trainers.runs.records.RunRecorder`
   (JSONL, TensorBoard, W&B, the report); checkpoints every ``save_every``
   (:class:`~trainers.runs.run_checkpoints.RunCheckpoints`).

The policy is any :class:`agents.contract.TrainablePolicy` (``act``, ``compute_logprobs_and_entropy``,
``behaviour_logprobs``, ``sync``, ``model``): :func:`~trainers.build.build_policy` makes the LLM one
of the configured mode; tests inject small fakes.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from agents.contract import TrainablePolicy
from trainers import distributed, stop_request
from trainers.build import build_policy, env_fns, make_teacher, resolve_device, shared_model, warm_start
from trainers.config import TrainConfig, lr_warning
from trainers.finite import NonFiniteError
from trainers.loop.collector import Rollout, Rollouts, check_rollout_streams
from trainers.loop.credit import Credit, CreditAssigner
from trainers.loop.evaluator import Evaluator
from trainers.loop.sections import credit_section, eval_section, rollout_section, run_section, update_section
from trainers.loop.train_record import engine_metrics, train_record
from trainers.loop.updater import Updater
from trainers.runs.records import RunRecorder
from trainers.runs.run_checkpoints import RunCheckpoints, load_weights, save_weights

__all__ = ["Trainer", "build_policy"]


class Trainer:
    """Runs :class:`~trainers.config.TrainConfig` end to end.

    Args:
        cfg: the run configuration.
        policy: an already built :class:`~agents.contract.TrainablePolicy`; ``None``: :func:`build_policy`.
        env_fn / eval_env_fn: member env factories (``None``: :func:`trainers.envs.make_env_fn`).
    """

    def __init__(
        self,
        cfg: TrainConfig,
        policy: TrainablePolicy | None = None,
        env_fn: Callable[[], Any] | None = None,
        eval_env_fn: Callable[[], Any] | None = None,
    ) -> None:
        self.cfg = cfg
        self.run_dir = Path(cfg.output_dir)
        self.env_fn, self.eval_env_fn = env_fns(cfg, env_fn, eval_env_fn)
        self.device = resolve_device(cfg.device)
        #: rank / world size under torchrun or accelerate launch (world size 1 otherwise)
        self.dist = distributed.setup(self.device.type, cfg.dist_strategy)
        if self.dist.enabled and self.device.type == "cuda":
            self.device = torch.device("cuda", self.dist.local_rank)
        #: the groups this rank plays (all of them for one process)
        shard = distributed.shard_groups(cfg.num_groups, self.dist.world_size, self.dist.rank)
        if cfg.rollout_streams > 1:
            check_rollout_streams(cfg.rollout_streams, self.dist, self.device)
            shard = distributed.shard_groups(cfg.num_groups, cfg.rollout_streams, 0)  # the rest: forked streams
        if cfg.torch_threads:
            torch.set_num_threads(cfg.torch_threads)
        torch.manual_seed(cfg.seed)
        np.random.seed(cfg.seed % 2**32)
        self.policy: TrainablePolicy = policy if policy is not None else build_policy(cfg, self.device)
        self.model: torch.nn.Module = self.policy.model
        if cfg.weights_file:
            self.load_weights(cfg.weights_file)
        warning = lr_warning(cfg)
        if warning:
            warnings.warn(warning, UserWarning, stacklevel=2)
        shared_model(cfg, self.model, self.dist)
        self.policy.sync()  # a sampler with its own weights starts from these (loaded, broadcast)
        self.teacher = make_teacher(cfg, self.policy, self.dist)
        # the stages of an iteration
        self.updater = Updater(update_section(cfg), self.policy, self.dist, self.device, aux=self.teacher)
        self.rollouts = Rollouts(
            rollout_section(cfg), self.policy, self.env_fn, self.dist, shard, self.updater.autocast
        )
        self.credit = CreditAssigner(credit_section(cfg))
        self.evaluator = Evaluator(
            eval_section(cfg), self.policy, self.eval_env_fn, self.dist, self.device, self.updater.autocast
        )
        run = run_section(cfg)  # one snapshot of the config for the checkpoints and the records
        self.checkpoints = RunCheckpoints(run, self.model, self.updater.optimizer, self.dist, self.teacher)
        self.recorder = RunRecorder(run, self.dist.is_main)
        self.history: list[dict[str, Any]] = []
        self.start_iteration = 1

    # ------------------------------------------------------------------ what the stages own
    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self.updater.optimizer

    @property
    def params(self) -> list[torch.nn.Parameter]:
        return self.updater.params

    @property
    def envs(self) -> Any:
        """The training rollouts' :class:`~wrappers.GroupVectorEnv` (made at the first rollout)."""
        return self.rollouts.envs

    @envs.setter
    def envs(self, envs: Any) -> None:
        self.rollouts.envs = envs

    def autocast(self) -> Any:
        """bf16 autocast for forward passes when the run computes in bf16 (weights stay fp32)."""
        return self.updater.autocast()

    # ------------------------------------------------------------------ one iteration
    def train_iteration(self, iteration: int) -> dict[str, Any]:
        """One iteration: play B groups x G members, assign the credit, update, record."""
        t0 = time.perf_counter()
        spent = self.spent()
        rollout = self.rollout(iteration)
        try:
            credit = self.advantages(rollout, iteration)
            teach = (
                self.teacher.inputs(rollout, credit.step_failed, env=self.cfg.env) if self.teacher is not None else None
            )
            t1 = time.perf_counter()
            stats = self.update(rollout.steps, credit.steps, iteration, teach)
        except NonFiniteError as err:
            raise err.within(
                f"iteration {iteration} (estimator {self.cfg.estimator}, lr {self.cfg.lr:g}) stopped before "
                "saving; the last checkpoint is the last finite state"
            ) from None
        t2 = time.perf_counter()
        rec = train_record(
            self.cfg,
            self.credit.adv_cfg,
            iteration,
            rollout,
            credit,
            self.rollouts.env_failures,
            stats,
            (t0, t1, t2),
            self.dist,
            self.device,
            spent,
        )
        rec.update(engine_metrics(self.policy))
        return rec

    def spent(self) -> tuple[float, float]:
        """The episodes and env steps the run has sampled so far (``budget/*`` of its last train
        record; a resumed run reads them from the checkpoint's history)."""
        for rec in reversed(self.history):
            if rec.get("kind") == "train" and "budget/episodes" in rec:
                return float(rec["budget/episodes"]), float(rec["budget/env_steps"])
        return 0.0, 0.0

    def budget_spent(self) -> bool:
        """Whether the run has sampled its ``budget_episodes`` (never without a budget)."""
        return bool(self.cfg.budget_episodes) and self.spent()[0] >= self.cfg.budget_episodes

    def rollout(self, iteration: int) -> Rollout:
        """This iteration's training rollout (:meth:`trainers.loop.collector.Rollouts.collect`:
        one generation batch, or with dynamic sampling as many as it takes, within the budget)."""
        budget_left = self.cfg.budget_episodes - self.spent()[0] if self.cfg.budget_episodes else None
        return self.rollouts.collect(iteration, budget_left)

    def advantages(self, rollout: Rollout, iteration: int) -> Credit:
        """The credit of ``rollout`` (:meth:`trainers.loop.credit.CreditAssigner.assign`)."""
        return self.credit.assign(rollout, iteration)

    def update(
        self, steps: Sequence[Any], advantages: np.ndarray, iteration: int, teach: Any = None
    ) -> dict[str, float]:
        """PPO-clip epochs over ``steps`` (:meth:`trainers.loop.updater.Updater.update`)."""
        return self.updater.update(steps, advantages, iteration, teach)

    def evaluate(self, iteration: int, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The eval record of iteration ``iteration``: the arguments are those of
        :meth:`trainers.loop.evaluator.Evaluator.evaluate` (split, episodes, kind, policy)."""
        return self.evaluator.evaluate(iteration, *args, **kwargs)

    # ------------------------------------------------------------------ iteration 0
    def warm_start(self) -> dict[str, Any]:
        """Behaviour cloning (:func:`trainers.build.warm_start`); the KL reference is then the policy
        RL starts from. Returns the ``init`` record."""
        rec = warm_start(self.cfg, self.policy, self.env_fn)
        self.updater.reset_reference()
        return rec

    def start_records(self) -> Iterator[dict[str, Any]]:
        """Iteration 0, one record at a time: warm start, random baseline, evaluations of the policy
        RL starts from (on the eval split and on the extra held-out split)."""
        cfg = self.cfg
        if cfg.resolved_warm_start == "bc":
            yield self.warm_start()
        if cfg.eval_episodes:
            if cfg.baseline_random:
                yield self.evaluator.random_baseline(0)
            yield self.evaluate(0)
            if cfg.resolved_eval_extra_split and cfg.eval_extra_episodes:
                yield self.evaluate(0, cfg.resolved_eval_extra_split, cfg.eval_extra_episodes, kind="eval_extra")

    # ------------------------------------------------------------------ weights and checkpoints
    def load_weights(self, path: str | Path) -> None:
        """Load a ``state_dict`` file (as :meth:`save_weights` writes) into the model; clear errors."""
        load_weights(self.model, path, self.cfg.model)

    def save_weights(self, path: str | Path) -> Path:
        """Write the model's ``state_dict`` (e.g. a warm start shared by several runs)."""
        return save_weights(self.model, path)

    def save(self, iteration: int) -> Path | None:
        """Write a checkpoint (:meth:`trainers.runs.run_checkpoints.RunCheckpoints.save`)."""
        return self.checkpoints.save(iteration, self.history, self.recorder.manifest)

    def resume(self, where: str) -> int:
        """Load ``where`` (``"latest"`` or a checkpoint path); returns the next iteration."""
        self.history, self.start_iteration = self.checkpoints.resume(where)
        return self.start_iteration

    # ------------------------------------------------------------------ the run
    def train(
        self,
        resume: str | None = None,
        overwrite: bool = False,
        run_lock: Any = None,
        accept_plugin_change: bool = False,
    ) -> Path:
        """Run (or continue) the configured iterations; returns the report's path.

        The run owns ``cfg.output_dir`` (:func:`trainers.runs.run_dir.claim_run_dir`): a fresh run
        refuses a directory holding an earlier run unless ``overwrite``, and a second process on
        the same directory is refused. ``run_lock``: a lock the caller already took. A resume
        whose plug-in files changed is refused unless ``accept_plugin_change`` (then recorded).
        """
        main = self.dist.is_main  # rank 0 alone writes logs, checkpoints and the report
        own_lock = (
            self.checkpoints.claim(resume=bool(resume), overwrite=overwrite) if main and run_lock is None else None
        )
        try:
            return self._train(resume, accept_plugin_change)
        finally:
            if own_lock is not None:
                own_lock.release()

    def _train(self, resume: str | None, accept_plugin_change: bool = False) -> Path:
        cfg = self.cfg
        if resume:
            self.resume(resume)
        manifest = self.checkpoints.open_manifest() if self.dist.is_main else None
        self.recorder.start(
            manifest,
            self.history,
            self.start_iteration - 1 if resume else None,
            accept_plugin_change,
        )
        try:
            if not resume:
                for rec in self.start_records():
                    self._keep(rec)
                if (
                    self.dist.enabled and self.dist.strategy == "ddp"
                ):  # a warm start ran on every rank: keep them identical
                    distributed.broadcast_parameters(self.model)
                self.save(0)
            for it in range(self.start_iteration, cfg.iterations + 1):
                if self.budget_spent():  # a resumed run that ended on its budget
                    break
                stop_request.raise_if_requested()
                rec = self.train_iteration(it)
                self._keep(rec)
                if self.teacher is not None:
                    self.recorder.distill_samples(self.teacher.samples)
                    self.teacher.samples.clear()
                last = it == cfg.iterations or self.budget_spent()
                self._evaluations(it, last)
                if cfg.save_every and (it % cfg.save_every == 0 or last):
                    self.save(it)
                self.recorder.iteration_done(rec)
                if last:
                    break
        finally:
            self.recorder.close()
            self.close()
        return self.recorder.report(self.history)

    def _evaluations(self, it: int, last: bool) -> None:
        """The evaluations due after iteration ``it``: every ``eval_every``, and the ``last``
        iteration's (with the extra held-out split's)."""
        cfg = self.cfg
        if cfg.eval_episodes and ((cfg.eval_every and it % cfg.eval_every == 0) or last):
            self._keep(self.evaluate(it))
            if last and cfg.resolved_eval_extra_split and cfg.eval_extra_episodes:
                self._keep(self.evaluate(it, cfg.resolved_eval_extra_split, cfg.eval_extra_episodes, kind="eval_extra"))

    def _keep(self, rec: dict[str, Any]) -> None:
        """A record into the history and the log (a rank's empty record: neither)."""
        if rec:
            self.history.append(rec)
            self.recorder.log(rec)

    def close(self) -> None:
        self.rollouts.close()
