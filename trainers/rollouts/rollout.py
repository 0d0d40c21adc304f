"""Rollout: play one episode per member of a :class:`~wrappers.GroupVectorEnv` with a policy.

The policy contract is :class:`agents.contract.Policy`: ``act(observations, infos, histories,
seed=...) -> list[StepOutput]``; the rollout reads each output's ``action`` (str or None),
``valid`` and ``penalty`` and keeps the whole output for the update (prompt / response token
ids, old log-probs).

Every environment step of a member becomes a :class:`StepRecord` holding the policy's output,
the canonical state before (``o_t``) and after (``o_{t+1}``) the action, ``first_visit``,
the reward and the validity; every member's episode becomes a :class:`Trajectory` with its
outcome (from ``infos["group_outcomes"]``) and whether it was won (the env's ``info["won"]`` on
the final step; for an env that does not report ``won``: ``outcome >= 1 - 1e-9``). :meth:`Rollout.advantage_inputs` turns them into
the flat arrays :func:`trainers.advantages.step_advantages` takes.

Example (a scripted policy on the toy text env):
    >>> from wrappers import GroupVectorEnv
    >>> from trainers.envs import make_env_fn
    >>> class Walker:
    ...     def act(self, observations, infos, histories, seed=None):
    ...         return [StepOutput(action=i["admissible_commands"][-1]) for i in infos]
    >>> envs = GroupVectorEnv(make_env_fn("rooms", "train", max_steps=3), num_groups=2, group_size=2)
    >>> rollout = collect_rollout(envs, Walker(), task_seeds=[1, 2], seed=0)
    >>> len(rollout.trajectories), all(t.length <= 3 for t in rollout.trajectories)
    (4, True)
    >>> envs.close()
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.contract import Policy, StepOutput
from trainers import seeds, stop_request
from trainers.advantages import factorize

__all__ = [
    "Policy",
    "StepOutput",
    "StepRecord",
    "Trajectory",
    "Rollout",
    "collect_rollout",
    "instruction_of",
    "member_info",
    "state_of",
]


#: outcome at or above which an episode counts as won when the env reports no ``info["won"]``
WON_OUTCOME = 1.0 - 1e-9


@dataclass
class StepRecord:
    """One (prompt, response) pair = one env step of one member."""

    traj: int  # index into Rollout.trajectories
    t: int  # step index within the episode
    output: Any  # the policy's step output (tokens, old log-probs, action, valid, penalty)
    state: str  # canonical o_t
    next_state: str  # canonical o_{t+1}
    first_visit: bool
    reward: float
    valid: bool  # parsed by the policy AND accepted by the env
    action: str
    obs: str = ""  # the observation the decision was made on (what a hindsight skill may read)
    next_obs: str = ""  # the observation the action led to


@dataclass
class Trajectory:
    """One member's episode."""

    group: int  # group index in this rollout (0..B-1)
    member: int  # member index in the vector env
    task_id: str
    task_type: str
    outcome: float = 0.0  # final score / outcome reward R_i (WebShop: the purchase score in [0, 1])
    length: int = 0
    won: bool = False  # the env's info["won"] at the episode's end (WebShop: score == 1); see collect_rollout
    goal: str = ""  # the instruction the agent was shown (what a hindsight skill writer may read)
    privileged: str = ""  # the env's info["privileged_text"] at reset, when it offers one (never shown to the agent)


