"""ProGPO inside TRL's ``GRPOTrainer``: a multi-turn ``rollout_func`` and a progress-conditioned reward.

Extra ``[trl]`` (``trl>=1.10``); TRL is imported only when a rollout runs, so this module imports
without it. Usage (a dataset whose ``prompt`` column holds task seeds, as strings)::

    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    from trainers.integrations.trl import make_rollout_func, outcome_reward, progress_conditioned_reward

    G = 4
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer,
        reward_funcs=[progress_conditioned_reward, outcome_reward],   # outcome_reward: logging only
        args=GRPOConfig(num_generations=G, scale_rewards="group", reward_weights=[1.0, 0.0], ...),
        train_dataset=Dataset.from_dict({"prompt": [str(s) for s in range(64)]}),
        rollout_func=make_rollout_func("ProGPO-ALFWorld-v0", max_steps=8),
    )

Rollout. For each prompt (each distinct one: TRL 1.16 passes every prompt ``num_generations`` times
in a row, older releases once; both work) (a task seed ``"17"``, or a task id, or a dict ``{"seed":..}`` /
``{"task_id":..}``) the rollout plays ``trainer.num_generations`` episodes of that task (one
group; the envs pick the task from the seed, so the G copies share it). Turn by turn it generates
with ``trainer._generate_single_turn`` -- TRL's own generation path: the trainer's vLLM when
``use_vllm`` is on, the trainer's model (``generate``) otherwise -- parses the answer into a
command (:func:`agents.parsing.parse_action`; an invalid answer sends its fallback text, which the
env rejects as an invalid action) and steps the env. One completion is the whole episode:

    completion_ids = a_1 + f_1 + a_2 + f_2 + ... + a_T        env_mask: 1 on a_t, 0 on f_t

where ``a_t`` are the model's tokens and ``f_t`` the env feedback (``feedback_template``),
which TRL then leaves out of the loss. ``logprobs`` are vLLM's sampled-token logprobs (0.0 on
env tokens), or ``None`` without vLLM. Extra columns, one value per completion, reach the reward
functions: ``outcome`` (the env's outcome reward of the episode), ``coverage_rate`` (``(D - 1) /
T`` from :class:`wrappers.FirstVisitCoverage`), ``group_id``, ``won``, ``num_steps``, ``task_id``
and ``commands`` (the commands sent, as one ``"\\n"``-joined string).

Reward and advantages. :func:`progress_conditioned_reward` returns, per completion, the outcome in
a group with a success (``max outcome >= tau_R``) and, in an all-failed group, the coverage rate
-- or 0 for the whole group when ``std_pop(coverage) < tau_P`` (the gate of
:func:`trainers.advantages.progpo_episode_advantages`). TRL's group normalisation
(``scale_rewards="group"``, ``trl/trainer/grpo_trainer.py``) computes::

    A_TRL = (x - mean_g x) / (std_unbiased_g(x) + 1e-4)       # nanstd: Bessel's correction

while ProGPO (``trainers.advantages``) uses the population std and ``eps = 1e-6``::

    A = (x - mean_g x) / (std_pop_g(x) + 1e-6)                 # lambda = 1

They differ by ``sqrt(G / (G - 1))`` (std convention) and by the epsilons. The correction:
:func:`make_progress_conditioned_reward` ``(num_generations=G)`` scales the rewards by
``c = 1e-4 / (1e-6 * sqrt(G / (G - 1)))``; then, exactly, ``A = sqrt(G / (G - 1)) * A_TRL``
(:func:`trl_to_progpo_scale`). That constant factor is uniform over the batch: multiplying the
loss by a constant (Adam is almost invariant to it; or scale ``learning_rate`` for SGD). ProGPO's
``lambda`` cancels in any group normalisation; ``lambda != 1`` needs ``scale_rewards="none"`` and
:func:`progpo_advantage_reward`, whose rewards *are* the ProGPO advantages (mean 0 per group, so
``A_TRL = r - mean r = A`` exactly).

GPU variant: ``GRPOConfig(use_vllm=True, vllm_mode="colocate", ...)``; the rollout then generates
with TRL's vLLM engine (see ``examples/trl_grpo_alfworld.py``).
"""

