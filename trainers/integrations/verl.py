"""ProGPO's advantage estimators (and PlanPO and HGPO beside it) for verl 0.9 (extra ``[verl]``) and verl-agent.

Estimators with verl's signature (``token_level_rewards``, ``response_mask``, ``index``,
``config``, plus ``non_tensor_batch``), returning ``(advantages, returns)``:

* ``progpo_grpo``: ProGPO(GRPO). Reads, per row, ``progpo_outcome`` (the env's outcome, not a
  penalised score) and ``progpo_coverage_rate``; rows sharing a ``traj_uid`` are one trajectory.
* ``progpo_gigpo``: ProGPO(GiGPO) over one row per step (verl-agent's layout): also
  ``traj_uid``, ``anchor_obs``, ``progpo_first_visit``, ``progpo_step``.
* ``planpo`` / ``progpo_planpo``: PlanPO's trajectory term (shorter successes rank higher) from
  ``progpo_outcome`` and ``progpo_turns`` (the episode's number of turns); ProGPO's progress term
  in all-failed groups adds ``progpo_coverage_rate``. When the rows are steps (``traj_uid`` and
  ``progpo_step`` present) the turn term is added too, ``L_{i,t}`` being the row's response
  length, with the weight ``planpo_alpha`` (default 0.1; a constant here, since an estimator does
  not see the training step: change it over a run in the config to follow the paper's decay).
* ``hgpo`` / ``progpo_hgpo``: HGPO's history-depth step term over one row per step: the columns
  of ``progpo_gigpo`` (``hgpo`` needs no ``progpo_first_visit``).
* ``progpo_shaped_grpo``: GRPO (population std) on rewards that are already progress-conditioned
  (reward shaping); reads no column.

A column estimator without its columns raises :class:`MissingColumnsError`, one line naming the
missing columns and how to provide them: it never trains GRPO in ProGPO's name.

How they reach verl (every process, v1 and legacy trainer): :mod:`trainers.integrations.verl_plugin`,
loaded by verl's ``verl.plugins`` entry point. verl-agent (its own vendored verl 0.3, no
registry): :mod:`trainers.integrations.verl_agent`. Config keys read from ``algorithm``:
``progpo_lam``, ``progpo_tau_r``, ``progpo_tau_p``, ``gigpo_omega`` (or verl-agent's
``step_advantage_w``), ``gigpo_gamma``, ``planpo_alpha``, ``planpo_success_threshold``,
``hgpo_depth``, ``hgpo_alpha``, ``hgpo_fusion``, ``hgpo_potential_credit``.

Conventions: ProGPO's population std (verl's GRPO uses the unbiased one, so its advantages are
ours times sqrt((G-1)/G)); eps 1e-6 outside the std. Every estimator is
:func:`trainers.advantages.episode_advantages` or :func:`~trainers.advantages.step_advantages`
on the rows' columns (:func:`advantage_per_row`): one implementation per formula.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import numpy as np
import torch

from trainers.advantages import AdvantageConfig, episode_advantages, factorize, step_advantages
from trainers.advantages.registry import base_names
from trainers.advantages.registry import estimator as registered_estimator
from trainers.advantages.step import base_step_term
from wrappers.errors import UserError
from wrappers.signals import TAU_P, TAU_R

__all__ = [
    "COLUMN_ESTIMATORS",
    "ESTIMATORS",
    "ESTIMATOR_NAMES",
    "MissingColumnsError",
    "REQUIRED_COLUMNS",
    "advantage_per_row",
    "compute_progpo_shaped_grpo_advantage",
    "estimators",
    "option_key",
    "package_names",
    "register",
    "require_columns",
    "required_columns",
]

#: names verl and verl-agent give estimators of their own: a base of the same name is offered as
#: ``progpo_<name>`` alone, never in place of theirs
VERL_SHIPS = frozenset({"grpo", "rloo", "gigpo"})


def _verl_name(estimator: str) -> str:
    return estimator.replace("-", "_")


def option_key(base: str, option: str) -> str:
    """verl's ``algorithm`` key of one of a base's own options (``hgpo_depth``)."""
    return f"{_verl_name(base)}_{option}"


def package_names() -> dict[str, str]:
    """verl's name -> this package's estimator, read from the registry: ``progpo_<base>`` for every
    base, and ``<base>`` for a base that reads more than the outcome (turns, states or a step term)
    and that verl does not ship."""
    out = {_verl_name(f"progpo-{name}"): f"progpo-{name}" for name in base_names()}
    for name in base_names():
        spec = registered_estimator(name)
        if name not in VERL_SHIPS and (spec.needs or spec.step is not None):
            out[_verl_name(name)] = name
    return out


def _cfg_get(config: Any, key: str, default: Any) -> Any:
    if config is None:
        return default
    if isinstance(config, Mapping):
        return config.get(key, default)
    getter = getattr(config, "get", None)
    if callable(getter):
        try:
            return getter(key, default)
        except TypeError:
            pass
    return getattr(config, key, default)


_UNSET = object()


def _progpo_config(config: Any, estimator: str, epsilon: float) -> AdvantageConfig:
    """``AdvantageConfig`` from verl's ``algorithm`` config (keys of the module docstring): the
    shared keys, and each of the base's own options as ``<base>_<option>`` (``hgpo_depth``)."""
    spec = registered_estimator(estimator)
    options = {}
    for f in dataclasses.fields(spec.options) if spec.options is not None else ():
        if f.metadata.get("shared"):
            continue
        value = _cfg_get(config, option_key(spec.name, f.name), _UNSET)
        if value is not _UNSET:
            options[f.name] = type(f.default)(value) if isinstance(f.default, (bool, int, float, str)) else value
    return AdvantageConfig(
        estimator=estimator,
        lam=float(_cfg_get(config, "progpo_lam", 1.0)),
        tau_r=float(_cfg_get(config, "progpo_tau_r", TAU_R)),
        tau_p=float(_cfg_get(config, "progpo_tau_p", TAU_P)),
        omega=float(_cfg_get(config, "gigpo_omega", _cfg_get(config, "step_advantage_w", 1.0))),
        gamma=float(_cfg_get(config, "gigpo_gamma", 0.95)),
        eps=float(epsilon),
        options=options,
    )


