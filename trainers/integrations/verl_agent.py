"""ProGPO inside verl-agent: env manager, collector hook, estimator branch and ``make_envs``.

verl-agent (github.com/langfengQ/verl-agent) is not on PyPI and vendors its own verl 0.3, which
has no estimator registry; this module fits ProGPO into its loop as it is. Put a verl-agent
checkout on ``PYTHONPATH`` next to this package and change one line of its
``verl/trainer/main_ppo.py`` (``TaskRunner.run``)::

    -        from agent_system.environments import make_envs
    +        from trainers.integrations.verl_agent import make_envs

then pick the env and the estimator in its Hydra config::

    env.env_name=progpo/alfworld            # or progpo/webshop
    algorithm.adv_estimator=progpo_gigpo    # or progpo_grpo, planpo, progpo_planpo, hgpo, progpo_hgpo;
                                            # gigpo / grpo / ... stay verl-agent's
    +env.progpo.anchor=raw                  # GiGPO's step groups: raw observation text (default) or canonical

:func:`make_envs` runs inside verl-agent's ``TaskRunner`` actor, before the trainer is built, so
what it installs reaches the process that collects rollouts and computes advantages:

1. :class:`ProGPOEnvironmentManager` for training and validation: verl-agent's
   ``EnvironmentManagerBase`` contract (``reset(kwargs)``, ``step(text_actions)``,
   ``build_text_obs``, ``success_evaluator``, ``close``) over a :class:`wrappers.GroupVectorEnv`
   of ``data.train_batch_size`` groups x ``env.rollout.n`` members that holds finished groups
   (``autoreset=False``). ``obs["text"]`` is the whole user turn (task, history of
   ``env.history_length`` steps, current observation, admissible actions, the
   ``<think>``/``<action>`` format instruction; this package's prompt templates).
2. ``ProGPOTrajectoryCollector``, a subclass of verl-agent's ``TrajectoryCollector`` that
   adds, to every step row, ``progpo_outcome`` (the env's outcome, not verl-agent's penalised
   reward), ``progpo_first_visit``, ``progpo_coverage_rate``, ``progpo_turns`` and ``progpo_step``: they land in
   ``non_tensor_batch``. It replaces ``agent_system.multi_turn_rollout.TrajectoryCollector``, which
   ``main_ppo`` imports after ``make_envs``.
3. A branch in verl-agent's ``ray_trainer.compute_advantage`` for the names of
   :func:`progpo_estimators` (every column estimator of the registry: ``progpo_<base>`` for each
   base, and ``planpo``, ``hgpo`` and a plug-in's base that reads turns or states;
   :func:`compute_advantage_branch`); other estimators go to
   verl-agent's own code unchanged. ``RayPPOTrainer`` accepts those names (no critic).

A ``progpo_*`` estimator whose batch lacks the columns raises (never GRPO instead).
``python scripts/check_verl_agent.py PATH_TO_VERL_AGENT`` drives all of it through verl-agent's
own collector and checks the advantages against :func:`trainers.advantages.step_advantages`.
"""

# Over 500 lines: verl-agent's touch points (projection, env manager, collector hook, estimator branch,
# make_envs) in one module, so that one changed import line in verl-agent's main_ppo.py installs them all.
from __future__ import annotations

import sys
from collections import defaultdict
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from progpo_envs.guard import check_import_names
from trainers.advantages.registry import base_names, option_fields
from trainers.advantages.registry import estimator as registered_estimator
from trainers.envs import make_env_fn
from wrappers import GroupVectorEnv
from wrappers.signals import TAU_P, TAU_R

try:
    from agents.parsing import parse_action
    from agents.prompting import admissible_commands, build_messages, goal_text
finally:  # trainers itself does not check `agents` (the verl plugin loads beside any), its users do:
    check_import_names(("agents",))  # a shadowing `agents` package, named in one line

__all__ = [
    "ProGPOEnvironmentManager",
    "ProGPOTrajectoryCollector",
    "alfworld_projection",
    "compute_advantage_branch",
    "install",
    "make_envs",
    "make_manager",
    "progpo_estimators",
    "webshop_projection",
]