# Over 500 lines: TRL's rollout function, reward functions and dataset builder, which its GRPOTrainer takes
# together.
# Imports inside functions: the envs, the wrappers and the agents (gymnasium, the engines) load for an
# env rollout only; the reward function and the advantage need numpy alone.
from __future__ import annotations

import importlib.metadata as md
import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from trainers.advantages import progpo_episode_advantages
from wrappers.signals import TAU_P, TAU_R

__all__ = [
    "TRL_STD_EPS",
    "EpisodeRecord",
    "make_progress_conditioned_reward",
    "make_rollout_func",
    "outcome_reward",
    "progpo_advantage_reward",
    "progress_conditioned_reward",
    "progress_conditioned_values",
    "trl_to_progpo_scale",
    "expert_warm_start",
    "generation_hook",
    "make_planpo_reward",
    "planpo_reward",
    "planpo_values",
    "progress_planpo_reward",
]

TRL_STD_EPS = 1e-4  # the epsilon GRPOTrainer adds to the group std (trl/trainer/grpo_trainer.py)

DEFAULT_PROMPT = (
    "You are an agent in a text environment. Answer with <think>...</think><action>...</action>.\n"
    "Task: {goal}\nObservation: {observation}\nAdmissible actions: [{admissible}]\n"
)
DEFAULT_FEEDBACK = "\nObservation: {observation}\nAdmissible actions: [{admissible}]\n"


# ----------------------------------------------------------------------------------------------
# Rewards (pure functions over the per-completion columns; no TRL needed).
# ----------------------------------------------------------------------------------------------
def _groups(group_id: Sequence[Any]) -> list[np.ndarray]:
    keys = list(group_id)
    order: dict[Any, list[int]] = {}
    for i, g in enumerate(keys):
        order.setdefault(g, []).append(i)
    return [np.asarray(ix) for ix in order.values()]


def _progress_where_all_failed(
    out: np.ndarray, r: np.ndarray, p: np.ndarray, group_id: Sequence[Any], tau_r: float, tau_p: float
) -> np.ndarray:
    """``out`` with ProGPO's progress values (the coverage rate, 0 for the whole group when its
    std is below ``tau_p``) in each group where every outcome is below ``tau_r``."""
    for ix in _groups(group_id):
        if r[ix].max() < tau_r:
            out[ix] = p[ix] if p[ix].std() >= tau_p else 0.0
    return out


def progress_conditioned_values(
    outcome: Sequence[float],
    coverage_rate: Sequence[float],
    group_id: Sequence[Any],
    tau_r: float = TAU_R,
    tau_p: float = TAU_P,
) -> np.ndarray:
    """Per completion: the outcome in a group with a success, else the coverage rate (0 for the
    whole group when its coverage std is below ``tau_p``).

    >>> progress_conditioned_values([1, 0, 0, 0], [.1, .2, .1, .3], [0, 0, 1, 1]).tolist()
    [1.0, 0.0, 0.1, 0.3]
    >>> progress_conditioned_values([0, 0], [.2, .2], [5, 5]).tolist()  # gated: no progress signal
    [0.0, 0.0]
    """
    r = np.asarray(outcome, dtype=np.float64)
    p = np.asarray(coverage_rate, dtype=np.float64)
    if r.shape != p.shape or r.shape != (len(group_id),):
        raise ValueError(
            f"outcome, coverage_rate and group_id need one length, got {r.shape}, {p.shape}, {len(group_id)}"
        )
    return _progress_where_all_failed(r.copy(), r, p, group_id, tau_r, tau_p)


def progress_conditioned_reward(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    *,
    outcome: Sequence[float],
    coverage_rate: Sequence[float],
    group_id: Sequence[Any],
    tau_r: float = TAU_R,
    tau_p: float = TAU_P,
    **kwargs: Any,
) -> list[float]:
    """TRL reward function: :func:`progress_conditioned_values` of the rollout's columns.

    With ``scale_rewards="group"`` TRL turns it into ProGPO(GRPO) episode advantages up to TRL's
    std convention (module docs; :func:`make_progress_conditioned_reward` corrects for it).

    >>> progress_conditioned_reward(["0"] * 2, ["", ""], outcome=[0., 0.], coverage_rate=[.1, .3], group_id=[0, 0])
    [0.1, 0.3]
    """
    return progress_conditioned_values(outcome, coverage_rate, group_id, tau_r, tau_p).tolist()