def required_columns(name: str) -> tuple[str, ...]:
    """The columns the column estimator ``name`` reads from ``non_tensor_batch``, from its base's needs."""
    estimator = package_names()[name]
    spec = registered_estimator(estimator)
    cols = ["traj_uid", "anchor_obs"] if spec.needs_states else []
    cols.append("progpo_outcome")
    if "turns" in spec.needs:
        cols.append("progpo_turns")
    if estimator.startswith("progpo-"):
        cols.append("progpo_first_visit" if spec.needs_states else "progpo_coverage_rate")
    if spec.needs_states:
        cols.append("progpo_step")
    return tuple(cols)


_HOW_TO_PROVIDE = (
    "verl 0.9: `pip install progpo[verl]` (its verl.plugins entry point forwards the columns) and return them per "
    "response from the agent loop's extra_fields or the reward function's reward_extra_info; verl-agent: build the "
    "envs with trainers.integrations.verl_agent.make_envs. For rewards that are already progress-conditioned use "
    "algorithm.adv_estimator=progpo_shaped_grpo"
)


class MissingColumnsError(UserError, ValueError):
    """A ``progpo_*`` estimator was called without the per-row columns it needs (never GRPO instead)."""


def require_columns(name: str, non_tensor_batch: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``non_tensor_batch`` when it holds every column of :func:`required_columns` ``(name)``; else one clear error."""
    have = set(non_tensor_batch or ())
    missing = [c for c in required_columns(name) if c not in have]
    if missing:
        raise MissingColumnsError(
            f"{name}: non_tensor_batch lacks {', '.join(missing)}"
            f"{' (no non_tensor_batch was passed)' if non_tensor_batch is None else ''}; "
            f"{_HOW_TO_PROVIDE}"
        )
    assert non_tensor_batch is not None
    return non_tensor_batch


def _broadcast(per_row: np.ndarray, response_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    adv = torch.as_tensor(per_row, dtype=torch.float32, device=response_mask.device).unsqueeze(-1) * response_mask
    return adv, adv


def _trajectories(n_rows: int, non_tensor_batch: Mapping[str, Any]) -> tuple[np.ndarray, int]:
    """Dense trajectory id of each row: ``traj_uid`` when present (verl-agent: one row per step),
    else one trajectory per row (verl: one row per response)."""
    if "traj_uid" in non_tensor_batch:
        traj = factorize(list(np.asarray(non_tensor_batch["traj_uid"])))
        return traj, int(traj.max()) + 1 if traj.size else 0
    return np.arange(n_rows), n_rows


def _per_trajectory(rows: Any, traj: np.ndarray, n_traj: int, dtype: Any = np.float64) -> np.ndarray:
    out = np.zeros(n_traj, dtype=dtype) if dtype is not object else np.empty(n_traj, dtype=object)
    out[traj] = np.asarray(rows, dtype=dtype)
    return out


def _episode_rows(index: np.ndarray, ntb: Mapping[str, Any], cfg: AdvantageConfig) -> np.ndarray:
    """An episode-level estimator's advantage of each row (rows of one ``traj_uid`` count once)."""
    traj, n_traj = _trajectories(len(index), ntb)
    cover = _per_trajectory(ntb["progpo_coverage_rate"], traj, n_traj) if cfg.progpo else None
    turns = _per_trajectory(ntb["progpo_turns"], traj, n_traj) if "turns" in cfg.spec.needs else None
    outcomes = _per_trajectory(ntb["progpo_outcome"], traj, n_traj)
    groups = factorize(list(_per_trajectory(index, traj, n_traj, object)))
    progress: dict[str, Any] = dict(lam=cfg.lam, tau_r=cfg.tau_r, tau_p=cfg.tau_p, eps=cfg.eps)
    adv = episode_advantages(
        outcomes, groups, cover, estimator=cfg.estimator, turns=turns, **progress, **dict(cfg.options)
    )
    return adv[traj]


def _step_rows(
    index: np.ndarray, ntb: Mapping[str, Any], cfg: AdvantageConfig, response_lengths: np.ndarray | None
) -> np.ndarray:
    """A step-level estimator's advantage of each row (one row per step)."""
    step_traj, n_traj = _trajectories(len(index), ntb)
    first_visit = ntb.get("progpo_first_visit")
    anchors = ntb.get("anchor_obs")
    out = step_advantages(
        _per_trajectory(ntb["progpo_outcome"], step_traj, n_traj),
        factorize(list(_per_trajectory(index, step_traj, n_traj, object))),
        step_traj,
        np.asarray(ntb["progpo_step"], dtype=np.int64),
        state_ids=None if anchors is None else factorize([str(a) for a in np.asarray(anchors)]),
        first_visit=None if first_visit is None else np.asarray(first_visit, dtype=bool),
        config=cfg,
        response_lengths=response_lengths,
    )
    return out.steps


def _turn_rows(
    index: np.ndarray, ntb: Mapping[str, Any], cfg: AdvantageConfig, response_lengths: np.ndarray | None
) -> np.ndarray:
    """A base that reads each trajectory's turns (PlanPO): its episode term from the columns; on
    step rows (``traj_uid``, ``progpo_step``) plus its step term over the rows' response lengths
    (PlanPO: ``planpo_alpha`` times the turn term)."""
    adv = _episode_rows(index, ntb, cfg)
    if "traj_uid" not in ntb or "progpo_step" not in ntb or response_lengths is None:
        return adv
    step_traj, n_traj = _trajectories(len(index), ntb)
    groups = factorize(list(_per_trajectory(index, step_traj, n_traj, object)))
    term = base_step_term(
        _per_trajectory(ntb["progpo_outcome"], step_traj, n_traj),
        groups,
        step_traj,
        np.asarray(ntb["progpo_step"], dtype=np.int64),
        cfg,
        response_lengths=response_lengths,
    )
    return adv if term is None else adv + term


def advantage_per_row(
    name: str,
    index: np.ndarray,
    non_tensor_batch: Mapping[str, Any] | None,
    *,
    config: Any = None,
    epsilon: float = 1e-6,
    response_lengths: np.ndarray | None = None,
) -> np.ndarray:
    """The advantage of each row under the column estimator ``name`` (a key of
    :func:`required_columns`): what the verl estimators broadcast over the response tokens and
    what verl-agent's ``compute_advantage`` branch calls. ``response_lengths``: each row's
    response token count (PlanPO's turn term on step rows). Without the columns it raises
    :class:`MissingColumnsError`.

    >>> advantage_per_row("planpo", np.array(["a", "a"]), {"progpo_outcome": np.ones(2),
    ...                   "progpo_turns": np.array([2, 4])}).round(4).tolist()
    [1.0, -1.0]
    """
    if name not in package_names():
        raise MissingColumnsError(
            f"{name}: not a column estimator of this package (one of {', '.join(package_names())})"
        )
    ntb = require_columns(name, non_tensor_batch)
    cfg = _progpo_config(config, package_names()[name], epsilon)
    if cfg.spec.needs_states:
        return _step_rows(np.asarray(index), ntb, cfg, response_lengths)
    if "turns" in cfg.spec.needs:
        return _turn_rows(np.asarray(index), ntb, cfg, response_lengths)
    return _episode_rows(np.asarray(index), ntb, cfg)


def _row_lengths(response_mask: torch.Tensor) -> np.ndarray:
    return response_mask.sum(dim=-1).detach().cpu().double().numpy()


def _column_estimator(name: str, doc: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """A verl-signature estimator for the column estimator ``name``: :func:`advantage_per_row`
    broadcast over the response tokens."""

    def estimator(
        token_level_rewards: torch.Tensor,
        response_mask: torch.Tensor,
        index: np.ndarray,
        epsilon: float = 1e-6,
        config: Any = None,
        non_tensor_batch: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        per_row = advantage_per_row(
            name, index, non_tensor_batch, config=config, epsilon=epsilon, response_lengths=_row_lengths(response_mask)
        )
        return _broadcast(per_row, response_mask)

    estimator.__name__ = estimator.__qualname__ = f"compute_{name}_advantage"
    estimator.__doc__ = doc
    return estimator


def compute_progpo_shaped_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    config: Any = None,
    base: str = "grpo",
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO (ProGPO's population-std convention) on the summed token rewards, for rewards that are
    already progress-conditioned (an all-failed group scored by coverage rate, see
    :func:`trainers.integrations.trl.progress_conditioned_values`). It reads no ProGPO column:
    the reward function does the conditioning. ``base``: another registered base's episode term
    in GRPO's place.
    """
    cfg = _progpo_config(config, base, epsilon)
    scores = token_level_rewards.sum(dim=-1).detach().cpu().double().numpy()
    return _broadcast(episode_advantages(scores, np.asarray(index), estimator=base, eps=cfg.eps), response_mask)


#: verl name -> its column estimator, built once (verl's registry compares the function objects)
_BUILT: dict[str, Callable[..., tuple[torch.Tensor, torch.Tensor]]] = {}


def _column_doc(name: str) -> str:
    """The docstring of the column estimator ``name``, from its registration."""
    estimator = package_names()[name]
    base = estimator.removeprefix("progpo-")
    spec = registered_estimator(base)
    what = (
        f"ProGPO({base}): all-failed groups get ProGPO's progress term, the others {base} ({spec.help})"
        if estimator != base
        else f"{base}: {spec.help}"
    )
    rows = (
        "one row per *step* (verl-agent's layout: each step's response is a row)"
        if spec.needs_states
        else "rows of one ``traj_uid`` (verl-agent's one row per step) count once"
    )
    columns = ", ".join(f"``{c}``" for c in required_columns(name))
    return (
        f"{what}, with verl's estimator signature: ``(advantages, returns)``, both ``(bs, L)``.\n\n"
        f"    Reads the ``non_tensor_batch`` columns {columns} per row; ``index`` is the group; {rows}. "
        f"The advantage is :func:`advantage_per_row` broadcast over the response tokens; the base's options "
        f"come from verl's ``algorithm`` config as ``{base}_<option>``. Without the columns it raises "
        f":class:`MissingColumnsError`, never GRPO instead.\n"
    )


def estimators() -> dict[str, Callable[..., tuple[torch.Tensor, torch.Tensor]]]:
    """verl's estimator name -> function (what :func:`register` puts into verl's registry): a
    column estimator for every name of :func:`package_names` (a plug-in's included), and
    ``progpo_shaped_grpo``."""
    out: dict[str, Callable[..., tuple[torch.Tensor, torch.Tensor]]] = {}
    for name, estimator in package_names().items():
        if name not in _BUILT:
            _BUILT[name] = _column_estimator(name, _column_doc(name))
        out[name] = _BUILT[name]
    out["progpo_shaped_grpo"] = compute_progpo_shaped_grpo_advantage
    return out


def __getattr__(name: str) -> Any:
    """``ESTIMATORS``, ``ESTIMATOR_NAMES``, ``REQUIRED_COLUMNS``, ``COLUMN_ESTIMATORS`` and each
    column estimator's ``compute_<name>_advantage``: the registry now (an estimator a plug-in
    registered later is in the next read)."""
    if name == "ESTIMATORS":
        return estimators()
    if name == "ESTIMATOR_NAMES":
        return tuple(estimators())
    if name == "REQUIRED_COLUMNS":
        return {n: required_columns(n) for n in package_names()}
    if name == "COLUMN_ESTIMATORS":
        return tuple(package_names())
    verl_name = name.removeprefix("compute_").removesuffix("_advantage")
    if name == f"compute_{verl_name}_advantage" and verl_name in package_names():
        return estimators()[verl_name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register() -> None:
    """Register the estimators of :func:`estimators` with verl's ``register_adv_est`` (idempotent).

    The ``verl.plugins`` entry point (:mod:`trainers.integrations.verl_plugin`) calls this in every
    process that imports verl; a manual call only reaches the process it runs in.
    """
    from verl.trainer.ppo import core_algos  # verl's own venv

    for name, fn in estimators().items():
        if core_algos.ADV_ESTIMATOR_REGISTRY.get(name) is not fn:
            core_algos.register_adv_est(name)(fn)


# the column estimators by name too (served by __getattr__), for `from ... import *` and the docs
__all__ += [f"compute_{name}_advantage" for name in package_names()]
