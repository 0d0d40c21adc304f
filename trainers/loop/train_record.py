"""One iteration's metrics record, the same whatever the number of processes.

:func:`train_record` gathers the ranks' rollouts (as summaries), credit and env failures on rank 0
(:func:`gather_credit`) so that a run in several processes logs what one process would, then
joins the rollout metrics, the credit metrics, the update's statistics and the iteration's times.
:func:`engine_metrics` adds the generation engine's one-time costs. The record goes to
:meth:`trainers.runs.records.RunRecorder.log`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from trainers import distributed
from trainers.loop.credit import Credit
from trainers.runs.metrics import advantage_metrics, rollout_metrics
from trainers.sharding import merge_rollouts, rollout_summary

if TYPE_CHECKING:  # annotations only: the record reads the estimator's config and the rollout, never builds them
    from trainers.advantages import AdvantageConfig
    from trainers.rollouts.rollout import Rollout

__all__ = ["budget_fields", "engine_metrics", "gather_credit", "train_record"]


def gather_credit(
    rollout: Rollout, credit: Credit, env_failures: dict[str, float], dist: distributed.DistInfo
) -> tuple[Rollout, Credit, dict[str, float]]:
    """Every rank's rollout (summary), credit and env failure counts merged on rank 0 in rank
    order: the metrics then equal a single process's over all groups. Other ranks keep their own
    (their records are not logged). One process: unchanged."""
    if not dist.enabled:
        return rollout, credit, env_failures
    parts = distributed.gather_objects(
        (
            rollout_summary(rollout),
            credit.steps,
            np.asarray(credit.all_failed),
            env_failures,
            np.asarray(credit.step_failed),
            credit.acted,
            credit.step_term,
        ),
        dist.world_size,
    )
    if parts is None:
        return rollout, credit, env_failures
    failures: dict[str, float] = {}
    for part in parts:
        for key, value in part[3].items():
            failures[key] = failures.get(key, 0.0) + value
    acted = {
        key: (value if key.endswith("_alpha") else sum(p[5].get(key, 0.0) for p in parts))
        for key, value in parts[0][5].items()
    }  # counts add up over ranks; a weight is shared
    merged = Credit(
        np.concatenate([p[1] for p in parts]),
        np.concatenate([p[2] for p in parts]),
        np.concatenate([p[4] for p in parts]),
        acted,
        None if parts[0][6] is None else np.concatenate([p[6] for p in parts]),
    )
    return merge_rollouts([p[0] for p in parts]), merged, failures


def train_record(
    cfg: Any,
    adv_cfg: AdvantageConfig,
    iteration: int,
    rollout: Rollout,
    credit: Credit,
    env_failures: dict[str, float],
    stats: dict[str, float],
    times: tuple[float, float, float],
    dist: distributed.DistInfo,
    device: torch.device,
    spent: tuple[float, float] = (0.0, 0.0),
) -> dict[str, Any]:
    """The iteration's metrics record (over every rank's groups); ``adv_cfg``: the estimator's
    config (``CreditAssigner.adv_cfg``); ``times``: when the rollout, the
    update and the iteration's end began (``time.perf_counter``); ``spent``: the episodes and
    env steps sampled before this iteration (the record's ``budget/*`` add this one's)."""
    t0, t1, t2 = times
    tree_stats = dict(rollout.tree_stats)  # this rank's (a tree rollout's counts are not gathered across ranks)
    sampling = dict(rollout.sampling)  # dynamic sampling's (one process)
    rollout, credit, env_failures = gather_credit(rollout, credit, env_failures, dist)
    rec: dict[str, Any] = {"iteration": iteration, "kind": "train"}
    if cfg.distill_label:
        rec["distill"] = cfg.distill_label  # a run with a teacher says so in every record
    rec.update(tree_stats)
    rec.update(rollout_metrics(rollout, cfg.tau_r))
    rec.update(env_failures)
    rec.update(advantage_metrics(credit.steps, credit.all_failed, credit.step_failed, adv_cfg.progpo, adv_cfg.gate))
    if adv_cfg.spec.metrics is not None:  # where the base's own terms acted (PlanPO's groups, HGPO's peers)
        rec.update(adv_cfg.spec.metrics(credit.acted, credit.all_failed.size, credit.steps.size))
    if credit.step_term is not None and credit.steps.size > 1 and float(np.var(credit.steps)) > 0:
        # how much of the advantage's spread the base's step term carries
        rec["adv/step_var_share"] = float(np.var(credit.step_term)) / float(np.var(credit.steps))
    rec.setdefault("kl", 0.0)
    rec.setdefault("clip_fraction", 0.0)
    rec.update(stats)
    rec["time/rollout_s"] = t1 - t0
    rec["time/generate_s"] = float(getattr(rollout, "policy_seconds", 0.0))
    rec["time/env_s"] = float(getattr(rollout, "env_seconds", 0.0))
    # the rollout's phases: reset, generate, env, the rest of the collector's loop, then credit
    # (advantages, teacher inputs, gathering the ranks), so that they add up to time/rollout_s
    rec["time/reset_s"] = float(rollout.reset_seconds)
    rec["time/rollout_other_s"] = max(
        0.0, rollout.seconds - rollout.policy_seconds - rollout.env_seconds - rollout.reset_seconds
    )
    rec["time/credit_s"] = max(0.0, (t1 - t0) - rollout.seconds)
    rec["time/update_s"] = t2 - t1
    rec["time/iteration_s"] = t2 - t0
    rec["tokens_per_s"] = rollout.response_tokens / max(rollout.seconds, 1e-9)
    rec["rollout/response_tokens"] = float(rollout.response_tokens)
    if torch.cuda.is_available() and device.type == "cuda":
        rec["gpu/peak_mem_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    rec["env_steps_per_s"] = len(rollout.steps) / max(rollout.seconds, 1e-9)
    rec.update(budget_fields(rollout, sampling, spent))
    return rec


def budget_fields(rollout: Rollout, sampling: dict[str, float], spent: tuple[float, float]) -> dict[str, float]:
    """What the run has sampled, cumulative: ``budget/episodes`` and ``budget/env_steps`` (every
    episode and env step played, dropped groups included: a tree's shared prefix is one step),
    and dynamic sampling's ``dynamic/*`` counts of this iteration.

    >>> from trainers.rollouts.rollout import Rollout, Trajectory
    >>> budget_fields(Rollout(trajectories=[Trajectory(0, 0, "t", "x")] * 4), {}, (8.0, 30.0))
    {'budget/episodes': 12.0, 'budget/env_steps': 30.0}
    """
    episodes = sampling.get("episodes", float(len(rollout.trajectories)))
    env_steps = sampling.get("env_steps", float(len(rollout.steps)))
    out = {"budget/episodes": spent[0] + episodes, "budget/env_steps": spent[1] + env_steps}
    out.update({k: v for k, v in sampling.items() if k.startswith("dynamic/")})
    return out


def engine_metrics(policy: Any) -> dict[str, float]:
    """The generation engine's one-time costs so far, when it counts them
    (``StaticCacheBackend.stats``): ``time/compile_s`` and ``gen/compiles``."""
    stats = getattr(getattr(policy, "backend", None), "stats", None)
    if not isinstance(stats, dict):
        return {}
    return {"time/compile_s": float(stats.get("compile_s", 0.0)), "gen/compiles": float(stats.get("compiles", 0.0))}