def trl_to_progpo_scale(num_generations: int) -> float:
    """``sqrt(G / (G - 1))``: ProGPO advantage = this x TRL's advantage (with the scaled reward).

    >>> round(trl_to_progpo_scale(4), 6)
    1.154701
    """
    if num_generations < 2:
        raise ValueError(f"group normalisation needs num_generations >= 2, got {num_generations}")
    return math.sqrt(num_generations / (num_generations - 1))


def make_progress_conditioned_reward(
    num_generations: int,
    eps: float = 1e-6,
    tau_r: float = TAU_R,
    tau_p: float = TAU_P,
    trl_eps: float = TRL_STD_EPS,
) -> Callable[..., list[float]]:
    """:func:`progress_conditioned_reward` scaled by ``c = trl_eps / (eps * sqrt(G / (G - 1)))``.

    With it, TRL's ``(r - mean) / (std_unbiased(r) + trl_eps)`` equals exactly ProGPO's
    ``(x - mean) / (std_pop(x) + eps)`` divided by ``sqrt(G / (G - 1))``:
    ``std_unbiased(c x) + trl_eps = c sqrt(G/(G-1)) (std_pop(x) + eps)``.

    >>> f = make_progress_conditioned_reward(2)
    >>> [round(v, 3) for v in f([], [], outcome=[1., 0.], coverage_rate=[0., 0.], group_id=[0, 0])]
    [70.711, 0.0]
    """
    c = trl_eps / (eps * trl_to_progpo_scale(num_generations))

    def progress_conditioned_reward_exact(
        prompts: Sequence[Any],
        completions: Sequence[Any],
        *,
        outcome: Sequence[float],
        coverage_rate: Sequence[float],
        group_id: Sequence[Any],
        **kwargs: Any,
    ) -> list[float]:
        return (c * progress_conditioned_values(outcome, coverage_rate, group_id, tau_r, tau_p)).tolist()

    return progress_conditioned_reward_exact


def progpo_advantage_reward(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    *,
    outcome: Sequence[float],
    coverage_rate: Sequence[float],
    group_id: Sequence[Any],
    base: str = "grpo",
    lam: float = 1.0,
    **kwargs: Any,
) -> list[float]:
    """Rewards equal to ProGPO's episode advantages (any ``base``/``lam``); for ``scale_rewards="none"``.

    >>> [round(a, 4) for a in progpo_advantage_reward([], [], outcome=[0., 0.], coverage_rate=[.2, .6], group_id=[0, 0], lam=.5)]
    [-0.5, 0.5]
    """
    r = np.asarray(outcome, dtype=np.float64)
    p = np.asarray(coverage_rate, dtype=np.float64)
    out = np.zeros_like(r)
    for ix in _groups(group_id):
        out[ix] = progpo_episode_advantages(r[ix], p[ix], base=base, lam=lam)
    return out.tolist()


def planpo_values(
    outcome: Sequence[float],
    num_steps: Sequence[int],
    group_id: Sequence[Any],
    *,
    success_threshold: float = 1.0,
    coverage_rate: Sequence[float] | None = None,
    tau_r: float = TAU_R,
    tau_p: float = TAU_P,
) -> np.ndarray:
    """Per completion: PlanPO's ``R^E = R / T`` for a success (``R >= success_threshold``), else 0.

    TRL's group normalisation of these values gives PlanPO's trajectory term (shorter successes
    rank higher; a group with no success, or with successes of one length, gets 0). With
    ``coverage_rate`` (ProGPO over PlanPO) an all-failed group (``max R < tau_r``) gets its
    coverage rates instead, gated as in :func:`progress_conditioned_values`. PlanPO's turn term
    needs each turn's answer length and stays with the trainer (``--estimator planpo``).

    >>> planpo_values([1, 1, 0, 0, 0], [2, 4, 3, 5, 5], [0, 0, 0, 1, 1]).tolist()
    [0.5, 0.25, 0.0, 0.0, 0.0]
    >>> planpo_values([1, 1, 0, 0, 0], [2, 4, 3, 5, 5], [0, 0, 0, 1, 1], coverage_rate=[0, 0, 0, .2, .4]).tolist()
    [0.5, 0.25, 0.0, 0.2, 0.4]
    """
    r = np.asarray(outcome, dtype=np.float64)
    t = np.asarray(num_steps, dtype=np.float64)
    if r.shape != t.shape or r.shape != (len(group_id),):
        raise ValueError(f"outcome, num_steps and group_id need one length, got {r.shape}, {t.shape}, {len(group_id)}")
    success = r >= success_threshold
    if np.any(success & (t < 1)):
        raise ValueError("num_steps: a successful episode needs at least one step")
    out = np.where(success, r / np.maximum(t, 1.0), 0.0)
    if coverage_rate is None:
        return out
    p = np.asarray(coverage_rate, dtype=np.float64)
    if p.shape != r.shape:
        raise ValueError(f"coverage_rate needs one value per completion, got {p.shape} for {r.shape}")
    return _progress_where_all_failed(out, r, p, group_id, tau_r, tau_p)


