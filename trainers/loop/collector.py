"""The collection stage: one rollout per iteration, of this process's groups, on its tasks.

How the members' episodes are played is a :class:`Collector`: :class:`FlatCollector` plays one
episode per member (:func:`trainers.rollouts.rollout.collect_rollout`); :class:`TreeCollector` branches the
members of a group from shared prefixes (:func:`trainers.rollouts.tree_rollout.collect_tree_rollout`).
:data:`COLLECTORS` maps ``--rollout`` to them. :class:`Rollouts` owns the
:class:`~wrappers.GroupVectorEnv` of the groups, the iteration's task seeds and sampling seed,
and the forked rollout streams (``rollout_streams`` k > 1).

    >>> from trainers.config import TrainConfig
    >>> from trainers.loop.sections import rollout_section
    >>> type(make_collector(rollout_section(TrainConfig(rollout="tree", group_size=4)))).__name__
    'TreeCollector'
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Protocol, Sequence

import torch

from trainers import distributed, forked, seeds
from trainers.config import ConfigError
from trainers.loop.sections import RolloutSection
from trainers.rollouts.rollout import Rollout, collect_rollout
from trainers.rollouts.tree_rollout import collect_tree_rollout
from trainers.runs.console import progress_bar
from trainers.runs.metrics import rollout_metrics
from trainers.sharding import merge_rollouts, rollout_summary, select_groups
from wrappers.group import GroupVectorEnv

__all__ = [
    "COLLECTORS",
    "Collector",
    "FlatCollector",
    "Rollout",
    "Rollouts",
    "TreeCollector",
    "check_rollout_streams",
    "make_collector",
    "varied_groups",
]


class Collector(Protocol):
    """Plays one rollout: every member of the groups of ``envs`` on ``tasks`` (one task seed per group)."""

    def collect(
        self, envs: Any, policy: Any, tasks: Sequence[int], seed: int, on_step: Callable[[int], Any]
    ) -> Rollout: ...


@dataclasses.dataclass(frozen=True)
class FlatCollector:
    """One episode per member; the prompt holds the last ``history_k`` steps."""

    history_k: int = 0

    def collect(
        self, envs: Any, policy: Any, tasks: Sequence[int], seed: int, on_step: Callable[[int], Any]
    ) -> Rollout:
        return collect_rollout(envs, policy, tasks, seed=seed, history_k=self.history_k, on_step=on_step)


@dataclasses.dataclass(frozen=True)
class TreeCollector:
    """Members branch from the prefixes a group shares (``section.tree``, seeded per rollout)."""

    section: RolloutSection

    def collect(
        self, envs: Any, policy: Any, tasks: Sequence[int], seed: int, on_step: Callable[[int], Any]
    ) -> Rollout:
        return collect_tree_rollout(
            envs,
            policy,
            tasks,
            seed=seed,
            cfg=dataclasses.replace(self.section.tree, seed=seed),
            max_steps=self.section.max_steps,
            on_step=on_step,
        )


#: ``--rollout`` -> the collector a config gets
COLLECTORS: dict[str, Callable[[RolloutSection], Collector]] = {
    "flat": lambda section: FlatCollector(section.history_k),
    "tree": TreeCollector,
}


def make_collector(section: RolloutSection) -> Collector:
    """The :class:`Collector` of ``section.rollout``."""
    return COLLECTORS[section.rollout](section)


class Rollouts:
    """The envs of this process's groups and the iteration's rollout on them.

    Args:
        cfg: the collection stage's section of the run's configuration.
        policy: what acts.
        env_fn: a member env factory.
        dist: the run's processes.
        shard: the groups played here.
        autocast: the forward passes' autocast (the update's).
    """

    def __init__(
        self,
        cfg: RolloutSection,
        policy: Any,
        env_fn: Callable[[], Any],
        dist: distributed.DistInfo,
        shard: range,
        autocast: Callable[[], Any],
    ) -> None:
        self.cfg, self.policy, self.env_fn, self.dist, self.shard, self.autocast = (
            cfg,
            policy,
            env_fn,
            dist,
            shard,
            autocast,
        )
        self.collector = make_collector(cfg)
        self.envs: Any = None
        #: crashed / hung / raising members of the last rollout (their episodes were truncated)
        self.env_failures: dict[str, float] = {}

    def make_envs(self) -> Any:

        cfg = self.cfg
        extra: dict[str, Any] = {"num_cpus": cfg.ray_num_cpus} if cfg.env_backend == "ray" else {}
        return GroupVectorEnv(
            self.env_fn,
            num_groups=len(self.shard),
            group_size=cfg.group_size,
            backend=cfg.env_backend,
            seed=cfg.seed,
            tau_r=cfg.tau_r,
            step_timeout=cfg.step_timeout,
            **extra,
        )

    def collect(self, iteration: int, budget_left: float | None = None) -> Rollout:
        """The iteration's training rollout: one generation batch (:meth:`rollout`), or with
        dynamic sampling as many as it takes to keep ``num_groups`` groups whose outcomes differ
        (at most ``max_gen_batches``, and none started once ``budget_left`` episodes are spent),
        the groups past ``num_groups`` unused. Its ``sampling`` says what was spent."""
        if not self.cfg.dynamic_sampling:
            return self.rollout(iteration)
        if self.dist.enabled:
            raise ConfigError("dynamic_sampling draws its generation batches in one process; run it without torchrun")
        return self._dynamic(iteration, budget_left)

    def _dynamic(self, iteration: int, budget_left: float | None) -> Rollout:
        cfg, need = self.cfg, self.cfg.num_groups
        kept: list[Rollout] = []
        drawn: list[Rollout] = []
        counts = {"dropped": 0, "unused": 0, "kept": 0}
        failures: dict[str, float] = {}
        for k in range(cfg.max_gen_batches):
            if k and budget_left is not None and sum(len(r.trajectories) for r in drawn) >= budget_left:
                break
            rollout = self.rollout(iteration, gen_batch=k)
            for key, value in self.env_failures.items():
                failures[key] = failures.get(key, 0.0) + value
            drawn.append(rollout_summary(rollout))
            varied = varied_groups(rollout)
            take = varied[: need - counts["kept"]]
            counts["dropped"] += len({t.group for t in rollout.trajectories}) - len(varied)
            counts["unused"] += len(varied) - len(take)
            counts["kept"] += len(take)
            kept.append(select_groups(rollout, take))
            if counts["kept"] >= need:
                break
        self.env_failures = failures
        out = merge_rollouts(kept)
        # the generation batches ran one after another: their times add up
        for name in ("seconds", "policy_seconds", "env_seconds", "reset_seconds"):
            setattr(out, name, sum(getattr(r, name) for r in drawn))
        out.response_tokens = sum(r.response_tokens for r in drawn)
        everything = merge_rollouts(drawn)
        first = rollout_metrics(drawn[0], cfg.tau_r)
        sampled = rollout_metrics(everything, cfg.tau_r)
        out.sampling = {
            "episodes": float(len(everything.trajectories)),
            "env_steps": float(len(everything.steps)),
            "dynamic/gen_batches": float(len(drawn)),
            "dynamic/groups_kept": float(counts["kept"]),
            "dynamic/groups_dropped": float(counts["dropped"]),
            "dynamic/groups_unused": float(counts["unused"]),
            "dynamic/first_all_failed_frac": first.get("all_failed_frac", 0.0),
            "dynamic/sampled_success": sampled.get("success", 0.0),
            "dynamic/sampled_all_failed_frac": sampled.get("all_failed_frac", 0.0),
        }
        return out

    def rollout(
        self, iteration: int, shard: range | None = None, shard_index: int | None = None, gen_batch: int = 0
    ) -> Rollout:
        """One training rollout of this rank's groups (``shard``, default ``self.shard``: all B
        groups for one process) x G members on this iteration's tasks; shard k samples with
        :func:`trainers.distributed.shard_seed` (shard 0: the single-process seed). With
        ``rollout_streams`` k > 1, the rollout of all B groups that k ranks would play together
        (:meth:`rollout_in_streams`). ``gen_batch`` k > 0: dynamic sampling's k-th extra batch,
        on tasks and a sampling seed of its own (:func:`trainers.seeds.gen_batch_tasks`)."""
        cfg = self.cfg
        if cfg.rollout_streams > 1 and shard is None:
            return self.rollout_in_streams(iteration, gen_batch)
        shard = self.shard if shard is None else shard
        shard_index = self.dist.rank if shard_index is None else shard_index
        self.envs = self.envs or self.make_envs()
        tasks = seeds.gen_batch_tasks(cfg.seed, iteration, gen_batch, cfg.num_groups)[shard.start : shard.stop]
        self.policy.model.eval()
        bar = progress_bar(
            len(shard) * cfg.group_size * cfg.max_steps, f"rollout {iteration}", cfg.progress_bars and self.dist.is_main
        )
        restarts, errors = self.envs.worker_restarts, self.envs.member_errors
        try:
            seed = distributed.shard_seed(seeds.gen_batch_rollout(cfg.seed, iteration, gen_batch), shard_index)
            with torch.no_grad(), self.autocast(), distributed.full_weights(self.policy.model, self.dist):
                return self.collector.collect(self.envs, self.policy, tasks, seed, bar.update)
        finally:
            bar.close()
            self.env_failures = {
                "rollout/worker_restarts": float(self.envs.worker_restarts - restarts),
                "rollout/worker_errors": float(self.envs.member_errors - errors),
            }

    def rollout_in_streams(self, iteration: int, gen_batch: int = 0) -> Rollout:
        """Block 0 of the groups played here, block k in a process forked from this one
        (:func:`trainers.forked.run_forked`, its own envs, no progress bar), sampled as rank k of a
        run in ``rollout_streams`` processes; the blocks merged in order
        (:func:`trainers.sharding.merge_rollouts`), the env failures summed."""
        n = self.cfg.rollout_streams

        def block(k: int) -> Callable[[Callable[[int], None]], tuple[Rollout, dict[str, float]]]:
            def play(step: Callable[[int], None]) -> tuple[Rollout, dict[str, float]]:
                if k:  # in the forked process: envs of its own, no second bar; the trainer's envs are
                    # kept referenced, never closed or collected here (what they hold is the trainer's)
                    self.cfg = dataclasses.replace(self.cfg, progress_bars=False)
                    self._trainer_envs, self.envs = self.envs, None
                rollout = self.rollout(iteration, distributed.shard_groups(self.cfg.num_groups, n, k), k, gen_batch)
                if k:
                    self.envs.close()
                return rollout, self.env_failures

            return play

        parts = forked.run_forked([block(k) for k in range(n)], name="rollout stream")
        self.env_failures = {key: sum(f[key] for _, f in parts) for key in parts[0][1]}
        return merge_rollouts([r for r, _ in parts])

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()
        self.envs = None


def varied_groups(rollout: Rollout) -> list[int]:
    """The groups of ``rollout`` whose outcomes are not all equal (those with a group-relative
    signal), in order: what dynamic sampling keeps.

    >>> from trainers.rollouts.rollout import Trajectory
    >>> varied_groups(Rollout(trajectories=[Trajectory(g, i, "t", "x", outcome=o)
    ...     for i, (g, o) in enumerate([(0, 0.0), (0, 0.0), (1, 0.0), (1, 1.0), (2, 1.0), (2, 1.0)])]))
    [1]
    """
    outcomes: dict[int, list[float]] = {}
    for t in rollout.trajectories:
        outcomes.setdefault(t.group, []).append(float(t.outcome))
    return [g for g in sorted(outcomes) if max(outcomes[g]) != min(outcomes[g])]


def check_rollout_streams(n: int, dist: distributed.DistInfo, device: torch.device) -> None:
    """Rollout streams are forked processes: one process, a model on the CPU, fork available."""
    if dist.enabled:
        raise ConfigError(
            f"rollout_streams {n}: a run in several processes already splits its groups; use "
            "--rollout-streams 1 under torchrun"
        )
    if device.type != "cpu":
        raise ConfigError(f"rollout_streams {n}: a forked process cannot use {device.type}; use it with --device cpu")
    if not forked.can_fork():
        raise ConfigError(f"rollout_streams {n}: needs the fork start method, which this platform lacks")
