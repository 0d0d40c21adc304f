"""The record stage: what a run writes of itself, and one iteration's metrics record.

:class:`RunRecorder` keeps the run's files on rank 0: ``metrics.jsonl`` (with TensorBoard and W&B
where asked), ``config.yaml``, ``provenance.jsonl``, the teacher's samples, the manifest of every
file the run wrote, and at the end the report; and the iterations' progress on the console.
:func:`train_record` gathers the ranks' rollouts (as summaries), credit and env failures on rank 0
(:func:`gather_credit`) so that a run in several processes logs what one process would, then
joins the rollout metrics, the credit metrics, the update's statistics and the iteration's times.
"""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import torch

from trainers import distributed
from trainers.console import bars_shown, iteration_line, progress_bar
from trainers.credit import Credit
from trainers.metrics import (
    WANDB_ID_FILE,
    MetricsLogger,
    advantage_metrics,
    restore_for_resume,
    rollout_metrics,
    wandb_run_id,
    wandb_settings,
)
from trainers.report import write_report
from trainers.run_dir import RunManifest
from trainers.run_files import open_nofollow, write_atomic
from trainers.sections import RunSection
from trainers.sharding import merge_rollouts, rollout_summary

if TYPE_CHECKING:  # annotations only: the records read the estimator's config and the rollout, never build them
    from trainers.advantages import AdvantageConfig
    from trainers.rollout import Rollout

__all__ = ["RunRecorder", "engine_metrics", "gather_credit", "train_record"]


def gather_credit(rollout: Rollout, credit: Credit, env_failures: dict[str, float],
                  dist: distributed.DistInfo) -> tuple[Rollout, Credit, dict[str, float]]:
    """Every rank's rollout (summary), credit and env failure counts merged on rank 0 in rank
    order: the metrics then equal a single process's over all groups. Other ranks keep their own
    (their records are not logged). One process: unchanged."""
    if not dist.enabled:
        return rollout, credit, env_failures
    parts = distributed.gather_objects((rollout_summary(rollout), credit.steps, np.asarray(credit.all_failed),
                                        env_failures, np.asarray(credit.step_failed), credit.acted), dist.world_size)
    if parts is None:
        return rollout, credit, env_failures
    failures: dict[str, float] = {}
    for part in parts:
        for key, value in part[3].items():
            failures[key] = failures.get(key, 0.0) + value
    acted = {key: (value if key.endswith("_alpha") else sum(p[5].get(key, 0.0) for p in parts))
             for key, value in parts[0][5].items()}  # counts add up over ranks; a weight is shared
    merged = Credit(np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts]),
                    np.concatenate([p[4] for p in parts]), acted)
    return merge_rollouts([p[0] for p in parts]), merged, failures


