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

from typing import Any, Callable, Mapping

import numpy as np
import torch

from trainers.advantages import AdvantageConfig, episode_advantages, factorize, step_advantages
from wrappers.errors import UserError
from wrappers.signals import TAU_P, TAU_R

__all__ = [
    "COLUMN_ESTIMATORS",
    "ESTIMATORS",
    "ESTIMATOR_NAMES",
    "advantage_per_row",
    "compute_hgpo_advantage",
    "compute_planpo_advantage",
    "compute_progpo_gigpo_advantage",
    "compute_progpo_grpo_advantage",
    "compute_progpo_hgpo_advantage",
    "compute_progpo_planpo_advantage",
    "compute_progpo_shaped_grpo_advantage",
    "MissingColumnsError",
    "REQUIRED_COLUMNS",
    "register",
    "require_columns",
]

ESTIMATOR_NAMES = ("progpo_grpo", "progpo_gigpo", "progpo_shaped_grpo", "planpo", "progpo_planpo", "hgpo",
                   "progpo_hgpo")


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


def _progpo_config(config: Any, estimator: str, epsilon: float) -> AdvantageConfig:
    """``AdvantageConfig`` from verl's ``algorithm`` config (keys of the module docstring)."""
    return AdvantageConfig(
        estimator=estimator,
        lam=float(_cfg_get(config, "progpo_lam", 1.0)),
        tau_r=float(_cfg_get(config, "progpo_tau_r", TAU_R)),
        tau_p=float(_cfg_get(config, "progpo_tau_p", TAU_P)),
        omega=float(_cfg_get(config, "gigpo_omega", _cfg_get(config, "step_advantage_w", 1.0))),
        gamma=float(_cfg_get(config, "gigpo_gamma", 0.95)),
        eps=float(epsilon),
        success_threshold=float(_cfg_get(config, "planpo_success_threshold", 1.0)),
        planpo_alpha=float(_cfg_get(config, "planpo_alpha", 0.1)),
        hgpo_depth=int(_cfg_get(config, "hgpo_depth", 2)),
        hgpo_alpha=float(_cfg_get(config, "hgpo_alpha", 1.0)),
        hgpo_fusion=str(_cfg_get(config, "hgpo_fusion", "power")),  # type: ignore[arg-type]
        potential_credit=bool(_cfg_get(config, "hgpo_potential_credit", False)),
    )


#: the columns each estimator reads from ``non_tensor_batch`` (one value per row)
REQUIRED_COLUMNS = {
    "progpo_grpo": ("progpo_outcome", "progpo_coverage_rate"),
    "progpo_gigpo": ("traj_uid", "anchor_obs", "progpo_outcome", "progpo_first_visit", "progpo_step"),
    "planpo": ("progpo_outcome", "progpo_turns"),
    "progpo_planpo": ("progpo_outcome", "progpo_turns", "progpo_coverage_rate"),
    "hgpo": ("traj_uid", "anchor_obs", "progpo_outcome", "progpo_step"),
    "progpo_hgpo": ("traj_uid", "anchor_obs", "progpo_outcome", "progpo_first_visit", "progpo_step"),
}
_HOW_TO_PROVIDE = (
    "verl 0.9: `pip install progpo[verl]` (its verl.plugins entry point forwards the columns) and return them per "
    "response from the agent loop's extra_fields or the reward function's reward_extra_info; verl-agent: build the "
    "envs with trainers.integrations.verl_agent.make_envs. For rewards that are already progress-conditioned use "
    "algorithm.adv_estimator=progpo_shaped_grpo"
)


class MissingColumnsError(UserError, ValueError):
    """A ``progpo_*`` estimator was called without the per-row columns it needs (never GRPO instead)."""