#: verl-agent's own estimators (its ``AdvantageEstimator`` values) whose trainer set-up, without a
#: critic, a column estimator borrows: the step-level one where it reads states, else the episode one
VERL_AGENT_SETUP = {"states": "gigpo", "episode": "grpo"}


def progpo_estimators() -> dict[str, str]:
    """verl name -> the verl-agent estimator whose trainer set-up it shares: every column estimator
    of the registry (a plug-in's included), read now."""
    # the verl integration's module loads torch, which verl-agent's trainer process has loaded already
    from trainers.integrations.verl import package_names

    return {
        name: VERL_AGENT_SETUP["states" if registered_estimator(estimator).needs_states else "episode"]
        for name, estimator in package_names().items()
    }


def __getattr__(name: str) -> Any:
    """``PROGPO_ESTIMATORS``: :func:`progpo_estimators`, read from the registry at each access."""
    if name == "PROGPO_ESTIMATORS":
        return progpo_estimators()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


ANCHORS = ("raw", "canonical")


def _project(actions: Sequence[str]) -> tuple[list[str], list[int]]:
    out, valids = [], []
    for text in actions:
        parsed = parse_action(str(text), "think_action")
        out.append(
            parsed.action if parsed.valid and parsed.action is not None else (parsed.fallback or str(text)[-30:])
        )
        valids.append(int(parsed.valid))
    return out, valids


def alfworld_projection(actions: list[str], action_pools: list[list[str]]) -> tuple[list[str], list[int]]:
    """verl-agent's ALFWorld projection signature: ``(actions, action_pools) -> (commands, valids)``.

    A valid answer holds ``<think>...</think><action>...</action>``; the command is the action's
    text (the env itself answers an inadmissible command with "Nothing happens."). An invalid
    answer is sent as its last 30 characters and counted invalid (verl-agent's penalty).

    >>> alfworld_projection(["<think>x</think><action>go to desk 1</action>", "hmm"], [[], []])
    (['go to desk 1', 'hmm'], [1, 0])
    """
    return _project(actions)


def webshop_projection(actions: list[str]) -> tuple[list[str], list[int]]:
    """verl-agent's WebShop projection signature: ``(actions) -> (commands, valids)``."""
    return _project(actions)