def train_record(cfg: Any, adv_cfg: AdvantageConfig, iteration: int, rollout: Rollout, credit: Credit,
                 env_failures: dict[str, float], stats: dict[str, float], times: tuple[float, float, float],
                 dist: distributed.DistInfo, device: torch.device) -> dict[str, Any]:
    """The iteration's metrics record (over every rank's groups); ``adv_cfg``: the estimator's
    config (``CreditAssigner.adv_cfg``); ``times``: when the rollout, the
    update and the iteration's end began (``time.perf_counter``)."""
    t0, t1, t2 = times
    tree_stats = dict(rollout.tree_stats)  # this rank's (a tree rollout's counts are not gathered across ranks)
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
    rec.setdefault("kl", 0.0)
    rec.setdefault("clip_fraction", 0.0)
    rec.update(stats)
    rec["time/rollout_s"] = t1 - t0
    rec["time/generate_s"] = float(getattr(rollout, "policy_seconds", 0.0))
    rec["time/env_s"] = float(getattr(rollout, "env_seconds", 0.0))
    # the rollout's phases: reset, generate, env, the rest of the collector's loop, then credit
    # (advantages, teacher inputs, gathering the ranks), so that they add up to time/rollout_s
    rec["time/reset_s"] = float(rollout.reset_seconds)
    rec["time/rollout_other_s"] = max(0.0, rollout.seconds - rollout.policy_seconds - rollout.env_seconds
                                      - rollout.reset_seconds)
    rec["time/credit_s"] = max(0.0, (t1 - t0) - rollout.seconds)
    rec["time/update_s"] = t2 - t1
    rec["time/iteration_s"] = t2 - t0
    rec["tokens_per_s"] = rollout.response_tokens / max(rollout.seconds, 1e-9)
    rec["rollout/response_tokens"] = float(rollout.response_tokens)
    if torch.cuda.is_available() and device.type == "cuda":
        rec["gpu/peak_mem_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    rec["env_steps_per_s"] = len(rollout.steps) / max(rollout.seconds, 1e-9)
    return rec


def engine_metrics(policy: Any) -> dict[str, float]:
    """The generation engine's one-time costs so far, when it counts them
    (``StaticCacheBackend.stats``): ``time/compile_s`` and ``gen/compiles``."""
    stats = getattr(getattr(policy, "backend", None), "stats", None)
    if not isinstance(stats, dict):
        return {}
    return {"time/compile_s": float(stats.get("compile_s", 0.0)), "gen/compiles": float(stats.get("compiles", 0.0))}


class RunRecorder:
    """The files and console lines of a run (rank 0 writes; the other ranks' calls do nothing).

    Args:
        cfg: the run dir's section of the run's configuration. main: whether this process is rank 0.
    """

    def __init__(self, cfg: RunSection, main: bool) -> None:
        self.cfg, self.main = cfg, main
        self.run_dir = Path(cfg.output_dir)
        self.manifest: RunManifest | None = None
        self.logger: MetricsLogger | None = None
        self.bar: Any = None

    def start(self, manifest: RunManifest | None, history: Sequence[dict[str, Any]], resumed_at: int | None) -> None:
        """Open the run's files (``resumed_at``: the checkpoint's iteration on a resume, whose
        ``history`` rebuilds a missing ``metrics.jsonl``) and the iterations' progress bar."""
        cfg = self.cfg
        if self.main:
            metrics_path = self.run_dir / "metrics.jsonl"
            assert manifest is not None
            self.manifest = manifest
            if resumed_at is not None:
                said, damaged = restore_for_resume(metrics_path, list(history), resumed_at)
                if damaged is not None:
                    manifest.record(damaged)
                if said:
                    warnings.warn(said, UserWarning, stacklevel=4)
            wandb = None
            if "wandb" in cfg.trackers:
                manifest.record(self.run_dir / WANDB_ID_FILE)
                wandb = wandb_settings(dict(cfg.config), self.run_dir, wandb_run_id(self.run_dir, resumed_at is not None))
            self.logger = MetricsLogger(self.run_dir, tensorboard="tensorboard" in cfg.trackers, wandb=wandb,
                                        config=dict(cfg.config), resume_after=resumed_at)
            manifest.record(*self.logger.files, self.run_dir / "config.yaml")
            write_atomic(self.run_dir / "config.yaml", _to_yaml(dict(cfg.sections)))
            self._record_provenance(resumed_at or 0)
        # no timed lines for the iterations: each prints its own line where no bar is drawn
        self.bar = progress_bar(cfg.iterations, "iterations", cfg.progress_bars and self.main, leave=True, lines=False)
        self.bar.update(resumed_at or 0)

    def log(self, record: dict[str, Any]) -> None:
        if self.logger is not None:
            self.logger.log(record)

    def iteration_done(self, rec: dict[str, Any]) -> None:
        """Advance the iterations' bar; with no terminal, one line per iteration instead."""
        self.bar.update(1)
        self.bar.set_postfix(success=f"{rec.get('success', 0):.2f}", all_failed=f"{rec.get('all_failed_frac', 0):.2f}")
        if self.cfg.progress_bars and self.main and not bars_shown(True):
            print(iteration_line(rec, self.cfg.iterations), file=sys.stderr, flush=True)

    def distill_samples(self, samples: Sequence[dict[str, Any]]) -> None:
        """Append the teacher's samples of an iteration (contexts it read, with the decision they
        re-scored) to ``distill_samples.jsonl``, so that a user can read what the teacher saw."""
        if not samples or not self.main:
            return
        path = self.run_dir / "distill_samples.jsonl"
        if self.manifest is not None:
            self.manifest.record(path)
        with open_nofollow(path, "a") as fh:
            fh.writelines(json.dumps(sample) + "\n" for sample in samples)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.logger is not None:
            self.logger.close()

    def report(self, history: Sequence[dict[str, Any]]) -> Path:
        """Write the run's report (rank 0); its path."""
        if not self.main:
            return self.run_dir / "summary.md"
        assert self.manifest is not None
        from trainers.provenance import append_end  # kept off the import list: records.py is at its sibling limit

        last = [r["iteration"] for r in history if isinstance(r.get("iteration"), int)]
        append_end(self.run_dir, max(last, default=0))
        self.manifest.record(self.run_dir / "summary.md", self.run_dir / "curves.png")
        return write_report(self.run_dir, list(history), dict(self.cfg.config))

    def _record_provenance(self, iteration: int) -> None:
        """Append where this process runs the run (:mod:`trainers.provenance`) to
        ``provenance.jsonl``: at the start, and on a resume where anything of it changed."""
        from trainers.provenance import append_provenance  # kept off the import list: sibling limit

        assert self.manifest is not None
        self.manifest.record(self.run_dir / "provenance.jsonl")
        append_provenance(self.run_dir, iteration, self.cfg.config)


def _to_yaml(data: dict[str, Any]) -> str:
    import yaml

    # config.yaml is read back by a loader that refuses aliases; PyYAML has no type stubs here, so
    # its dumper is Any to the type checker
    class NoAliases(yaml.SafeDumper):  # type: ignore[misc]
        def ignore_aliases(self, data: Any) -> bool:
            return True

    return yaml.dump(data, Dumper=NoAliases, sort_keys=False)