def planpo_reward(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    *,
    outcome: Sequence[float],
    num_steps: Sequence[int],
    group_id: Sequence[Any],
    success_threshold: float = 1.0,
    **kwargs: Any,
) -> list[float]:
    """TRL reward function: :func:`planpo_values` of the rollout's columns (PlanPO's trajectory term
    after TRL's group normalisation, up to TRL's std convention: :func:`make_planpo_reward`).

    >>> planpo_reward([], [], outcome=[1., 1.], num_steps=[2, 4], group_id=[0, 0])
    [0.5, 0.25]
    """
    return planpo_values(outcome, num_steps, group_id, success_threshold=success_threshold).tolist()


def progress_planpo_reward(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    *,
    outcome: Sequence[float],
    num_steps: Sequence[int],
    coverage_rate: Sequence[float],
    group_id: Sequence[Any],
    success_threshold: float = 1.0,
    tau_r: float = TAU_R,
    tau_p: float = TAU_P,
    **kwargs: Any,
) -> list[float]:
    """TRL reward function for ProGPO(PlanPO): all-failed groups their coverage rates, the others
    PlanPO's ``R / T`` among the successes (:func:`planpo_values`)."""
    return planpo_values(
        outcome,
        num_steps,
        group_id,
        success_threshold=success_threshold,
        coverage_rate=coverage_rate,
        tau_r=tau_r,
        tau_p=tau_p,
    ).tolist()


def make_planpo_reward(
    num_generations: int,
    *,
    progress: bool = False,
    success_threshold: float = 1.0,
    eps: float = 1e-6,
    tau_r: float = TAU_R,
    tau_p: float = TAU_P,
    trl_eps: float = TRL_STD_EPS,
) -> Callable[..., list[float]]:
    """:func:`planpo_reward` (``progress=True``: :func:`progress_planpo_reward`) scaled as in
    :func:`make_progress_conditioned_reward`, so that ``sqrt(G / (G - 1))`` times TRL's advantage
    is ``trainers.advantages``' ``planpo`` (``progpo-planpo``) episode advantage.

    >>> f = make_planpo_reward(2)
    >>> [round(v, 3) for v in f([], [], outcome=[1., 1.], num_steps=[1, 2], group_id=[0, 0])]
    [70.711, 35.355]
    """
    c = trl_eps / (eps * trl_to_progpo_scale(num_generations))

    def planpo_reward_exact(
        prompts: Sequence[Any],
        completions: Sequence[Any],
        *,
        outcome: Sequence[float],
        num_steps: Sequence[int],
        group_id: Sequence[Any],
        coverage_rate: Sequence[float] | None = None,
        **kwargs: Any,
    ) -> list[float]:
        if progress and coverage_rate is None:
            raise ValueError("make_planpo_reward(progress=True) needs the rollout's coverage_rate column")
        values = planpo_values(
            outcome,
            num_steps,
            group_id,
            success_threshold=success_threshold,
            coverage_rate=coverage_rate if progress else None,
            tau_r=tau_r,
            tau_p=tau_p,
        )
        return (c * values).tolist()

    return planpo_reward_exact