@dataclass
class Rollout:
    """One iteration's play: every step record and trajectory, with the time spent acting and stepping."""

    steps: list[StepRecord] = field(default_factory=list)
    trajectories: list[Trajectory] = field(default_factory=list)
    seconds: float = 0.0
    response_tokens: int = 0
    policy_seconds: float = 0.0  # inside policy.act (generation / scoring)
    env_seconds: float = 0.0  # inside envs.step
    reset_seconds: float = 0.0  # inside envs.reset (a group's task loaded)
    #: the rows the estimator reads, in order: ``(trajectory, step)`` pairs, a trajectory's own
    #: rows in time order. A flat rollout has one row per step, in the order they were played
    #: (:meth:`add_step`); a tree one per step of each leaf, leaf by leaf, so a prefix that several
    #: leaves share is one step and several rows. Built from ``steps`` when not given.
    rows: list[tuple[int, int]] = field(default_factory=list)
    tree_stats: dict[str, float] = field(default_factory=dict)  # tree rollouts: rollout/decisions, ...
    #: what collecting it spent, where that differs from what it holds (dynamic sampling: every
    #: generation batch drawn, dropped groups included): ``budget/*`` and ``dynamic/*`` counts
    sampling: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.rows:
            self.rows = [(s.traj, i) for i, s in enumerate(self.steps)]

    def add_step(self, step: StepRecord) -> None:
        """Append ``step`` as the next row of its trajectory ``step.traj``."""
        self.rows.append((step.traj, len(self.steps)))
        self.steps.append(step)

    def paths(self) -> list[list[int]]:
        """Each trajectory's steps (indices into ``steps``) in time order."""
        out: list[list[int]] = [[] for _ in self.trajectories]
        for traj, i in self.rows:
            out[traj].append(i)
        return out

    def row_steps(self) -> np.ndarray:
        """The step behind each row of :meth:`advantage_inputs`."""
        return np.array([i for _, i in self.rows], dtype=np.int64)

    def merge_rows(self, values: np.ndarray) -> np.ndarray:
        """Per step, the mean of ``values`` over its rows: a step that several leaves share gets the
        mean of the advantages the estimator gives it in each of them (one row: its value)."""
        rows = self.row_steps()
        count = np.bincount(rows, minlength=len(self.steps))
        return np.bincount(rows, weights=np.asarray(values, dtype=np.float64), minlength=len(self.steps)) / np.maximum(
            count, 1
        )

    def advantage_inputs(self) -> dict[str, np.ndarray]:
        """Flat arrays for :func:`trainers.advantages.step_advantages`, one entry per row
        (:attr:`rows`; :meth:`merge_rows` folds the rows back onto the steps)."""
        steps = [self.steps[i] for _, i in self.rows]
        step_traj = [traj for traj, _ in self.rows]
        n = len(steps)
        ids = factorize([s.state for s in steps] + [s.next_state for s in steps])
        return dict(
            outcomes=np.array([t.outcome for t in self.trajectories], dtype=np.float64),
            traj_group=np.array([t.group for t in self.trajectories], dtype=np.int64),
            step_traj=np.array(step_traj, dtype=np.int64),
            step_index=np.array([s.t for s in steps], dtype=np.int64),
            state_ids=ids[:n],
            next_ids=ids[n:],
            first_visit=np.array([s.first_visit for s in steps], dtype=bool),
            step_rewards=np.array([s.reward for s in steps], dtype=np.float64),
            response_lengths=np.array(
                [len(getattr(s.output, "response_ids", ()) or ()) for s in steps], dtype=np.float64
            ),
        )


def member_info(infos: Mapping[str, Any], i: int) -> dict[str, Any]:
    """Member ``i``'s info dict out of Gymnasium's vector dict-of-arrays (``_key`` masks)."""
    out: dict[str, Any] = {}
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get("_" + key)
        if mask is not None and not bool(mask[i]):
            continue
        if isinstance(value, Mapping):
            out[key] = member_info(value, i)
        else:
            out[key] = value[i]
    return out


def instruction_of(info: Mapping[str, Any]) -> str:
    """The instruction the agent is shown: ``info["instruction"]``, else the goal's text (a dict
    goal: its ``instruction_text``; never its answer fields).

    >>> instruction_of({"goal": {"instruction_text": "red shoes", "asin": "B0"}}), instruction_of({"goal": "heat a mug"})
    ('red shoes', 'heat a mug')
    """
    goal = info.get("instruction") or info.get("goal", "")
    if isinstance(goal, Mapping):
        return str(goal.get("instruction_text") or goal.get("instruction") or "")
    return "" if goal is None else str(goal)