class ProGPOEnvironmentManager:
    """verl-agent environment manager over a :class:`wrappers.GroupVectorEnv` of this package's envs.

    Args:
        envs: ``GroupVectorEnv(..., autoreset=False)`` whose members are wrapped in
            :class:`wrappers.CanonicalizeObservation` + :class:`wrappers.FirstVisitCoverage`
            (:func:`make_manager` builds it). Member ``i`` is in group ``i // group_size``, the
            layout of verl-agent's ``uid`` (``env.rollout.n`` consecutive envs).
        projection_f: verl-agent's projection for the env: :func:`alfworld_projection`
            (``(actions, action_pools)``) or :func:`webshop_projection` (``(actions)``); verl-agent's
            own functions of those names work too.
        config: verl-agent's config (reads ``env.history_length``; may be ``None``).
        env_name: ``"alfworld"`` or ``"webshop"`` (prompt template and projection signature).
        anchor: ``"raw"`` (default: the observation text, as verl-agent's GiGPO groups steps) or
            ``"canonical"`` (``info["canonical_obs"]``, this package's state identity).

    ``reset`` / ``step`` return what ``TrajectoryCollector`` reads: ``{"text", "image", "anchor"}``,
    and for ``step`` rewards, dones (True from an env's last step on; its group is then held until
    the next ``reset``) and one info dict per env (the env's info, ``is_action_valid``, ``won``).
    :meth:`progpo_signals` gives, per env and collector step, the columns
    ``ProGPOTrajectoryCollector`` puts into the batch.

    >>> from wrappers import CanonicalizeObservation, FirstVisitCoverage, GroupVectorEnv
    >>> from progpo_envs.rooms import TextRoomsEnv
    >>> envs = GroupVectorEnv(lambda: FirstVisitCoverage(CanonicalizeObservation(TextRoomsEnv())), 1, 2, seed=0,
    ...                       autoreset=False)
    >>> mgr = ProGPOEnvironmentManager(envs, alfworld_projection, None)
    >>> obs, infos = mgr.reset(kwargs=None)
    >>> obs["anchor"][0] == obs["anchor"][1] and "<action>" in obs["text"][0] and obs["image"] is None
    True
    """

    def __init__(
        self,
        envs: Any,
        projection_f: Callable[..., tuple[list[str], list[int]]],
        config: Any,
        env_name: str = "alfworld",
        anchor: str = "raw",
    ) -> None:
        if anchor not in ANCHORS:
            raise ValueError(f"anchor must be one of {ANCHORS}, got {anchor!r}")
        if getattr(envs, "autoreset", False):
            raise ValueError(
                "envs must hold finished groups until reset (GroupVectorEnv(..., autoreset=False)): "
                "verl-agent plays one task per group and batch"
            )
        self.envs, self.projection_f, self.config = envs, projection_f, config
        self.env_name, self.anchor = env_name, anchor
        self.history_length = int(_get(config, "env.history_length", 2))
        n = envs.num_envs
        self._obs: list[str] = [""] * n
        self._infos: list[dict[str, Any]] = [{} for _ in range(n)]
        self._history: list[list[tuple[str, str]]] = [[] for _ in range(n)]
        self._done = np.zeros(n, dtype=bool)
        self._outcome = np.zeros(n)
        self._coverage_rate = np.zeros(n)
        self._signals: list[list[dict[str, Any]]] = [[] for _ in range(n)]

    # -- verl-agent's EnvironmentManagerBase contract ---------------------------------------------
    def reset(self, kwargs: Any = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Every group starts its next scheduled task (``kwargs``, verl-agent's per-sample
        ``env_kwargs``, is not used: the group's seed schedule picks the task)."""
        obs, infos = self.envs.reset()
        n = self.envs.num_envs
        per = _split_infos(infos, n)
        self._obs = [str(o) for o in obs]
        self._infos = per
        self._history = [[] for _ in range(n)]
        self._done[:] = False
        self._outcome[:] = 0.0
        self._coverage_rate[:] = 0.0
        self._signals = [[] for _ in range(n)]
        return self._observations(), [dict(i) for i in per]

    def step(self, text_actions: Sequence[str]) -> tuple[dict[str, Any], np.ndarray, np.ndarray, list[dict[str, Any]]]:
        n = self.envs.num_envs
        if len(text_actions) != n:
            raise ValueError(f"step: expected {n} text actions (one per env), got {len(text_actions)}")
        if self.env_name == "alfworld":
            actions, valids = self.projection_f(list(text_actions), [self.admissible(i) for i in range(n)])
        else:
            actions, valids = self.projection_f(list(text_actions))
        was_done = self._done.copy()
        obs, rewards, terminated, truncated, infos = self.envs.step([str(a) for a in actions])
        per = _split_infos(infos, n)
        out_infos: list[dict[str, Any]] = []
        for i in range(n):
            if was_done[i]:  # held: nothing happened (the collector masks this row out)
                self._signals[i].append({"progpo_step": -1, "progpo_first_visit": False})
                out_infos.append({**self._infos[i], "is_action_valid": np.asarray(False)})
                continue
            info = dict(per[i].get("final_info", per[i]))
            self._signals[i].append(
                {"progpo_step": len(self._history[i]), "progpo_first_visit": bool(info.get("first_visit", False))}
            )
            self._history[i].append((self._obs[i], str(actions[i])))
            self._obs[i] = str(per[i]["final_obs"]) if "final_obs" in per[i] else str(obs[i])
            self._coverage_rate[i] = float(info.get("coverage_rate", self._coverage_rate[i]))
            if terminated[i] or truncated[i]:
                self._done[i] = True
                self._outcome[i] = float(info["outcome"]) if "outcome" in info else float(rewards[i])
            info["won"] = bool(info.get("won", False))
            info["is_action_valid"] = np.asarray(bool(valids[i]))
            for key in ("group_outcomes", "group_all_failed", "group_id"):
                if key in per[i]:
                    info[key] = per[i][key]
            self._infos[i] = info
            out_infos.append(info)
        rewards = np.where(was_done, 0.0, np.asarray(rewards, dtype=np.float64)).astype(np.float32)
        return self._observations(), rewards, self._done.copy(), out_infos

    def build_text_obs(self, indices: Sequence[int] | None = None) -> list[str]:
        """The whole user turn of each env: this package's prompt template (system line, task,
        last ``env.history_length`` steps, observation, admissible actions, answer format)."""
        out = []
        for i in range(self.envs.num_envs) if indices is None else indices:
            info = self._infos[i]
            messages = build_messages(
                self.env_name,
                goal=goal_text(info.get("goal", "")),
                observation=self._obs[i],
                admissible=self.admissible(i),
                history=self._history[i],
                step=len(self._history[i]),
                k=self.history_length,
                fmt="think_action",
            )
            out.append("\n\n".join(m["content"] for m in messages))
        return out

    def success_evaluator(self, *args: Any, **kwargs: Any) -> dict[str, np.ndarray]:
        """``{"success_rate": won of each env's last active step, "<task_type>_success_rate": ...}``
        from the collector's ``total_infos`` / ``total_batch_list`` (verl-agent's contract)."""
        total_infos, total_batch_list = kwargs["total_infos"], kwargs["total_batch_list"]
        success: dict[str, list[float]] = defaultdict(list)
        for b in range(len(total_batch_list)):
            self._process_batch(b, total_batch_list, total_infos, success)
        return {key: np.array(value) for key, value in success.items()}

    def _process_batch(
        self, batch_idx: int, total_batch_list: list, total_infos: list, success: dict[str, list[float]]
    ) -> None:
        for i in reversed(range(len(total_batch_list[batch_idx]))):
            if total_batch_list[batch_idx][i]["active_masks"]:
                info = total_infos[batch_idx][i]
                won = float(bool(info.get("won", False)))
                success["success_rate"].append(won)
                if info.get("task_type"):
                    success[f"{info['task_type']}_success_rate"].append(won)
                return

    def save_image(self, image: Any, step: int) -> None:
        raise NotImplementedError(f"{self.env_name} observations are text: there is no image to save")

    def close(self) -> None:
        self.envs.close()

    # -- ProGPO's side --------------------------------------------------------------------------
    def admissible(self, i: int) -> list[str]:
        """Env ``i``'s admissible commands now."""
        return admissible_commands(self._infos[i])

    def progpo_signals(self) -> list[list[dict[str, Any]]]:
        """Per env, one dict per ``step`` call since ``reset``: ``progpo_step`` (t; -1 once
        finished), ``progpo_first_visit``, and the episode's ``progpo_outcome`` /
        ``progpo_coverage_rate`` / ``progpo_turns`` (its number of turns, PlanPO's T; an episode cut
        short by the collector: outcome 0, coverage and turns so far)."""
        return [
            [
                {
                    **row,
                    "progpo_outcome": float(self._outcome[i]),
                    "progpo_coverage_rate": float(self._coverage_rate[i]),
                    "progpo_turns": len(self._history[i]),
                }
                for row in rows
            ]
            for i, rows in enumerate(self._signals)
        ]

    def _observations(self) -> dict[str, Any]:
        if self.anchor == "raw":
            anchors = list(self._obs)
        else:
            anchors = [str(info.get("canonical_obs", obs)) for info, obs in zip(self._infos, self._obs)]
        return {"text": self.build_text_obs(), "image": None, "anchor": anchors}


def _get(config: Any, dotted: str, default: Any) -> Any:
    node = config
    for part in dotted.split("."):
        if node is None:
            return default
        node = node.get(part, None) if isinstance(node, Mapping) or hasattr(node, "get") else getattr(node, part, None)
    return default if node is None else node


def _split_infos(infos: Mapping[str, Any], n: int) -> list[dict[str, Any]]:
    """Gymnasium's dict-of-arrays (with ``_key`` masks) -> one dict per env."""
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, val in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get("_" + key)
        nested = _split_infos(val, n) if isinstance(val, Mapping) else None
        for i in range(n):
            if mask is None or bool(mask[i]):
                out[i][key] = nested[i] if nested is not None else val[i]
    return out


def make_manager(
    env_name: str,
    num_groups: int,
    group_size: int,
    *,
    split: str,
    max_steps: int,
    seed: int,
    config: Any = None,
    anchor: str = "raw",
    state_key: str = "canonical",
    backend: str = "async",
) -> ProGPOEnvironmentManager:
    """A :class:`ProGPOEnvironmentManager` over ``num_groups`` x ``group_size`` envs of ``env_name``."""
    if env_name not in ("alfworld", "webshop"):
        raise ValueError(f"env_name must be 'alfworld' or 'webshop', got {env_name!r}")
    envs = GroupVectorEnv(
        make_env_fn(env_name, split, max_steps, state_key),
        num_groups,
        group_size,
        backend=backend,
        seed=seed,
        autoreset=False,
    )
    projection = alfworld_projection if env_name == "alfworld" else webshop_projection
    return ProGPOEnvironmentManager(envs, projection, config, env_name=env_name, anchor=anchor)


_SPLITS = {"alfworld": ("train", "valid"), "webshop": ("train", "test")}


def make_envs(config: Any) -> tuple[ProGPOEnvironmentManager, ProGPOEnvironmentManager]:
    """verl-agent's ``make_envs(config) -> (envs, val_envs)`` for ``env.env_name`` ``progpo/alfworld``
    or ``progpo/webshop``, then :func:`install` (collector hook, estimator branch) in this process.

    Reads ``data.train_batch_size`` / ``data.val_batch_size`` (groups), ``env.rollout.n`` (group
    size), ``env.seed`` (validation: seed + 1000), ``env.max_steps``, ``env.history_length`` and,
    optional, ``env.progpo``: ``anchor`` (raw | canonical), ``state_key`` (canonical | exact),
    ``backend`` (async | sync | ray), ``train_split`` / ``val_split``.
    """
    name = str(_get(config, "env.env_name", "")).lower()
    env_name = "alfworld" if "alfworld" in name else "webshop" if "webshop" in name else None
    if env_name is None:
        raise ValueError(
            f"env.env_name={name!r}: trainers.integrations.verl_agent.make_envs serves progpo/alfworld "
            "and progpo/webshop; for verl-agent's own envs keep agent_system.environments.make_envs"
        )
    n = int(_get(config, "env.rollout.n", 1))
    opts = dict(_get(config, "env.progpo", {}) or {})
    train_split, val_split = _SPLITS[env_name]
    common = dict(
        config=config,
        anchor=str(opts.get("anchor", "raw")),
        state_key=str(opts.get("state_key", "canonical")),
        backend=str(opts.get("backend", "async")),
        max_steps=int(_get(config, "env.max_steps", 50)),
    )
    seed = int(_get(config, "env.seed", 0))
    envs = make_manager(
        env_name,
        int(_get(config, "data.train_batch_size", 1)),
        max(n, 1),
        split=str(opts.get("train_split", train_split)),
        seed=seed,
        **common,
    )
    val_envs = make_manager(
        env_name,
        int(_get(config, "data.val_batch_size", 1)),
        1,
        split=str(opts.get("val_split", val_split)),
        seed=seed + 1000,
        **common,
    )
    install(config)
    return envs, val_envs


# -- the collector hook ----------------------------------------------------------------------------
ProGPOTrajectoryCollector: Any = None  # the subclass, built from verl-agent's class by install()


def collector_class(base: type) -> type:
    """A subclass of verl-agent's ``TrajectoryCollector`` that writes ProGPO's per-step columns
    (:meth:`ProGPOEnvironmentManager.progpo_signals`) into each step row, so that they reach
    ``non_tensor_batch`` through verl-agent's own ``gather_rollout_data``."""

    class _Collector(base):  # type: ignore[misc, valid-type]  # base is verl-agent's class, known at run time only
        __doc__ = collector_class.__doc__

        def vanilla_multi_turn_loop(self, gen_batch: Any, actor_rollout_wg: Any, envs: Any) -> Any:
            out = super().vanilla_multi_turn_loop(gen_batch, actor_rollout_wg, envs)
            signals = getattr(envs, "progpo_signals", None)
            if signals is None:
                estimator = str(_get(self.config, "algorithm.adv_estimator", ""))
                if estimator in progpo_estimators():
                    raise ValueError(
                        f"algorithm.adv_estimator={estimator} needs ProGPO's per-step signals, and "
                        f"{type(envs).__name__} records none: build the envs with "
                        "trainers.integrations.verl_agent.make_envs"
                    )
                return out
            total_batch_list = out[0]
            for i, (rows, steps) in enumerate(zip(total_batch_list, signals())):
                if len(rows) != len(steps):
                    raise RuntimeError(f"env {i}: {len(rows)} collected steps but {len(steps)} env steps")
                for row, extra in zip(rows, steps):
                    row.update(extra)
            return out

    _Collector.__name__ = _Collector.__qualname__ = "ProGPOTrajectoryCollector"
    return _Collector


def _base_options(opts: Mapping[str, Any]) -> dict[str, Any]:
    """Each registered base's own options given in ``algorithm.progpo``, under verl's key
    ``<base>_<option>``: read as the flag of the trainer (``planpo_alpha``, ``success_threshold``)
    or as that key; an option not given keeps its registered default."""
    from trainers.integrations.verl import option_key  # (as in compute_advantage_branch, its caller)

    out: dict[str, Any] = {}
    for base in base_names():
        spec = registered_estimator(base)
        for f in option_fields(spec.options) if spec.options is not None else ():
            key = option_key(base, f.name)
            for given in (spec.flag(f), key):
                if given in opts:
                    out[key] = opts[given]
    return out


# -- the estimator branch --------------------------------------------------------------------------
def compute_advantage_branch(
    original: Callable[..., Any], options: Mapping[str, Any] | None = None
) -> Callable[..., Any]:
    """verl-agent's ``compute_advantage`` with a branch for each name of :func:`progpo_estimators`.

    Rows are steps (``traj_uid``, ``uid`` = group). Rows that ``adjust_batch`` duplicated (same
    trajectory and step) are computed once and share the result. ``options`` (the config's
    ``algorithm.progpo``): ``lam``, ``tau_r``, ``tau_p`` (ProGPO), and each base's options by
    the trainer's flag (``planpo_alpha``, ``success_threshold``, ``hgpo_depth``,
    ``potential_credit``) or as ``<base>_<option>`` (a plug-in's ``novelty_weight``), besides
    verl-agent's ``gamma`` and ``step_advantage_w`` arguments. PlanPO's turn lengths are the rows'
    response token counts.
    """
    # torch loads with the advantage branch: the env manager and make_envs do without it
    from trainers.integrations.verl import advantage_per_row, require_columns

    opts = dict(options or {})

    def compute_advantage(data: Any, adv_estimator: Any, gamma: float = 1.0, *args: Any, **kwargs: Any) -> Any:
        name = str(getattr(adv_estimator, "value", adv_estimator))
        if name not in progpo_estimators():
            return original(data, adv_estimator, gamma, *args, **kwargs)
        import torch  # the [train] extra

        ntb = require_columns(name, data.non_tensor_batch)
        if "response_mask" not in data.batch.keys():
            data.batch["response_mask"] = sys.modules[original.__module__].compute_response_mask(data)
        keys = [f"{t}\x00{s}" for t, s in zip(np.asarray(ntb["traj_uid"]), np.asarray(ntb["progpo_step"]))]
        _, first, inverse = np.unique(np.array(keys, dtype=object), return_index=True, return_inverse=True)
        sub = {
            k: np.asarray(v)[first]
            for k, v in ntb.items()
            if k.startswith("progpo_") or k in ("traj_uid", "anchor_obs")
        }
        config = {
            "progpo_lam": opts.get("lam", 1.0),
            "progpo_tau_r": opts.get("tau_r", TAU_R),
            "progpo_tau_p": opts.get("tau_p", TAU_P),
            "step_advantage_w": kwargs.get("step_advantage_w", 1.0),
            "gigpo_gamma": gamma,
            **_base_options(opts),
        }
        mask = data.batch["response_mask"]
        lengths = mask.sum(dim=-1).detach().cpu().double().numpy()[first]
        adv = advantage_per_row(
            name, np.asarray(data.non_tensor_batch["uid"])[first], sub, config=config, response_lengths=lengths
        )
        per_row = torch.as_tensor(adv, dtype=torch.float32)[torch.as_tensor(inverse.reshape(-1))].to(mask.device)
        data.batch["advantages"] = per_row[:, None] * mask
        data.batch["returns"] = data.batch["advantages"].clone()
        return data

    compute_advantage._progpo = True  # type: ignore[attr-defined]  # a marker on the function: the patch is applied once
    compute_advantage._progpo_options = opts  # type: ignore[attr-defined]  # a later install() updates them
    return compute_advantage


def install(config: Any = None) -> dict[str, str]:
    """In this process: the collector subclass, the estimator branch, the trainer's name check.

    Idempotent; returns ``{what: where}``. Needs verl-agent importable (``agent_system``, its
    ``verl``); called by :func:`make_envs`.
    """
    global ProGPOTrajectoryCollector
    import agent_system.multi_turn_rollout as rollout_pkg  # a verl-agent checkout
    import agent_system.multi_turn_rollout.rollout_loop as rollout_loop  # a verl-agent checkout

    done: dict[str, str] = {}
    base = rollout_loop.TrajectoryCollector
    if getattr(base, "__name__", "") != "ProGPOTrajectoryCollector":
        ProGPOTrajectoryCollector = collector_class(base)
        rollout_pkg.TrajectoryCollector = rollout_loop.TrajectoryCollector = ProGPOTrajectoryCollector
    done["collector"] = "agent_system.multi_turn_rollout.TrajectoryCollector"
    from verl.trainer.ppo import ray_trainer  # verl's own venv

    options = dict(_get(config, "algorithm.progpo", {}) or {})
    if not getattr(ray_trainer.compute_advantage, "_progpo", False):
        ray_trainer.compute_advantage = compute_advantage_branch(ray_trainer.compute_advantage, options)
    else:  # installed before (e.g. without a config): this config's options apply from now on
        ray_trainer.compute_advantage._progpo_options.update(options)
    done["estimator"] = "verl.trainer.ppo.ray_trainer.compute_advantage"
    trainer_cls = ray_trainer.RayPPOTrainer
    if not getattr(trainer_cls.__init__, "_progpo", False):
        original_init = trainer_cls.__init__

        def __init__(self: Any, config: Any, *args: Any, **kwargs: Any) -> None:
            name = str(config.algorithm.adv_estimator)
            setup = progpo_estimators()
            if name not in setup:
                return original_init(self, config, *args, **kwargs)
            from omegaconf import open_dict  # verl's own venv

            with open_dict(config):  # verl-agent's critic check knows its own names only
                config.algorithm.adv_estimator = setup[name]
            try:
                original_init(self, config, *args, **kwargs)
            finally:
                with open_dict(config):
                    config.algorithm.adv_estimator = name

        __init__._progpo = True  # type: ignore[attr-defined]  # as above
        trainer_cls.__init__ = __init__
    done["trainer"] = "verl.trainer.ppo.ray_trainer.RayPPOTrainer.__init__ accepts " + ", ".join(progpo_estimators())
    return done
