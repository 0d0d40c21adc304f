"""A saved policy, loaded as the run trained it: its config (prompt, template, policy mode, model,
LoRA) read from the checkpoint, its trainable weights from the checkpoint, verified first.

``PATH`` is a run dir (its ``latest`` checkpoint) or a checkpoint file. The tools that read a
saved policy (:mod:`trainers.cli.evaluate`, :mod:`trainers.cli.export`) go through :func:`load_saved`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainers.advantages.registry import estimator_names
from trainers.build import build_policy
from trainers.config import EARLIER_VALUES, TrainConfig, config_fields, flatten_sections, load_yaml
from trainers.runs.checkpoint import CheckpointError, latest_checkpoint, load_checkpoint, load_trainable_state
from trainers.teachers.registry import teacher_names
from wrappers.errors import UserError

__all__ = ["SavedPolicy", "load_saved", "resolve_checkpoint", "saved_config"]


@dataclass
class SavedPolicy:
    """A policy as a checkpoint saved it: the run's config, the built policy and model, where it
    came from and the iteration it was saved at."""

    cfg: Any
    policy: Any
    checkpoint: Path
    iteration: int
    #: the estimator and teacher the run trained with (a plug-in's, never imported here)
    recorded: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: the run's records up to this checkpoint, as the checkpoint carries them (``None``: not recorded)
    history: list[dict[str, Any]] | None = None

    @property
    def model(self) -> Any:
        return self.policy.model


def resolve_checkpoint(path: str | Path) -> Path:
    """The checkpoint ``path`` names: the file itself, or a run dir's ``latest``."""
    p = Path(path)
    if p.is_dir():
        if not (p / "checkpoints" / "latest").is_file():
            raise CheckpointError(
                f"{p} has no checkpoint (no checkpoints/latest): it is not a run dir, or its run "
                "has not saved one yet; pass a run dir that has, or a checkpoint file"
            )
        return latest_checkpoint(p)
    if not p.is_file():
        raise CheckpointError(f"{p} is neither a run dir nor a checkpoint file")
    return p


def saved_config(data: dict[str, Any], checkpoint: Path) -> Any:
    """The :class:`~trainers.config.TrainConfig` a checkpoint was written with (a field added since
    then has its earlier meaning); a checkpoint without one is read with its run dir's ``config.yaml``."""
    saved = data.get("config")
    if not isinstance(saved, dict):
        config_yaml = checkpoint.parent.parent / "config.yaml"
        if not config_yaml.is_file():
            raise CheckpointError(
                f"checkpoint {checkpoint} carries no config and {config_yaml} does not exist: the "
                "model, prompt and policy mode it was trained with are unknown"
            )
        saved = flatten_sections(load_yaml(config_yaml), str(config_yaml), warn=False)
    known = {k: v for k, v in {**EARLIER_VALUES, **saved}.items() if k in {f.name for f in config_fields()}}
    return TrainConfig.from_dict(without_plugins(known), source=str(checkpoint), flat=True)


def without_plugins(config: dict[str, Any]) -> dict[str, Any]:
    """A saved config that imports nothing: no ``plugins``, and an estimator or teacher that no
    loaded registry knows (a plug-in's) replaced by the default, with its options. Playing,
    evaluating and exporting a policy need neither, and a checkpoint's config is data, never code
    to run (a crafted one could name any module); a plug-in is imported only when the user names
    it on the command line. :func:`recorded_methods` keeps the names the run trained with.

    >>> without_plugins({"plugins": ["evil.py"], "estimator": "mine", "estimator_options": {"k": 1}})
    {'plugins': [], 'estimator': 'progpo-gigpo', 'estimator_options': {}}
    """
    out = {**config, "plugins": []}
    defaults = {f.name: f for f in config_fields()}
    if out.get("estimator", defaults["estimator"].default) not in estimator_names():
        out["estimator"], out["estimator_options"] = defaults["estimator"].default, {}
    if out.get("distill", "none") not in teacher_names():
        out["distill"], out["teacher_options"] = "none", {}
    return out


def recorded_methods(data: dict[str, Any]) -> dict[str, Any]:
    """The estimator and teacher a checkpoint's run trained with, as it records them (a plug-in's
    name included, which :func:`without_plugins` replaces in the config it builds)."""
    found = data.get("config")
    saved: dict[str, Any] = found if isinstance(found, dict) else {}
    return {k: saved[k] for k in ("estimator", "distill") if isinstance(saved.get(k), str)}


def load_saved(path: str | Path, device: str = "cpu", **overrides: Any) -> SavedPolicy:
    """Load the policy saved at ``path`` on ``device`` (``overrides``: config fields replaced, e.g.
    ``output_dir``). A checkpoint that does not fit its own config's model raises one line."""
    import torch  # the [train] extra

    checkpoint = resolve_checkpoint(path)
    data = load_checkpoint(checkpoint, require=("model",))
    cfg = dataclasses.replace(saved_config(data, checkpoint), device=device, **overrides)
    policy = build_policy(cfg, torch.device(device))
    try:
        load_trainable_state(policy.model, data["model"], cfg.lora)
    except (ValueError, RuntimeError, KeyError) as err:
        raise UserError(
            f"checkpoint {checkpoint} does not fit the model {cfg.model!r} of its run "
            f"({str(err).splitlines()[0][:160]})"
        ) from None
    policy.model.eval()
    history = data.get("history")
    history = [r for r in history if isinstance(r, dict)] if isinstance(history, list) else None
    return SavedPolicy(cfg, policy, checkpoint, int(data["iteration"]), recorded_methods(data), history)