def state_of(info: Mapping[str, Any], obs: str) -> str:
    """A step's state identity: the canonicalizer's ``info["canonical_obs"]``, else the raw observation."""
    canon = info.get("canonical_obs")
    return str(canon) if canon is not None else str(obs)


def _close_finished_groups(
    infos: Mapping[str, Any], active: np.ndarray, group_done: np.ndarray, rollout: Rollout, g_size: int
) -> None:
    """Record the outcomes of each group whose members have all finished (the vector env reports
    ``group_outcomes`` when a group's last member ends) and mark the group done."""
    if "group_outcomes" not in infos:
        return
    mask = infos.get("_group_outcomes", np.ones(len(active), bool))
    for i in np.flatnonzero(mask):
        g = i // g_size
        if not group_done[g] and not active[list(range(g * g_size, (g + 1) * g_size))].any():
            outcomes = np.asarray(infos["group_outcomes"][i], dtype=np.float64)
            for m in range(g_size):
                rollout.trajectories[g * g_size + m].outcome = float(outcomes[m])
            group_done[g] = True


def collect_rollout(
    envs: Any,
    policy: Policy,
    task_seeds: Sequence[int],
    seed: int,
    history_k: int = 2,
    on_step: Callable[[int], None] | None = None,
    max_env_steps: int = 10_000,
    options: Sequence[Mapping[str, Any] | None] | None = None,
) -> Rollout:
    """Reset every group to ``task_seeds[g]`` and play until every member finished once.

    Members of a group that already finished keep being stepped with a no-op ``""`` (the
    vector env auto-resets a finished group); those transitions are not recorded.
    ``seed`` makes the policy's sampling deterministic: step k of the rollout uses
    ``(seed * 1_000_003 + k) mod (2**63 - 1)`` (:func:`trainers.seeds.step`: any seed fits
    ``torch.Generator.manual_seed`` and vLLM; the fold is the identity below ~9e12).
    ``options``: one reset-options dict per group (e.g. a ``{"task_id": ...}``) for this reset.
    The policy gets each member's whole episode so far as its history (it shows the last
    ``history_k`` steps; memory templates summarize all of them). ``policy_seconds`` /
    ``env_seconds`` / ``reset_seconds`` of the result are the wall time spent in ``policy.act``,
    ``envs.step`` and ``envs.reset``.
    """
    t0 = time.perf_counter()
    n, g_size = envs.num_envs, envs.group_size
    obs, infos = envs.reset(seed=list(task_seeds), options=list(options) if options is not None else None)
    reset_seconds = time.perf_counter() - t0
    obs = list(obs)
    member_infos = [member_info(infos, i) for i in range(n)]
    rollout = Rollout(
        trajectories=[_new_trajectory(member_infos[i], i, g_size) for i in range(n)], reset_seconds=reset_seconds
    )
    histories: list[list[tuple[str, str]]] = [[] for _ in range(n)]
    state = [state_of(member_infos[i], obs[i]) for i in range(n)]
    won_unknown: set[int] = set()  # trajectories whose env reported no "won": decided from the outcome
    active = np.ones(n, dtype=bool)  # playing its first episode
    group_done = np.zeros(envs.num_groups, dtype=bool)
    k = 0
    while not group_done.all():
        stop_request.raise_if_requested()
        if k >= max_env_steps:
            raise RuntimeError(f"rollout did not finish within {max_env_steps} vector steps; does the env truncate?")
        idx = [i for i in range(n) if active[i]]
        t_act = time.perf_counter()
        outputs = _act(policy, idx, obs, member_infos, histories, seeds.step(seed, k))
        t_env = time.perf_counter()
        rollout.policy_seconds += t_env - t_act
        actions = _actions(idx, outputs, group_done, g_size, n)
        next_obs, rewards, terms, truncs, infos = envs.step(actions)
        rollout.env_seconds += time.perf_counter() - t_env
        next_obs = list(next_obs)
        for i, out in zip(idx, outputs):
            ended = bool(terms[i] or truncs[i])
            state[i], step_info = _record_step(
                rollout,
                i,
                out,
                str(actions[i]),
                obs[i],
                next_obs[i],
                member_info(infos, i),
                ended,
                float(rewards[i]),
                state[i],
            )
            histories[i].append((obs[i], str(actions[i])))
            if ended:
                active[i] = False
                if not _take_won(rollout.trajectories[i], step_info):
                    won_unknown.add(i)
        _close_finished_groups(infos, active, group_done, rollout, g_size)
        obs = next_obs
        member_infos = [member_info(infos, i) for i in range(n)]
        k += 1
        if on_step is not None:
            on_step(len(idx))
    for j in won_unknown:
        rollout.trajectories[j].won = rollout.trajectories[j].outcome >= WON_OUTCOME
    rollout.seconds = time.perf_counter() - t0
    return rollout


