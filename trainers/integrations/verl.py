"""ProGPO in verl / verl-agent: advantage estimators for ``register_adv_est`` and an env manager.

Extra ``[verl]``. verl is imported only by :func:`register` / :func:`patch_compute_advantage`;
the estimators and the env manager need torch and numpy alone.

**Checked against.** ``verl==0.9.1``'s ``verl.trainer.ppo.core_algos`` (``register_adv_est``,
``get_adv_estimator_fn``) imported for real in a separate venv (verl pins ``transformers<5.11``,
older than this package's; ``pip install --no-deps verl==0.9.1 tensordict pyvers omegaconf
hydra-core codetiming`` is enough to import ``core_algos``). verl-agent's
``EnvironmentManagerBase`` is *not* a PyPI package: :class:`ProGPOEnvironmentManager` follows its
``reset`` / ``step`` shapes read from its source (``agent_system/environments/base.py``).

How coverage reaches the estimator. verl's ``compute_advantage`` calls a registered estimator with
``token_level_rewards``, ``response_mask``, ``index`` (``non_tensor_batch["uid"]``) and ``config``
only (verl 0.9.1 passes ``non_tensor_batch`` to GDPO alone). Two routes:

1. ``non_tensor_batch`` columns (exact, recommended): the rollout stores, per response,
   ``"progpo_outcome"`` (the env's outcome -- not verl-agent's penalised score),
   ``"progpo_coverage_rate"``, and for GiGPO ``"anchor_obs"`` (our canonical observation, which
   :class:`ProGPOEnvironmentManager` puts in ``anchor``), ``"traj_uid"`` and
   ``"progpo_first_visit"``. :func:`patch_compute_advantage` (a 10-line wrapper of
   ``verl.trainer.ppo.ray_trainer.compute_advantage``) forwards ``non_tensor_batch`` to our two
   estimators, as verl does for GDPO. verl-agent already patches ``compute_advantage`` for GiGPO
   the same way (``anchor_obs`` / ``traj_uid`` columns).
2. Reward shaping, no patch: score responses with the progress-conditioned value of
   :func:`trainers.integrations.trl.progress_conditioned_values` (outcome, or coverage rate in
   an all-failed group) and use verl's own ``grpo``. That is ProGPO(GRPO) up to verl's std
   convention (``torch.std``: unbiased, eps 1e-6 outside the std) -- see the TRL adapter.

Minimal use (verl's ``main_ppo`` entry, before the trainer starts)::

    from trainers.integrations import verl as progpo_verl
    progpo_verl.register()                 # ADV_ESTIMATOR_REGISTRY["progpo_grpo"], ["progpo_gigpo"]
    progpo_verl.patch_compute_advantage()  # forwards non_tensor_batch to them
    # config: algorithm.adv_estimator=progpo_grpo   (or progpo_gigpo)

Without the columns (``non_tensor_batch`` absent) the estimators fall back to route 2's reading:
the summed token rewards are the scores and the result is GRPO on them with ProGPO's std
convention.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch

from trainers.advantages import AdvantageConfig, factorize, step_advantages

__all__ = [
    "ESTIMATOR_NAMES",
    "ProGPOEnvironmentManager",
    "compute_progpo_gigpo_advantage",
    "compute_progpo_grpo_advantage",
    "patch_compute_advantage",
    "register",
]

ESTIMATOR_NAMES = ("progpo_grpo", "progpo_gigpo")


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
    """``AdvantageConfig`` from verl's ``algorithm`` config (keys ``progpo_lam``, ``progpo_tau_r``,
    ``progpo_tau_p``, ``gigpo_omega`` / ``step_advantage_w``, ``gamma``)."""
    return AdvantageConfig(
        estimator=estimator,
        lam=float(_cfg_get(config, "progpo_lam", 1.0)),
        tau_r=float(_cfg_get(config, "progpo_tau_r", 1e-3)),
        tau_p=float(_cfg_get(config, "progpo_tau_p", 1e-4)),
        omega=float(_cfg_get(config, "gigpo_omega", _cfg_get(config, "step_advantage_w", 1.0))),
        gamma=float(_cfg_get(config, "gigpo_gamma", 0.95)),
        eps=float(epsilon),
    )


def _column(batch: Mapping[str, Any] | None, key: str) -> np.ndarray | None:
    if batch is None or key not in batch:
        return None
    return np.asarray(batch[key])


def _broadcast(per_response: np.ndarray, response_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    adv = torch.as_tensor(per_response, dtype=torch.float32, device=response_mask.device).unsqueeze(-1) * response_mask
    return adv, adv


def compute_progpo_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    config: Any = None,
    non_tensor_batch: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ProGPO(GRPO) with verl's estimator signature: ``(advantages, returns)``, both ``(bs, L)``.

    Per response ``i``: outcome ``R_i`` = ``non_tensor_batch["progpo_outcome"]`` (else the summed
    token rewards), coverage ``P_i`` = ``non_tensor_batch["progpo_coverage_rate"]``, group =
    ``index[i]``. The advantage is :func:`trainers.advantages.episode_advantages` broadcast over
    the response tokens.

    >>> rew = torch.zeros(4, 3); mask = torch.ones(4, 3)
    >>> adv, _ = compute_progpo_grpo_advantage(rew, mask, np.array(["a", "a", "b", "b"]),
    ...     non_tensor_batch={"progpo_outcome": np.zeros(4), "progpo_coverage_rate": np.array([.1, .3, .2, .2])})
    >>> adv[:, 0].round(decimals=4).tolist()
    [-1.0, 1.0, 0.0, 0.0]
    """
    from trainers.advantages import episode_advantages

    cfg = _progpo_config(config, "progpo-grpo", epsilon)
    scores = token_level_rewards.sum(dim=-1).detach().cpu().double().numpy()
    outcome = _column(non_tensor_batch, "progpo_outcome")
    coverage = _column(non_tensor_batch, "progpo_coverage_rate")
    r = scores if outcome is None else outcome.astype(np.float64)
    if coverage is None:  # route 2: scores are already progress-conditioned; plain GRPO on them
        adv = episode_advantages(r, np.asarray(index), estimator="grpo", eps=cfg.eps)
    else:
        adv = episode_advantages(r, np.asarray(index), coverage.astype(np.float64), estimator="progpo-grpo",
                                 lam=cfg.lam, tau_r=cfg.tau_r, tau_p=cfg.tau_p, eps=cfg.eps)
    return _broadcast(adv, response_mask)