def outcome_reward(
    prompts: Sequence[Any], completions: Sequence[Any], *, outcome: Sequence[float], **kwargs: Any
) -> list[float]:
    """The env's outcome reward (log it with weight 0 next to a ProGPO reward)."""
    return [float(v) for v in outcome]


# ----------------------------------------------------------------------------------------------
# Rollout.
# ----------------------------------------------------------------------------------------------
@dataclass
class EpisodeRecord:
    """One played episode: the completion tokens and what the reward functions read."""

    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    outcome: float = 0.0
    coverage_rate: float = 0.0
    won: bool = False
    task_id: str = ""
    done: bool = False


def _task(prompt: Any) -> tuple[int | None, dict[str, Any] | None]:
    """(seed, reset options) of one dataset prompt."""
    if isinstance(prompt, Mapping):
        seed = prompt.get("seed")
        opts = {"task_id": prompt["task_id"]} if prompt.get("task_id") is not None else None
        return (None if seed is None else int(seed)), opts
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], Mapping):  # conversational: last content
        prompt = prompt[-1].get("content", "")
    text = str(prompt).strip()
    try:
        return int(text), None
    except ValueError:
        return 0, {"task_id": text}


def _one_per_group(prompts: list[Any], g: int) -> list[Any]:
    """One prompt per group. TRL documents that ``rollout_func`` gets each prompt once; TRL 1.16's
    ``RepeatSampler`` in fact hands it each prompt ``num_generations`` times in a row. Accept both.

    >>> _one_per_group(["1", "1", "2", "2"], 2), _one_per_group(["1", "2"], 2)
    (['1', '2'], ['1', '2'])
    """
    if g > 1 and len(prompts) % g == 0:
        runs = [prompts[k : k + g] for k in range(0, len(prompts), g)]
        if all(all(p == run[0] for p in run) for run in runs):
            return [run[0] for run in runs]
    return list(prompts)


def _fill(template: str, observation: str, info: Mapping[str, Any]) -> str:
    goal = info.get("goal")
    goal = info.get("instruction") or (goal.get("instruction_text") if isinstance(goal, Mapping) else goal) or ""
    adm = ", ".join(f"'{c}'" for c in info.get("admissible_commands") or [])
    return template.format(goal=goal, observation=observation, admissible=adm)


def _wrapped_env(env_id: str, max_steps: int, env_kwargs: Mapping[str, Any]) -> Any:
    import gymnasium as gym

    import progpo_envs
    from wrappers import CanonicalizeObservation, FirstVisitCoverage, default_canonicalizer

    canon: Callable[[str, Mapping[str, Any]], str]
    if env_id == progpo_envs.ALFWORLD_ID:
        from progpo_envs.alfworld.canonical import canonicalize_alfworld as canon
    elif env_id == progpo_envs.WEBSHOP_ID:
        from progpo_envs.webshop.canonical import canonicalize_webshop as canon
    else:
        canon = default_canonicalizer
    return FirstVisitCoverage(
        CanonicalizeObservation(gym.make(env_id, max_episode_steps=max_steps, **env_kwargs), canon)
    )


#: the TRL releases the rollout was run against (``trainer._generate_single_turn`` is private API)
TESTED_TRL = ">=1.16,<1.17"


def generation_hook(trainer: Any) -> Callable[..., Any]:
    """``trainer._generate_single_turn``, TRL's own (private) generation path, or one clear error."""
    hook = getattr(trainer, "_generate_single_turn", None)
    if not callable(hook):
        try:
            version = md.version("trl")
        except md.PackageNotFoundError:
            version = "not installed"
        raise RuntimeError(
            f"trainers.integrations.trl needs GRPOTrainer._generate_single_turn, which TRL {version} "
            f"does not have: install a tested release (pip install 'trl{TESTED_TRL}')"
        )
    return hook