def _act(
    policy: Policy,
    idx: list[int],
    obs: list[Any],
    member_infos: list[dict[str, Any]],
    histories: list[list[tuple[str, str]]],
    step_seed: int,
) -> list[Any]:
    """The policy's outputs for the playing members ``idx``, one each."""
    if not idx:
        return []
    outputs = policy.act(
        [obs[i] for i in idx], [member_infos[i] for i in idx], [list(histories[i]) for i in idx], seed=step_seed
    )
    if len(outputs) != len(idx):
        raise RuntimeError(f"policy.act returned {len(outputs)} outputs for {len(idx)} observations")
    return outputs


def _actions(idx: list[int], outputs: list[Any], group_done: np.ndarray, g_size: int, n: int) -> list[Any]:
    """One action per env slot: each playing member's, ``None`` for a member that waits for its group.

    Finished members wait (action ignored); members of finished groups play a discarded next
    episode, fed the no-op ``""`` (an invalid action, never recorded).
    """
    actions: list[Any] = ["" if group_done[i // g_size] else None for i in range(n)]
    for i, out in zip(idx, outputs):
        actions[i] = out.action if out.action is not None else ""
    return actions


def _take_won(trajectory: Trajectory, step_info: Mapping[str, Any]) -> bool:
    """Set the trajectory's ``won`` from its last step's info; ``False`` where the env reports none."""
    if "won" not in step_info:
        return False
    trajectory.won = bool(step_info["won"])
    return True


def _new_trajectory(info: Mapping[str, Any], member: int, group_size: int) -> Trajectory:
    """Member ``member``'s trajectory, from its reset info."""
    return Trajectory(
        group=member // group_size,
        member=member,
        task_id=str(info.get("task_id", "")),
        task_type=str(info.get("task_type", "unknown")),
        goal=instruction_of(info),
        privileged=str(info.get("privileged_text", "")),
    )


def _record_step(
    rollout: Rollout,
    i: int,
    out: Any,
    action: str,
    obs: str,
    next_obs: str,
    info: Mapping[str, Any],
    ended: bool,
    reward: float,
    state: str,
) -> tuple[str, Mapping[str, Any]]:
    """Append member ``i``'s step to ``rollout`` (trajectory ``i``: a flat rollout's members are its
    trajectories) and return its next canonical state and the step's own info (an episode's last
    step: the ``final_info`` the vector env kept before its auto-reset)."""
    step_info = info.get("final_info", info) if ended else info
    shown = next_obs if "final_obs" not in info else info["final_obs"]
    nxt = state_of(step_info, shown)
    tr = rollout.trajectories[i]
    rollout.add_step(
        StepRecord(
            traj=i,
            t=tr.length,
            output=out,
            state=state,
            next_state=nxt,
            first_visit=bool(step_info.get("first_visit", nxt != state)),
            reward=reward,
            valid=bool(out.valid) and bool(step_info.get("valid_action", True)),
            action=action,
            obs=str(obs),
            next_obs=str(shown),
        )
    )
    rollout.response_tokens += len(getattr(out, "response_ids", ()) or ())
    tr.length += 1
    return nxt, step_info
