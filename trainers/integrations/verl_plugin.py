"""verl plugin: ProGPO's estimators in every verl process, with their columns, v1 and legacy trainer.

Loaded by verl itself, in each process that runs ``import verl`` (the driver, the ``TaskRunner``
Ray actor, the workers), through this package's ``verl.plugins`` entry point (``pyproject.toml``;
verl 0.9 loads every entry point of that group unless ``VERL_USE_EXTERNAL_PLUGINS=none``). Where
entry points are off, ``VERL_USE_EXTERNAL_MODULES=trainers.integrations.verl_plugin`` does the
same. Nothing else is needed: set ``algorithm.adv_estimator=progpo_grpo`` (or ``progpo_gigpo``,
``progpo_shaped_grpo``, ``planpo``, ``progpo_planpo``, ``hgpo``, ``progpo_hgpo``) and return the
columns of :func:`trainers.integrations.verl.required_columns` per response.

What it does, once per process, when the verl module in question is first imported (an import
hook, so loading this plugin costs nothing and imports nothing of verl's trainer; a patch that
fails warns with a ``RuntimeWarning`` and leaves that module as verl wrote it, so ``import verl``
never fails because of the plugin; it needs only ``trainers.integrations``, not ``agents``):

* ``verl.trainer.ppo.core_algos``: registers :func:`trainers.integrations.verl.estimators`.
* ``verl.trainer.ppo.ray_trainer.compute_advantage`` (legacy trainer; v1 delegates non-GRPO
  estimators to it): for a column estimator, passes ``non_tensor_batch`` to it, as verl does for
  GDPO. The estimator raises one line when a column is missing; it never falls back to GRPO.
* ``verl.trainer.ppo.v1.trainer_base.PPOTrainer._compute_advantage`` (v1, verl 0.9's default):
  v1 rebuilds the batch from TransferQueue with ``uid`` alone, so for a column estimator the
  columns are read from each sample's ``extra_fields`` (top level, or its ``reward_extra_info``:
  what an agent loop or a reward function returns) and added to ``non_tensor_batch``, with
  ``traj_uid`` = the sample's session (``{uid}_{session_id}``).
* ``verl.trainer.ppo.v1.utils``: binds the patched ``compute_advantage`` (it imports the name).

Where the columns come from, per response: ``progpo_outcome`` (the env's outcome: 1.0 won /
0.0, or the WebShop score; not a penalised reward) and ``progpo_coverage_rate`` (the episode's
``info["coverage_rate"]`` from :class:`wrappers.FirstVisitCoverage`); ``planpo`` reads
``progpo_turns`` (the episode's number of turns); ``progpo_gigpo``, ``hgpo`` and ``progpo_hgpo``
add ``anchor_obs``, ``progpo_first_visit``, ``progpo_step`` per step row.
"""

# Imports inside functions: verl loads this plug-in in every process at `import verl`, so the
# estimators' module (torch) is imported by the patches, when a verl module they patch is imported.
from __future__ import annotations

import contextvars
import functools
import importlib.abc
import importlib.util
import sys
import warnings
from typing import Any, Callable

import numpy as np

__all__ = ["install", "patched_modules"]

_CORE, _LEGACY, _V1_BASE, _V1_UTILS = (
    "verl.trainer.ppo.core_algos",
    "verl.trainer.ppo.ray_trainer",
    "verl.trainer.ppo.v1.trainer_base",
    "verl.trainer.ppo.v1.utils",
)
#: module name -> what was patched in it (read by tests and scripts/check_verl_agent.py)
_PATCHED: dict[str, str] = {}
#: columns read from TransferQueue by the v1 wrapper, consumed by the patched compute_advantage
_V1_COLUMNS: contextvars.ContextVar[dict[str, np.ndarray] | None] = contextvars.ContextVar(
    "progpo_v1_columns", default=None
)


def patched_modules() -> dict[str, str]:
    """``{module: what was patched}`` in this process so far."""
    return dict(_PATCHED)


def _name(adv_estimator: Any) -> str:
    return str(getattr(adv_estimator, "value", adv_estimator))


def _patch_core(module: Any) -> None:
    from trainers.integrations.verl import register

    register()
    _PATCHED[module.__name__] = "registered " + ", ".join(sorted(_estimators()))


def _estimators() -> dict[str, Callable[..., Any]]:
    from trainers.integrations.verl import ESTIMATORS

    return ESTIMATORS


