"""The evaluation stage: a run's fixed held-out episodes, played by its policy, as one record.

:class:`Evaluator` plays a split's :class:`~trainers.rollouts.eval_episodes.EvalPlan` (the same episodes at
every evaluation, a pure function of the run's seed) in ``eval_streams`` streams, forked processes
where the model is on the CPU, and returns the ``eval`` record: success, the per-episode wins and
scores in plan order (for paired comparisons), the panel's fingerprint, rollout diagnostics and
one won and one lost episode for the report. With several processes rank 0 evaluates.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from trainers import distributed, forked, seeds
from trainers.envs import make_env_fn
from trainers.loop.sections import EvalSection
from trainers.rollouts.eval_episodes import EvalPlan, episode_records, example_episodes, random_baseline, run_eval
from trainers.runs.console import progress_bar
from trainers.runs.metrics import rollout_metrics

__all__ = ["Evaluator"]


class Evaluator:
    """Evaluations of ``policy`` on the run's splits.

    Args:
        cfg: the evaluation stage's section of the run's configuration.
        policy: the policy evaluated by default.
        eval_env_fn: the eval split's member env factory.
        dist: the run's processes.
        device: where the model is.
        autocast: the forward passes' autocast.
    """

    def __init__(
        self,
        cfg: EvalSection,
        policy: Any,
        eval_env_fn: Callable[[], Any],
        dist: distributed.DistInfo,
        device: torch.device,
        autocast: Callable[[], Any],
    ) -> None:
        self.cfg, self.policy, self.eval_env_fn, self.dist = cfg, policy, eval_env_fn, dist
        self.device, self.autocast = device, autocast

    def plan(self, split: str | None = None, episodes: int | None = None) -> EvalPlan:
        """The fixed episode list of an evaluation on ``split`` (default: the eval split)."""
        cfg = self.cfg
        split = split or cfg.splits[1]
        n = cfg.eval_episodes if episodes is None else episodes
        return EvalPlan.for_env(self.split_env_fn(split), split, n, seed=seeds.eval_plan(cfg.seed))

    def split_env_fn(self, split: str) -> Callable[[], Any]:
        """Member env factory of ``split`` (the eval split's own factory when it is that split)."""
        if split == self.cfg.splits[1]:
            return self.eval_env_fn
        return make_env_fn(self.cfg.env, split, self.cfg.max_steps, self.cfg.state_key)

    def in_processes(self) -> bool:
        """Evaluation streams run in forked processes where they can (a model on the CPU, ``fork``
        available): no two streams then share an interpreter lock; in threads otherwise."""
        return self.device.type == "cpu" and forked.can_fork()

    def random_baseline(self, iteration: int) -> dict[str, Any]:
        """The eval record of a random admissible command per step (``kind: baseline``)."""
        rec = self.evaluate(iteration, kind="baseline", policy=random_baseline(self.cfg.seed))
        rec["baseline"] = "random admissible command (look, inventory, examine left out)"
        return rec

    def evaluate(
        self,
        iteration: int,
        split: str | None = None,
        episodes: int | None = None,
        kind: str = "eval",
        policy: Any = None,
    ) -> dict[str, Any]:
        """Play the fixed evaluation plan of ``split`` with the policy; returns the eval record.

        The record holds ``eval/success`` (won), ``eval/episodes``, ``eval/split``, the usual
        rollout diagnostics under ``eval/``, and ``eval/won``: the per-episode wins, in plan order,
        so that two evaluations can be compared pairwise (:func:`trainers.statistics.paired_bootstrap_ci`).
        Several processes: rank 0 evaluates, the others wait and return ``{}``.
        """
        if self.dist.enabled:
            with distributed.full_weights(self.policy.model, self.dist):
                rec = self._evaluate(iteration, split, episodes, kind, policy) if self.dist.is_main else {}
                distributed.barrier()
            return rec
        return self._evaluate(iteration, split, episodes, kind, policy)

    def _evaluate(
        self, iteration: int, split: str | None, episodes: int | None, kind: str, policy: Any
    ) -> dict[str, Any]:
        cfg = self.cfg
        plan = self.plan(split, episodes)
        fn = self.split_env_fn(plan.split)
        self.policy.model.eval()
        bar = progress_bar(plan.num_episodes * cfg.max_steps, f"{kind} {plan.split} {iteration}", cfg.progress_bars)
        try:
            with torch.no_grad(), self.autocast():
                # the random baseline draws from one generator: one stream keeps its draws in order
                rollout = run_eval(
                    policy or self.policy,
                    fn,
                    plan,
                    on_step=bar.update,
                    step_timeout=cfg.step_timeout,
                    streams=cfg.eval_streams if policy is None else 1,
                    processes=self.in_processes(),
                )
        finally:
            bar.close()
        rec: dict[str, Any] = {
            "iteration": iteration,
            "kind": kind,
            "eval/split": plan.split,
            "eval/episodes": len(rollout.trajectories),
            "eval/panel": plan.panel(),
        }
        if cfg.teacher_label and policy is None:  # the held-out success of a policy trained with a teacher says so
            rec["distill"] = cfg.teacher_label
        rec.update(rollout_metrics(rollout, cfg.tau_r, prefix="eval/"))
        played = episode_records(rollout)
        rec["eval/won"] = played["won"]
        rec["eval/score"] = played["score"]  # final score / outcome of each episode (WebShop: partial credit)
        rec["eval/examples"] = example_episodes(rollout)  # one won and one lost episode, abridged, for the report
        return rec
