"""A run's checkpoints and ownership: saving its state, resuming from it, whose run a checkpoint
is, and the lock on the run dir.

:class:`RunCheckpoints` writes a checkpoint (:func:`trainers.runs.checkpoint.save_checkpoint`: model,
optimizer, RNG states, the env schedule, the history, an EMA teacher) every ``save_every``
iterations, and loads one back on ``--resume``: only with the config it was written with (bar
:data:`RESUME_COMPATIBLE`), with the process count that wrote it, and only into its own run dir
(the run ids decide, else the dir's ``config.yaml`` and ``metrics.jsonl``) or an empty one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from trainers import distributed, seeds
from trainers.config import EARLIER_VALUES, ConfigError, TrainConfig, flatten_sections, upgrade_names
from trainers.finite import check_finite_weights
from trainers.runs.checkpoint import (
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
from trainers.runs.metrics import begins_with, read_metrics
from trainers.runs.run_dir import RunDirLock, RunManifest, RunSection, claim_run_dir, earlier_run_files

__all__ = ["RESUME_COMPATIBLE", "RunCheckpoints", "load_weights", "save_weights"]

#: config fields that may differ between a run and its resumption (``decode``: both engines draw
#: the same samples; ``gradient_checkpointing`` and ``logit_chunk_tokens``: the same gradients, recomputed)
RESUME_COMPATIBLE = (
    "iterations",
    "output_dir",
    "progress_bars",
    "tensorboard",
    "report_to",
    "eval_every",
    "save_every",
    "notes",
    "step_timeout",
    "env_backend",
    "ray_num_cpus",
    "decode",
    "gradient_checkpointing",
    "logit_chunk_tokens",
)


class RunCheckpoints:
    """The checkpoints of the run in ``cfg.output_dir``.

    Args:
        cfg: the run dir's section of the run's configuration. model / optimizer: what is saved and restored.
        dist: the run's processes. teacher: a teacher whose EMA copy is saved with the run, or None.
    """

    def __init__(
        self,
        cfg: RunSection,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        dist: distributed.DistInfo,
        teacher: Any = None,
    ) -> None:
        self.cfg, self.model, self.optimizer, self.dist, self.teacher = cfg, model, optimizer, dist, teacher
        self.run_dir = Path(cfg.output_dir)
        #: the run id of the checkpoint resumed from (a run continued in a new dir takes it)
        self.resumed_run_id: str | None = None

    def save(self, iteration: int, history: list[dict[str, Any]], manifest: RunManifest | None) -> Path | None:
        """Write a checkpoint (rank 0; with several processes every rank's RNG state goes in it,
        and the others return ``None`` once it is written)."""
        check_finite_weights(self.model.parameters())  # never a non-finite latest, never a finite one pruned for it
        extra: dict[str, Any] = {}
        if self.dist.enabled:
            if (
                self.dist.strategy == "fsdp2"
            ):  # the full state gathered from the shards (FSDP2 runs need GPUs; a test takes this path with a stand-in gather)
                extra["model"], extra["optimizer"] = distributed.full_state_dicts(self.model, self.optimizer)
            rngs = distributed.gather_objects(capture_rng(), self.dist.world_size)
            if not self.dist.is_main:
                distributed.barrier()
                return None
            extra["distributed"] = {"world_size": self.dist.world_size, "rng": rngs}
        if manifest is not None:  # recorded first: a crash mid-write leaves no file the run disowns
            manifest.record(*checkpoint_files(self.run_dir, iteration))
        ema = self.teacher.ema if self.teacher is not None else None
        path = save_checkpoint(
            self.run_dir,
            iteration,
            {
                "run_id": manifest.run_id if manifest is not None else None,
                "config": dict(self.cfg.config),
                "model": trainable_state(self.model, self.cfg.lora),
                "optimizer": self.optimizer.state_dict(),
                "rng": capture_rng(),
                "env_schedule": {
                    "seed": self.cfg.seed,
                    "next_iteration": iteration + 1,
                    "eval_seed": seeds.eval_plan(self.cfg.seed),
                },
                "history": history,
                **({"teacher_ema": ema.state_dict()} if ema is not None else {}),
                **extra,
            },
        )
        distributed.barrier()
        return path

    def resume(self, where: str) -> tuple[list[dict[str, Any]], int]:
        """Load ``where`` (``"latest"`` or a checkpoint path) into the model, optimizer, RNGs and
        teacher; returns the run's history and the next iteration."""
        path = latest_checkpoint(self.run_dir) if where == "latest" else Path(where)
        data = load_checkpoint(path, require=tuple(TRAINING_ENTRIES))
        saved = data.get("config", {})
        if not isinstance(saved, dict):
            raise CheckpointError(f"checkpoint {path}: 'config' must be a mapping, got {type(saved).__name__}")
        saved = upgrade_names(saved, warn=False)  # a checkpoint written before a field was renamed
        now = dict(self.cfg.config)
        # a field added since the checkpoint was written had its earlier meaning, else its default
        defaults = {**TrainConfig().to_dict(), **EARLIER_VALUES}
        diff = sorted(k for k in now if k not in RESUME_COMPATIBLE and saved.get(k, defaults.get(k)) != now[k])
        if diff:
            raise CheckpointError(
                f"{path} was written with a different config ({', '.join(diff)} differ); "
                "resume with the same settings or start a new --output-dir"
            )
        self.check_owner(path, data)
        saved_world = int((data.get("distributed") or {}).get("world_size", 1))
        if saved_world != self.dist.world_size:  # before any state is loaded, and not taken for a shape mismatch
            raise CheckpointError(
                f"checkpoint {path} was written by {saved_world} process(es); resume it with "
                f"{saved_world} (this run has {self.dist.world_size})"
            )
        try:
            self._load_state(data)
        except (KeyError, RuntimeError, ValueError, TypeError) as err:
            raise CheckpointError(
                f"checkpoint {path} does not match this model/optimizer "
                f"({type(err).__name__}: {str(err).splitlines()[0][:150] if str(err) else ''})"
            ) from err
        return list(data["history"]), int(data["iteration"]) + 1

    def _load_state(self, data: dict[str, Any]) -> None:
        load_trainable_state(self.model, data["model"], self.cfg.lora)
        if self.teacher is not None and data.get("teacher_ema") is not None:
            self.teacher.ensure_ema().load_state_dict(data["teacher_ema"])
        self.optimizer.load_state_dict(data["optimizer"])
        restore_rng(data["rng"])
        if self.dist.enabled:
            restore_rng(data["distributed"]["rng"][self.dist.rank])

    def check_owner(self, path: Path, data: dict[str, Any]) -> None:
        """Refuse a checkpoint of another run than the one in the output dir, before anything is written.

        The run ids decide where both have one; else (a run written before run ids) the dir's
        ``config.yaml`` must be the checkpoint's config and its ``metrics.jsonl`` must start with
        the checkpoint's history. An output dir that holds no run takes any checkpoint.
        """
        ckpt_id = data.get("run_id") if isinstance(data.get("run_id"), str) else None
        self.resumed_run_id = ckpt_id
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
        if config_file.is_file() and not _same_config(config_file, data.get("config") or {}):
            raise CheckpointError(f"{where} (its config differs from {config_file.name}); {advice}")
        metrics_file = self.run_dir / "metrics.jsonl"
        if metrics_file.is_file():
            if not begins_with(read_metrics(metrics_file), list(data["history"])):
                raise CheckpointError(f"{where} (its history differs from {metrics_file.name}); {advice}")

    def claim(self, resume: bool, overwrite: bool) -> RunDirLock:
        """Lock the run dir for this run (:func:`trainers.runs.run_dir.claim_run_dir`): a fresh run
        refuses a dir holding an earlier run unless ``overwrite``; a second process is refused."""
        return claim_run_dir(self.run_dir, resume=resume, overwrite=overwrite)

    def open_manifest(self) -> RunManifest:
        """The run dir's manifest; a resumed run without one (a run from before manifests, or a
        checkpoint continued in a new dir) starts it, taking the earlier run's files as its own."""
        manifest = RunManifest.load(self.run_dir)
        if manifest is None:
            earlier = earlier_run_files(self.run_dir)[0]  # read before the new manifest, which lists none of them yet
            manifest = RunManifest.create(self.run_dir, self.resumed_run_id)
            manifest.record(*earlier)
        return manifest


def _same_config(config_file: Path, saved: dict[str, Any]) -> bool:
    """Whether ``config_file`` holds the checkpoint's config ``saved`` (bar :data:`RESUME_COMPATIBLE`)."""
    import yaml  # read only when a checkpoint's config is compared with the run dir's

    try:
        there = yaml.safe_load(config_file.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        there = {}
    saved = upgrade_names(saved, warn=False)
    try:  # a run's config.yaml is written in sections (flat before they existed)
        there = upgrade_names(flatten_sections(there, warn=False), warn=False) if isinstance(there, dict) else there
    except ConfigError:
        return False
    return isinstance(there, dict) and all(there.get(k) == saved.get(k) for k in saved if k not in RESUME_COMPATIBLE)