def _patch_legacy(module: Any) -> None:
    from trainers.integrations.verl import COLUMN_ESTIMATORS

    original = module.compute_advantage
    if getattr(original, "_progpo", False):
        return

    @functools.wraps(original)
    def compute_advantage(data: Any, adv_estimator: Any, *args: Any, **kwargs: Any) -> Any:
        name = _name(adv_estimator)
        if name not in COLUMN_ESTIMATORS:
            return original(data, adv_estimator, *args, **kwargs)
        if "response_mask" not in data.batch.keys():
            data.batch["response_mask"] = module.compute_response_mask(data)
        columns = dict(data.non_tensor_batch)
        columns.update(_V1_COLUMNS.get() or {})
        config = kwargs.get("config")  # verl 0.9 passes it by keyword (legacy and v1)
        adv, ret = _estimators()[name](
            token_level_rewards=data.batch["token_level_rewards"],
            response_mask=data.batch["response_mask"],
            index=data.non_tensor_batch["uid"],
            config=config,
            non_tensor_batch=columns,
        )
        data.batch["advantages"], data.batch["returns"] = adv, ret
        return data

    compute_advantage._progpo = True  # type: ignore[attr-defined]  # a marker on the function: the patch is applied once
    module.compute_advantage = compute_advantage
    _PATCHED[module.__name__] = "compute_advantage passes non_tensor_batch to " + ", ".join(COLUMN_ESTIMATORS)


def v1_columns(extra_fields: list[Any], keys: list[str], names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """ProGPO columns from v1 samples' ``extra_fields`` (top level or ``reward_extra_info``) and
    ``traj_uid`` from their TransferQueue keys ``{uid}_{session_id}_{index}``; absent columns are
    left out (the estimator then names them)."""
    rows = [f if isinstance(f, dict) else {} for f in extra_fields]
    out: dict[str, np.ndarray] = {"traj_uid": np.array([k.rsplit("_", 1)[0] for k in keys], dtype=object)}
    for name in names:
        values = [r.get(name, (r.get("reward_extra_info") or {}).get(name)) for r in rows]
        if all(v is not None for v in values):
            out[name] = np.array(values, dtype=object if name == "anchor_obs" else None)
    return out


def _patch_v1_base(module: Any) -> None:
    from trainers.integrations.verl import COLUMN_ESTIMATORS, REQUIRED_COLUMNS

    cls = module.PPOTrainer
    original = cls._compute_advantage
    if getattr(original, "_progpo", False):
        return

    @functools.wraps(original)
    def _compute_advantage(self: Any, batch: Any, metrics: dict) -> Any:
        name = _name(self.config.algorithm.adv_estimator)
        if name not in COLUMN_ESTIMATORS:
            return original(self, batch, metrics)
        data = module.tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
        extra = data.pop("extra_fields", None)
        columns = v1_columns(
            list(extra.tolist()) if extra is not None else [None] * len(batch.keys),
            list(batch.keys),
            tuple(c for c in REQUIRED_COLUMNS[name] if c != "traj_uid"),
        )
        token = _V1_COLUMNS.set(columns)
        try:
            return original(self, batch, metrics)
        finally:
            _V1_COLUMNS.reset(token)

    _compute_advantage._progpo = True  # type: ignore[attr-defined]  # as above
    cls._compute_advantage = _compute_advantage
    _PATCHED[module.__name__] = "PPOTrainer._compute_advantage reads ProGPO columns from extra_fields"


def _patch_v1_utils(module: Any) -> None:
    legacy = sys.modules.get(_LEGACY)
    if legacy is not None and getattr(legacy.compute_advantage, "_progpo", False):
        module.compute_advantage = legacy.compute_advantage
        _PATCHED[module.__name__] = "compute_advantage bound to the patched legacy one"


_PATCHES: dict[str, Callable[[Any], None]] = {
    _CORE: _patch_core,
    _LEGACY: _patch_legacy,
    _V1_BASE: _patch_v1_base,
    _V1_UTILS: _patch_v1_utils,
}


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Runs the patch of a verl module right after that module executes (before anyone uses it)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in _PATCHES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _PatchingLoader(spec.loader, _PATCHES[fullname])
                return spec
        return None


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, patch: Callable[[Any], None]) -> None:
        self.loader, self.patch = loader, patch

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        _apply(self.patch, module)


def _apply(patch: Callable[[Any], None], module: Any) -> None:
    """Run ``patch`` on ``module``; a failure warns and leaves verl's module as verl wrote it.

    The patches run inside ``import verl...``: an exception here would surface as verl's own
    ``ImportError`` and take verl down with the plugin.
    """
    try:
        patch(module)
    except Exception as err:  # any failure of the plugin must leave verl usable
        detail = str(err).splitlines()[0][:200] if str(err) else ""
        warnings.warn(
            f"progpo's verl plugin could not patch {module.__name__} ({type(err).__name__}: {detail}); "
            "verl works without it, but the progpo_* estimators may be missing or compute without "
            "ProGPO's columns",
            RuntimeWarning,
            stacklevel=2,
        )


def install() -> None:
    """Patch the verl modules already imported, and the others as they get imported (idempotent)."""
    for name in (_CORE, _LEGACY, _V1_UTILS, _V1_BASE):
        if name in sys.modules:
            _apply(_PATCHES[name], sys.modules[name])
    if not any(isinstance(f, _PostImportFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PostImportFinder())


install()