class _Rollout:
    """The callable returned by :func:`make_rollout_func` (keeps its envs between calls)."""

    def __init__(
        self,
        env_id: str,
        env_kwargs: dict[str, Any],
        max_steps: int,
        prompt_template: str,
        feedback_template: str,
        action_format: str,
        max_completion_tokens: int,
        env_factory: Callable[[], Any] | None,
    ) -> None:
        self.env_id, self.env_kwargs, self.max_steps = env_id, env_kwargs, max_steps
        self.prompt_template, self.feedback_template = prompt_template, feedback_template
        self.action_format, self.max_completion_tokens = action_format, max_completion_tokens
        self.env_factory = env_factory
        self.envs: list[Any] = []
        self.calls = 0
        self.last_records: list[EpisodeRecord] = []

    def _env(self, i: int) -> Any:
        while len(self.envs) <= i:
            make = self.env_factory or (lambda: _wrapped_env(self.env_id, self.max_steps, self.env_kwargs))
            self.envs.append(make())
        return self.envs[i]

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        from agents.parsing import parse_action

        tok = trainer.processing_class
        tok = getattr(tok, "tokenizer", tok)
        mode = "train" if trainer.model.training else "eval"
        g = int(
            trainer.num_generations
            if mode == "train"
            else getattr(trainer, "num_generations_eval", None) or trainer.num_generations
        )
        generate = generation_hook(trainer)
        prompts = _one_per_group(prompts, g)
        n = len(prompts) * g
        recs = [EpisodeRecord() for _ in range(n)]
        prompt_ids: list[list[int]] = []
        group_ids: list[str] = []
        obs_info: list[tuple[str, dict[str, Any]]] = []
        for k, prompt in enumerate(prompts):
            seed, options = _task(prompt)
            gid = f"{self.calls}:{k}"
            for m in range(g):
                obs, info = self._env(k * g + m).reset(seed=seed, options=options)
                obs_info.append((str(obs), info))
                recs[k * g + m].task_id = str(info.get("task_id", ""))
                if m == 0:
                    first_ids = tok.encode(_fill(self.prompt_template, str(obs), info), add_special_tokens=False)
                prompt_ids.append(list(first_ids))
                group_ids.append(gid)
        self.calls += 1

        for _ in range(self.max_steps):
            active = [i for i in range(n) if not recs[i].done]
            if not active:
                break
            inputs = [prompt_ids[i] + recs[i].completion_ids for i in active]
            completions, logprobs = generate(inputs, None, {}, 1)
            for j, i in enumerate(active):
                ids = list(completions[j])
                rec = recs[i]
                rec.completion_ids += ids
                rec.env_mask += [1] * len(ids)
                rec.logprobs += [float(x) for x in logprobs[j]] if logprobs is not None else [0.0] * len(ids)
                text = tok.decode(ids, skip_special_tokens=True)
                parsed = parse_action(text, self.action_format)
                command = (
                    parsed.action
                    if parsed.valid and parsed.action is not None
                    else (parsed.fallback or text.strip()[-30:] or "noop")
                )
                obs, reward, terminated, truncated, info = self._env(i).step(command)
                rec.commands.append(command)
                rec.outcome = float(info.get("outcome", reward))
                rec.coverage_rate = float(info.get("coverage_rate", 0.0))
                rec.won = bool(info.get("won", False))
                budget_left = len(rec.completion_ids) < self.max_completion_tokens
                rec.done = bool(terminated or truncated) or not budget_left
                if not rec.done:
                    fb = tok.encode(_fill(self.feedback_template, str(obs), info), add_special_tokens=False)
                    rec.completion_ids += fb
                    rec.env_mask += [0] * len(fb)
                    rec.logprobs += [0.0] * len(fb)
        self.last_records = recs
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": [r.completion_ids for r in recs],
            "logprobs": [r.logprobs for r in recs] if any(any(r.logprobs) for r in recs) else None,
            "env_mask": [r.env_mask for r in recs],
            "outcome": [r.outcome for r in recs],
            "coverage_rate": [r.coverage_rate for r in recs],
            "group_id": group_ids,
            "won": [r.won for r in recs],
            "num_steps": [len(r.commands) for r in recs],
            "task_id": [r.task_id for r in recs],
            "commands": ["\n".join(r.commands) for r in recs],
        }