def require_columns(name: str, non_tensor_batch: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``non_tensor_batch`` when it holds every column of :data:`REQUIRED_COLUMNS` ``[name]``; else one clear error."""
    have = set(non_tensor_batch or ())
    missing = [c for c in REQUIRED_COLUMNS[name] if c not in have]
    if missing:
        raise MissingColumnsError(f"{name}: non_tensor_batch lacks {', '.join(missing)}"
                                  f"{' (no non_tensor_batch was passed)' if non_tensor_batch is None else ''}; "
                                  f"{_HOW_TO_PROVIDE}")
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
    turns = _per_trajectory(ntb["progpo_turns"], traj, n_traj) if cfg.base == "planpo" else None
    adv = episode_advantages(_per_trajectory(ntb["progpo_outcome"], traj, n_traj),
                             factorize(list(_per_trajectory(index, traj, n_traj, object))), cover,
                             estimator=cfg.estimator, lam=cfg.lam, tau_r=cfg.tau_r, tau_p=cfg.tau_p, eps=cfg.eps,
                             turns=turns, success_threshold=cfg.success_threshold)
    return adv[traj]


def _step_rows(index: np.ndarray, ntb: Mapping[str, Any], cfg: AdvantageConfig,
               response_lengths: np.ndarray | None) -> np.ndarray:
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


def _planpo_rows(index: np.ndarray, ntb: Mapping[str, Any], cfg: AdvantageConfig,
                 response_lengths: np.ndarray | None) -> np.ndarray:
    """PlanPO: the trajectory term from the columns; on step rows, plus ``planpo_alpha`` times the
    turn term over the rows' response lengths."""
    adv = _episode_rows(index, ntb, cfg)
    if "traj_uid" not in ntb or "progpo_step" not in ntb or response_lengths is None or not cfg.planpo_alpha:
        return adv
    from trainers.advantages import planpo_turn_advantages

    step_traj, n_traj = _trajectories(len(index), ntb)
    groups = factorize(list(_per_trajectory(index, step_traj, n_traj, object)))
    turn = planpo_turn_advantages(_per_trajectory(ntb["progpo_outcome"], step_traj, n_traj), groups, step_traj,
                                  np.asarray(ntb["progpo_step"], dtype=np.int64), response_lengths,
                                  success_threshold=cfg.success_threshold, eps=cfg.eps)
    return adv + cfg.planpo_alpha * turn


#: verl's name -> this package's estimator
_PACKAGE_NAMES = {"progpo_grpo": "progpo-grpo", "progpo_gigpo": "progpo-gigpo", "planpo": "planpo",
                  "progpo_planpo": "progpo-planpo", "hgpo": "hgpo", "progpo_hgpo": "progpo-hgpo"}


def advantage_per_row(name: str, index: np.ndarray, non_tensor_batch: Mapping[str, Any] | None, *,
                      config: Any = None, epsilon: float = 1e-6,
                      response_lengths: np.ndarray | None = None) -> np.ndarray:
    """The advantage of each row under the column estimator ``name`` (a key of
    :data:`REQUIRED_COLUMNS`): what the verl estimators broadcast over the response tokens and
    what verl-agent's ``compute_advantage`` branch calls. ``response_lengths``: each row's
    response token count (PlanPO's turn term on step rows). Without the columns it raises
    :class:`MissingColumnsError`.

    >>> advantage_per_row("planpo", np.array(["a", "a"]), {"progpo_outcome": np.ones(2),
    ...                   "progpo_turns": np.array([2, 4])}).round(4).tolist()
    [1.0, -1.0]
    """
    ntb = require_columns(name, non_tensor_batch)
    cfg = _progpo_config(config, _PACKAGE_NAMES[name], epsilon)
    if cfg.base == "planpo":
        return _planpo_rows(np.asarray(index), ntb, cfg, response_lengths)
    if cfg.base in ("gigpo", "hgpo"):
        return _step_rows(np.asarray(index), ntb, cfg, response_lengths)
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
        per_row = advantage_per_row(name, index, non_tensor_batch, config=config, epsilon=epsilon,
                                    response_lengths=_row_lengths(response_mask))
        return _broadcast(per_row, response_mask)

    estimator.__name__ = estimator.__qualname__ = f"compute_{name}_advantage"
    estimator.__doc__ = doc
    return estimator


compute_progpo_grpo_advantage = _column_estimator("progpo_grpo", """ProGPO(GRPO) with verl's estimator signature:
    ``(advantages, returns)``, both ``(bs, L)``.

    Per row: outcome ``R`` = ``non_tensor_batch["progpo_outcome"]`` (the env's outcome, not a
    penalised score), coverage ``P`` = ``non_tensor_batch["progpo_coverage_rate"]``, group =
    ``index``. Rows of one ``traj_uid`` (verl-agent's one row per step) are one trajectory and
    count once. The advantage is :func:`trainers.advantages.episode_advantages` broadcast over
    the response tokens. Without the columns it raises :class:`MissingColumnsError`.

    >>> rew = torch.zeros(4, 3); mask = torch.ones(4, 3)
    >>> adv, _ = compute_progpo_grpo_advantage(rew, mask, np.array(["a", "a", "b", "b"]),
    ...     non_tensor_batch={"progpo_outcome": np.zeros(4), "progpo_coverage_rate": np.array([.1, .3, .2, .2])})
    >>> adv[:, 0].round(decimals=4).tolist()
    [-1.0, 1.0, 0.0, 0.0]
    """)

compute_progpo_gigpo_advantage = _column_estimator("progpo_gigpo", """ProGPO(GiGPO): one row per *step*
    (verl-agent's layout: each step's response is a row).

    Needs ``non_tensor_batch`` columns per row: ``traj_uid`` (trajectory), ``anchor_obs`` (the
    state o_t the step was taken from), ``progpo_first_visit`` (bool), ``progpo_step`` (t), and
    ``progpo_outcome`` (the trajectory's outcome, on every row of it). ``index`` is the group
    (verl-agent's ``uid``). Returns :func:`trainers.advantages.step_advantages` ``.steps``
    broadcast over the tokens. Without the columns it raises :class:`MissingColumnsError`.
    """)

compute_planpo_advantage = _column_estimator("planpo", """PlanPO: in groups with a success, shorter
    successes rank higher (``progpo_outcome``, ``progpo_turns`` per row; rows of one ``traj_uid``
    count once). On step rows (``traj_uid``, ``progpo_step``) ``planpo_alpha`` times the turn term
    over the rows' response lengths is added. Without the columns: :class:`MissingColumnsError`.
    """)

compute_progpo_planpo_advantage = _column_estimator("progpo_planpo", """ProGPO(PlanPO): all-failed groups
    get ProGPO's progress term (``progpo_coverage_rate``), the others PlanPO (:func:`compute_planpo_advantage`).
    """)

compute_hgpo_advantage = _column_estimator("hgpo", """HGPO over one row per step: GRPO's episode term
    plus ``gigpo_omega`` times the history-depth term (``traj_uid``, ``anchor_obs``,
    ``progpo_step``, ``progpo_outcome``); ``hgpo_depth``, ``hgpo_alpha``, ``hgpo_fusion``,
    ``hgpo_potential_credit`` from the config.
    """)

compute_progpo_hgpo_advantage = _column_estimator("progpo_hgpo", """ProGPO(HGPO): HGPO, with ProGPO's
    progress term and first-visit step returns in all-failed groups (adds ``progpo_first_visit``).
    """)


def compute_progpo_shaped_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO (ProGPO's population-std convention) on the summed token rewards, for rewards that are
    already progress-conditioned (an all-failed group scored by coverage rate, see
    :func:`trainers.integrations.trl.progress_conditioned_values`). It reads no ProGPO column:
    the reward function does the conditioning.
    """
    cfg = _progpo_config(config, "grpo", epsilon)
    scores = token_level_rewards.sum(dim=-1).detach().cpu().double().numpy()
    return _broadcast(episode_advantages(scores, np.asarray(index), estimator="grpo", eps=cfg.eps), response_mask)


#: verl's estimator name -> function (what :func:`register` puts into verl's registry)
ESTIMATORS = {"progpo_grpo": compute_progpo_grpo_advantage, "progpo_gigpo": compute_progpo_gigpo_advantage,
              "progpo_shaped_grpo": compute_progpo_shaped_grpo_advantage, "planpo": compute_planpo_advantage,
              "progpo_planpo": compute_progpo_planpo_advantage, "hgpo": compute_hgpo_advantage,
              "progpo_hgpo": compute_progpo_hgpo_advantage}
#: the estimators that read ProGPO's columns from ``non_tensor_batch``
COLUMN_ESTIMATORS = tuple(REQUIRED_COLUMNS)


def register() -> None:
    """Register the estimators of :data:`ESTIMATORS` with verl's ``register_adv_est`` (idempotent).

    The ``verl.plugins`` entry point (:mod:`trainers.integrations.verl_plugin`) calls this in every
    process that imports verl; a manual call only reaches the process it runs in.
    """
    from verl.trainer.ppo import core_algos

    for name, fn in ESTIMATORS.items():
        if core_algos.ADV_ESTIMATOR_REGISTRY.get(name) is not fn:
            core_algos.register_adv_est(name)(fn)