def compute_progpo_gigpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    config: Any = None,
    non_tensor_batch: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ProGPO(GiGPO): one row per *step* (verl-agent's layout: each step's response is a row).

    Needs ``non_tensor_batch`` columns per row: ``traj_uid`` (trajectory), ``anchor_obs`` (the
    canonical observation o_t), ``progpo_first_visit`` (bool), ``progpo_step`` (t), and
    ``progpo_outcome`` (the trajectory's outcome, on every row of it; else the summed token
    rewards of its rows). ``index`` is the group (verl-agent's ``uid``). Returns
    :func:`trainers.advantages.step_advantages` ``.steps`` broadcast over the tokens.
    """
    if non_tensor_batch is None:
        raise ValueError("progpo_gigpo needs non_tensor_batch (traj_uid, anchor_obs, progpo_first_visit, progpo_step): "
                         "call trainers.integrations.verl.patch_compute_advantage()")
    cfg = _progpo_config(config, "progpo-gigpo", epsilon)
    idx = np.asarray(index)
    traj_keys = list(np.asarray(non_tensor_batch["traj_uid"]))
    step_traj = factorize(traj_keys)
    n_traj = int(step_traj.max()) + 1 if step_traj.size else 0
    scores = token_level_rewards.sum(dim=-1).detach().cpu().double().numpy()
    outcome_rows = _column(non_tensor_batch, "progpo_outcome")
    if outcome_rows is None:
        outcome_rows = np.zeros(n_traj)
        np.add.at(outcome_rows, step_traj, scores)
        outcome_rows = outcome_rows[step_traj]
    outcomes = np.zeros(n_traj)
    outcomes[step_traj] = outcome_rows.astype(np.float64)
    traj_group = np.empty(n_traj, dtype=object)
    traj_group[step_traj] = idx
    out = step_advantages(
        outcomes,
        factorize(list(traj_group)),
        step_traj,
        np.asarray(non_tensor_batch["progpo_step"], dtype=np.int64),
        state_ids=factorize([str(a) for a in np.asarray(non_tensor_batch["anchor_obs"])]),
        first_visit=np.asarray(non_tensor_batch["progpo_first_visit"], dtype=bool),
        config=cfg,
    )
    return _broadcast(out.steps, response_mask)


def register() -> None:
    """Register ``progpo_grpo`` and ``progpo_gigpo`` with verl's ``register_adv_est`` (idempotent)."""
    from verl.trainer.ppo import core_algos

    for name, fn in zip(ESTIMATOR_NAMES, (compute_progpo_grpo_advantage, compute_progpo_gigpo_advantage)):
        if core_algos.ADV_ESTIMATOR_REGISTRY.get(name) is not fn:
            core_algos.register_adv_est(name)(fn)


def patch_compute_advantage() -> None:
    """Make verl's ``compute_advantage`` pass ``non_tensor_batch`` to the ProGPO estimators.

    Equivalent source patch in ``verl/trainer/ppo/ray_trainer.py`` (``compute_advantage``)::

        -        if adv_estimator in (AdvantageEstimator.GDPO, "gdpo"):
        +        if adv_estimator in (AdvantageEstimator.GDPO, "gdpo", "progpo_grpo", "progpo_gigpo"):
                     adv_kwargs["non_tensor_batch"] = data.non_tensor_batch
    """
    from verl.trainer.ppo import core_algos, ray_trainer

    if getattr(ray_trainer.compute_advantage, "_progpo", False):
        return
    original = ray_trainer.compute_advantage

    def compute_advantage(data: Any, adv_estimator: Any, *args: Any, **kwargs: Any) -> Any:
        name = getattr(adv_estimator, "value", adv_estimator)
        if name not in ESTIMATOR_NAMES:
            return original(data, adv_estimator, *args, **kwargs)
        if "response_mask" not in data.batch.keys():
            data.batch["response_mask"] = ray_trainer.compute_response_mask(data)
        fn = core_algos.get_adv_estimator_fn(name)
        adv, ret = fn(token_level_rewards=data.batch["token_level_rewards"], response_mask=data.batch["response_mask"],
                      index=data.non_tensor_batch["uid"], config=kwargs.get("config"),
                      non_tensor_batch=data.non_tensor_batch)
        data.batch["advantages"], data.batch["returns"] = adv, ret
        return data

    compute_advantage._progpo = True  # type: ignore[attr-defined]
    ray_trainer.compute_advantage = compute_advantage


class ProGPOEnvironmentManager:
    """verl-agent ``EnvironmentManagerBase``-shaped manager over a :class:`wrappers.GroupVectorEnv`.

    ``envs`` must yield ``info["canonical_obs"]`` / ``coverage_rate`` (the trainer's env
    factories do: ``GroupVectorEnv(trainers.envs.make_env_fn("alfworld", "train", 50), B, G)``).
    ``projection_f(text_actions) -> (actions, valids)`` maps model answers to commands (default:
    :func:`agents.parsing.parse_action`, invalid answers sent as their fallback text).

    - ``reset(kwargs=None) -> ({'text', 'image', 'anchor'}, infos)``: ``anchor`` is the canonical
      observation of each env (GiGPO's step groups), ``infos`` a list of per-env dicts.
    - ``step(text_actions) -> (obs, rewards, dones, infos)``: ``rewards`` the env rewards,
      ``dones`` True from the step an episode ends (the env then waits until its group finishes),
      each info with ``is_action_valid`` and ``won``; on the step a group finishes,
      ``group_all_failed`` / ``group_outcomes`` (from ``GroupVectorEnv``).

    >>> from wrappers import GroupVectorEnv, CanonicalizeObservation, FirstVisitCoverage
    >>> from wrappers.toy_envs import TextRoomsEnv
    >>> envs = GroupVectorEnv(lambda: FirstVisitCoverage(CanonicalizeObservation(TextRoomsEnv())), 1, 2, seed=0)
    >>> mgr = ProGPOEnvironmentManager(envs)
    >>> obs, infos = mgr.reset()
    >>> obs["anchor"][0] == obs["anchor"][1] and obs["image"] is None
    True
    """

    def __init__(self, envs: Any, projection_f: Any = None, config: Any = None) -> None:
        self.envs = envs
        self.projection_f = projection_f or _default_projection
        self.config = config
        self._done = np.zeros(envs.num_envs, dtype=bool)

    @staticmethod
    def _split(infos: Mapping[str, Any], n: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{} for _ in range(n)]
        for key, val in infos.items():
            if key.startswith("_"):
                continue
            mask = infos.get("_" + key)
            nested = ProGPOEnvironmentManager._split(val, n) if isinstance(val, Mapping) else None
            for i in range(n):
                if mask is None or bool(mask[i]):
                    out[i][key] = nested[i] if nested is not None else val[i]
        return out

    def reset(self, kwargs: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        obs, infos = self.envs.reset(**(dict(kwargs) if kwargs else {}))
        self._done[:] = False
        per = self._split(infos, self.envs.num_envs)
        return {"text": list(obs), "image": None, "anchor": [i.get("canonical_obs") for i in per]}, per

    def step(self, text_actions: Sequence[str]) -> tuple[dict[str, Any], np.ndarray, np.ndarray, list[dict[str, Any]]]:
        actions, valids = self.projection_f(list(text_actions))
        actions = [None if d else a for a, d in zip(actions, self._done)]
        obs, rewards, terminated, truncated, infos = self.envs.step(actions)
        n = self.envs.num_envs
        per = self._split(infos, n)
        finals = infos.get("final_info")
        text, anchor = list(obs), []
        for i in range(n):
            ended = bool(terminated[i] or truncated[i])
            if ended and finals is not None and infos.get("_final_info", np.ones(n, bool))[i]:
                step_info = dict(per[i]["final_info"])
                for key in ("group_id", "group_outcomes", "group_all_failed"):
                    if key in per[i]:
                        step_info[key] = per[i][key]
                per[i] = step_info
                text[i] = infos["final_obs"][i]
            per[i]["is_action_valid"] = np.asarray(bool(valids[i]) and not self._done[i])
            per[i].setdefault("won", False)
            anchor.append(per[i].get("canonical_obs"))
            self._done[i] = self._done[i] or ended
        return ({"text": text, "image": None, "anchor": anchor}, np.asarray(rewards, dtype=np.float32),
                self._done.copy(), per)

    def close(self) -> None:
        self.envs.close()


def _default_projection(text_actions: list[str]) -> tuple[list[str], list[bool]]:
    from agents.parsing import parse_action

    actions, valids = [], []
    for text in text_actions:
        parsed = parse_action(text, "think_action")
        actions.append(parsed.action if parsed.valid else (parsed.fallback or str(text)[-30:]))
        valids.append(bool(parsed.valid))
    return actions, valids