def expert_warm_start(
    model: Any, tokenizer: Any, rollout: Any, *, episodes: int = 8, steps: int = 60, lr: float = 3e-3, seed: int = 0
) -> dict[str, float]:
    """Clone ALFWorld's searching expert into ``model`` in ``rollout``'s own turn format.

    Plays :class:`agents.search_expert.ALFWorldSearchAgent` (it reads only what the agent reads)
    for ``episodes`` episodes on the rollout's env, writes each episode as the rollout would
    (prompt, then per turn ``<action>CMD</action>`` + eos, then the feedback template), and
    trains the answer tokens only (the env tokens are masked, as TRL's ``env_mask`` does) with
    AdamW for ``steps`` steps, one episode per step. A random model answers gibberish: every
    action is invalid, every reward 0 and GRPO has nothing to compare; a short clone makes it
    answer in format, so rewards and advantages differ within a group from the first step.
    Returns ``{"loss_first", "loss_last", "episodes", "expert_wins"}``.
    """
    import torch  # the [train] extra

    from agents.search_expert import ALFWorldSearchAgent

    if rollout.action_format == "think_action":
        raise ValueError(
            "expert_warm_start writes <action>CMD</action> answers: build the rollout with "
            "action_format='action' (the expert has no reasoning to clone)"
        )
    agent, env = ALFWorldSearchAgent(), rollout._env(0)
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    data, wins = [], 0
    for e in range(episodes):
        obs, info = env.reset(seed=seed + e)
        ids = tokenizer.encode(_fill(rollout.prompt_template, str(obs), info), add_special_tokens=False)
        mask = [0] * len(ids)
        history: list[tuple[Any, str]] = []
        for _ in range(rollout.max_steps):
            command = agent.act([obs], [info], [history])[0]
            answer = tokenizer.encode(f"<action>{command}</action>", add_special_tokens=False) + eos
            ids, mask = ids + answer, mask + [1] * len(answer)
            history.append((obs, command))
            obs, _, terminated, truncated, info = env.step(command)
            if terminated or truncated:
                wins += bool(info.get("won", False))
                break
            feedback = tokenizer.encode(_fill(rollout.feedback_template, str(obs), info), add_special_tokens=False)
            ids, mask = ids + feedback, mask + [0] * len(feedback)
        data.append((torch.tensor([ids]), torch.tensor([mask[1:]], dtype=torch.bool)))
    optim = torch.optim.AdamW(model.parameters(), lr=lr)
    order, losses = random.Random(seed), []
    model.train()
    for _ in range(steps):
        ids_t, mask_t = data[order.randrange(len(data))]
        logits = model(input_ids=ids_t.to(model.device)).logits[:, :-1].float()
        nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids_t[:, 1:].to(model.device), reduction="none")
        loss = nll[mask_t.to(model.device)].mean()
        optim.zero_grad()
        loss.backward()
        optim.step()
        losses.append(float(loss))
    return {
        "loss_first": losses[0],
        "loss_last": float(np.mean(losses[-5:])),
        "episodes": float(episodes),
        "expert_wins": float(wins),
    }


def make_rollout_func(
    env_id: str = "ProGPO-ALFWorld-v0",
    *,
    max_steps: int = 50,
    prompt_template: str = DEFAULT_PROMPT,
    feedback_template: str = DEFAULT_FEEDBACK,
    action_format: str = "think_action",
    max_completion_tokens: int = 4096,
    env_factory: Callable[[], Any] | None = None,
    **env_kwargs: Any,
) -> Callable[[list[Any], Any], dict[str, Any]]:
    """A ``rollout_func(prompts, trainer) -> dict`` for ``GRPOTrainer(rollout_func=...)`` (module docs).

    ``env_kwargs`` go to ``gym.make(env_id, max_episode_steps=max_steps, ...)`` (``split``,
    ``data_dir``...); ``env_factory`` replaces that (it must return an env with the coverage
    wrapper's info). Templates are ``str.format`` strings with ``{goal}``, ``{observation}``,
    ``{admissible}``; for a chat model put its turn markers in them. ``max_completion_tokens``
    caps one episode's completion (model + env tokens); TRL's ``max_completion_length`` caps
    each turn.

    >>> f = make_rollout_func("ProGPO-WebShop-v0", max_steps=3, split="test")
    >>> callable(f) and f.max_steps == 3
    True
    """
    return _Rollout(
        env_id,
        dict(env_kwargs),
        max_steps,
        prompt_template,
        feedback_template,
        action_format,
        max_completion_tokens,
        env_factory,
    )
