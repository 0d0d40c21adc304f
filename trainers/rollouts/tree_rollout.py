"""Tree rollouts: spend a group's decisions where progress is, by branching from promising partial trajectories.

A flat rollout plays G independent episodes of a task. A tree rollout (after PATR, arXiv
2607.15610) grows the task's group as a tree instead:

1. start ``branches`` (B0) branches on the task;
2. advance every active branch ``interval`` (K) decisions;
3. score each active partial trajectory (:class:`Scorer`); prune the degenerate ones (score below
   the median minus ``prune_margin``, or one action taken ``repeat_limit`` times) and keep them
   as leaves; replace each of the ``top_k`` best by ``children`` (M) children that share its
   prefix and sample their own continuations;
4. repeat until every branch has ended or the tree's decision budget is spent.

The leaves (ended, pruned or cut by the budget) are the task's group for any estimator; a step
shared by several leaves is one step of the batch (:meth:`trainers.rollouts.rollout.Rollout.merge_rows`).

**Forking by replay.** The package's envs are deterministic given the reset seed and the action
prefix, so a child in a free member slot is a reset plus a replay of the parent's actions; each
replayed step must reproduce the recorded observation, else :class:`NondeterministicEnvError`
(an env that is not deterministic cannot be branched). Replay steps are counted apart from
policy decisions (``rollout/replay_steps``). The first child keeps the parent's slot and env: no
replay. A fork is ``GroupVectorEnv.fork`` (its ``reset_members`` / ``step_members``
drive given members outside the group schedule), on every backend: sync, processes and Ray.

**Budget.** Each tree may take at most ``budget`` policy decisions (default ``group_size x
max_steps``, the flat rollout's cap for one group): before a vector step, a tree whose active
branches would pass it ends its lowest-scored ones (leaves, cut), and a fork is made only when
its decisions still fit. ``B0 <= group_size`` and at most ``group_size`` branches are active at
a time (one per member slot).

**Outcome of a leaf.** A branch that ended in the env keeps its outcome; a pruned or cut branch
has outcome 0 and counts as a failure: pruned branches stay in the batch as negatives.

>>> from types import SimpleNamespace as Partial
>>> branches = [Partial(first_visits=[True, True], actions=["a", "b"]), Partial(first_visits=[True, False], actions=["a", "a"])]
>>> CoverageScorer(loop_penalty=0.5).score(branches).round(3).tolist()  # 2/2 - 0; 1/2 - 0.5 * 1/2
[1.0, 0.25]
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, Protocol, Sequence

import numpy as np

from agents.contract import Policy
from trainers import seeds, stop_request
from trainers.rollouts.rollout import WON_OUTCOME, Rollout, StepRecord, Trajectory, instruction_of, state_of
from wrappers.errors import UserError

__all__ = [
    "CoverageScorer",
    "NondeterministicEnvError",
    "RandomScorer",
    "Scorer",
    "SCORERS",
    "TreeConfig",
    "collect_tree_rollout",
    "make_scorer",
]

SCORERS: tuple[str, ...] = ("coverage", "random")


class NondeterministicEnvError(UserError, RuntimeError):
    """A replayed action prefix did not reproduce the recorded observations: the env cannot be branched."""


@dataclass(frozen=True)
class TreeConfig:
    """The knobs of a tree rollout (the trainer's ``tree_*`` fields; defaults after PATR).

    branches: B0, branches started per task. interval: K, decisions between scoring rounds.
    children: M, children replacing an expanded branch. top_k: branches expanded per round.
    prune_margin: a branch scoring below the median minus this is pruned. repeat_limit: a
    branch that took one action this many times is pruned. budget: policy decisions per tree
    (0: group_size x max_steps). scorer: ``coverage`` | ``random``. loop_penalty: the coverage
    scorer's weight on the repeated-action rate. seed: the random scorer's seed.
    """

    branches: int = 4
    interval: int = 4
    children: int = 2
    top_k: int = 2
    prune_margin: float = 0.5
    repeat_limit: int = 6
    budget: int = 0
    scorer: Literal["coverage", "random"] = "coverage"
    loop_penalty: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("branches", "interval", "children", "top_k", "repeat_limit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"tree_{name} must be an integer >= 1, got {value!r}")
        if self.budget < 0:
            raise ValueError(f"tree_budget must be >= 0 (0: group_size x max_steps), got {self.budget}")
        if 0 < self.budget < self.branches:  # the cut branches would be leaves that never played, counted as failures
            raise ValueError(
                f"tree_budget {self.budget} < tree_branches {self.branches}: every branch started needs "
                "at least one decision; raise --tree-budget or lower --tree-branches"
            )
        if self.scorer not in SCORERS:
            raise ValueError(f"tree_scorer must be one of {', '.join(SCORERS)}, got {self.scorer!r}")


class PartialTrajectory(Protocol):
    """What a scorer reads of a branch: its first-visit flags and actions so far."""

    @property
    def first_visits(self) -> list[bool]: ...

    @property
    def actions(self) -> list[str]: ...


class Scorer(Protocol):
    """Scores the active partial trajectories of one tree (higher: more promising)."""

    def score(self, branches: Sequence[PartialTrajectory]) -> np.ndarray: ...


def _repeat_rate(actions: Sequence[str]) -> float:
    """Share of the actions that the branch had already taken."""
    seen: set[str] = set()
    repeats = 0
    for a in actions:
        repeats += a in seen
        seen.add(a)
    return repeats / max(len(actions), 1)


@dataclass(frozen=True)
class CoverageScorer:
    """ProGPO's own signal as a process score: the partial first-visit coverage rate (new states
    per decision) minus ``loop_penalty`` times the share of decisions that repeated an action."""

    loop_penalty: float = 0.5

    def score(self, branches: Sequence[PartialTrajectory]) -> np.ndarray:
        return np.array(
            [
                sum(b.first_visits) / max(len(b.first_visits), 1) - self.loop_penalty * _repeat_rate(b.actions)
                for b in branches
            ],
            dtype=np.float64,
        )


class RandomScorer:
    """The control: uniform random scores (branching, but not where progress is)."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def score(self, branches: Sequence[PartialTrajectory]) -> np.ndarray:
        return self.rng.random(len(branches))


def make_scorer(cfg: TreeConfig) -> Scorer:
    """The scorer ``cfg.scorer`` names."""
    return CoverageScorer(cfg.loop_penalty) if cfg.scorer == "coverage" else RandomScorer(cfg.seed)


@dataclass
class _Branch:
    """One branch: the env slot it plays in and its path (indices into ``steps``, the rollout's
    step records, from which its actions, first visits and observations are read)."""

    tree: int
    slot: int
    steps: list[StepRecord]
    path: list[int] = field(default_factory=list)
    obs: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    state: str = ""
    status: str = "active"  # active | ended | pruned | cut | expanded
    outcome: float = 0.0
    won: bool | None = None

    @property
    def actions(self) -> list[str]:
        return [self.steps[i].action for i in self.path]

    @property
    def first_visits(self) -> list[bool]:
        return [self.steps[i].first_visit for i in self.path]

    @property
    def history(self) -> list[tuple[str, str]]:
        """(observation, action) pairs so far: what the policy reads."""
        return [(self.steps[i].obs, self.steps[i].action) for i in self.path]

    def child(self, slot: int) -> "_Branch":
        return _Branch(self.tree, slot, self.steps, list(self.path), self.obs, dict(self.info), self.state)


@dataclass
class _Tree:
    group: int
    task_seed: int
    options: Mapping[str, Any] | None
    reset_obs: str
    task_id: str = ""
    task_type: str = "unknown"
    goal: str = ""
    privileged: str = ""
    branches: list[_Branch] = field(default_factory=list)
    decisions: int = 0

    def active(self) -> list[_Branch]:
        return [b for b in self.branches if b.status == "active"]

    def free_slots(self, slots: Sequence[int]) -> list[int]:
        used = {b.slot for b in self.active()}
        return [s for s in slots if s not in used]


@dataclass
class _Counts:
    replay_steps: int = 0
    branches: int = 0
    pruned: int = 0
    cut: int = 0
    forks: int = 0


class _TreeCollector:
    """The state of one tree rollout over the vector env's members (see the module docs)."""

    def __init__(self, envs: Any, policy: Policy, cfg: TreeConfig, max_steps: int, scorer: Scorer) -> None:
        self.envs, self.policy, self.cfg, self.scorer = envs, policy, cfg, scorer
        self.g_size = envs.group_size
        if cfg.branches > self.g_size:
            raise ValueError(
                f"tree_branches {cfg.branches} > group_size {self.g_size}: each branch needs a member slot"
            )
        self.budget = cfg.budget or self.g_size * max_steps
        self.rollout = Rollout()
        self.trees: list[_Tree] = []
        self.counts = _Counts()

    def slots(self, group: int) -> range:
        """The member slots of ``group``'s tree."""
        return range(group * self.g_size, (group + 1) * self.g_size)

    # -- start and fork ----------------------------------------------------------------------
    def start(self, task_seeds: Sequence[int], options: Sequence[Mapping[str, Any] | None] | None) -> None:
        for g, task in enumerate(task_seeds):
            opt = options[g] if options is not None else None
            slots = list(self.slots(g))[: self.cfg.branches]
            t_reset = time.perf_counter()
            results = self.envs.reset_members(slots, [int(task)] * len(slots), [opt] * len(slots))
            self.rollout.reset_seconds += time.perf_counter() - t_reset
            obs0, info0 = results[0]
            tree = _Tree(
                g,
                int(task),
                opt,
                str(obs0),
                str(info0.get("task_id", "")),
                str(info0.get("task_type", "unknown")),
                instruction_of(info0),
                str(info0.get("privileged_text", "")),
            )
            for slot, (obs, info) in zip(slots, results):
                info = dict(info)
                tree.branches.append(
                    _Branch(g, slot, self.rollout.steps, obs=str(obs), info=info, state=state_of(info, str(obs)))
                )
                self.counts.branches += 1
            self.trees.append(tree)

    def fork(self, tree: _Tree, parent: _Branch, slot: int) -> _Branch | None:
        """A child of ``parent`` in ``slot``: reset to the task, replay the parent's actions, check
        every observation. A crash while replaying abandons the fork (None)."""
        actions = [self.rollout.steps[i].action for i in parent.path]
        (obs, info), results = self.envs.fork(slot, tree.task_seed, tree.options, actions)
        if str(obs) != tree.reset_obs:
            raise NondeterministicEnvError(
                f"tree rollout: reset(seed={tree.task_seed}) gave another first observation "
                "than before; this env cannot be branched (use --rollout flat)"
            )
        for t, (i, result) in enumerate(zip(parent.path, results)):
            self.counts.replay_steps += 1
            if not isinstance(result, tuple):
                return None
            obs, info = result[0], result[4]
            if str(obs) != self.rollout.steps[i].next_obs:
                raise NondeterministicEnvError(
                    f"tree rollout: replaying step {t} ({actions[t]!r}) of task seed "
                    f"{tree.task_seed} gave another observation than recorded; this env "
                    "cannot be branched (use --rollout flat)"
                )
        child = parent.child(slot)
        child.info = dict(info)
        self.counts.forks += 1
        return child

    # -- one vector step ---------------------------------------------------------------------
    def enforce_budget(self) -> None:
        """End the lowest-scored branches of a tree whose next step would pass its budget."""
        for tree in self.trees:
            active = tree.active()
            over = tree.decisions + len(active) - self.budget
            if over > 0:
                order = np.argsort(self.scorer.score(active), kind="stable")
                for j in order[:over]:
                    active[j].status = "cut"
                    self.counts.cut += 1

    def step(self, k: int, seed: int) -> int:
        branches = [b for tree in self.trees for b in tree.active()]
        if not branches:
            return 0
        t_act = time.perf_counter()
        outputs = self.policy.act(
            [b.obs for b in branches],
            [b.info for b in branches],
            [b.history for b in branches],
            seed=seeds.step(seed, k),
        )
        t_env = time.perf_counter()
        self.rollout.policy_seconds += t_env - t_act
        if len(outputs) != len(branches):
            raise RuntimeError(f"policy.act returned {len(outputs)} outputs for {len(branches)} observations")
        actions = [out.action if out.action is not None else "" for out in outputs]
        results = self.envs.step_members([b.slot for b in branches], actions)
        self.rollout.env_seconds += time.perf_counter() - t_env
        for b, out, action, result in zip(branches, outputs, actions, results):
            self.record(b, out, str(action), result)
            self.trees[b.tree].decisions += 1
        return len(branches)

    def record(self, b: _Branch, out: Any, action: str, result: Any) -> None:
        if isinstance(result, tuple):
            obs, reward, term, trunc, info = result
            info = dict(info)
        else:  # the member crashed: its branch ends, truncated, as a flat rollout's episode would
            obs, reward, term, trunc, info = b.obs, 0.0, False, True, {"worker_error": getattr(result, "reason", "")}
        nxt = state_of(info, str(obs))
        self.rollout.steps.append(
            StepRecord(
                traj=-1,
                t=len(b.path),
                output=out,
                state=b.state,
                next_state=nxt,
                first_visit=bool(info.get("first_visit", nxt != b.state)),
                reward=float(reward),
                valid=bool(out.valid) and bool(info.get("valid_action", True)),
                action=action,
                obs=b.obs,
                next_obs=str(obs),
            )
        )
        self.rollout.response_tokens += len(getattr(out, "response_ids", ()) or ())
        b.path.append(len(self.rollout.steps) - 1)
        b.obs, b.info, b.state = str(obs), info, nxt
        if term or trunc:
            b.status = "ended"
            b.outcome = float(info["outcome"]) if "outcome" in info else float(reward)
            b.won = bool(info["won"]) if "won" in info else None

    # -- scoring rounds ----------------------------------------------------------------------
    def round(self, tree: _Tree) -> None:
        """Prune the degenerate branches, then replace the best ones by their children."""
        cfg = self.cfg
        active = tree.active()
        if not active:
            return
        scores = self.scorer.score(active)
        median = float(np.median(scores))
        keep: list[tuple[float, _Branch]] = []
        for b, s in zip(active, scores):
            looping = max(Counter(b.actions).values(), default=0) >= cfg.repeat_limit
            if s < median - cfg.prune_margin or looping:
                b.status = "pruned"
                self.counts.pruned += 1
            else:
                keep.append((float(s), b))
        keep.sort(key=lambda pair: -pair[0])  # stable: ties keep the branches' order
        for _, parent in keep[: cfg.top_k]:
            self.expand(tree, parent)

    def expand(self, tree: _Tree, parent: _Branch) -> None:
        """Replace ``parent`` by up to M children (the first keeps its slot and env), as far as free
        slots and the budget allow; with no room for a second child it goes on unchanged."""
        free = tree.free_slots(self.slots(tree.group))
        room = self.budget - tree.decisions - len(tree.active())  # decisions left after one more step of each
        extra = min(self.cfg.children - 1, len(free), max(room, 0))
        if extra < 1:
            return
        children = [parent.child(parent.slot)]
        for slot in free[:extra]:
            child = self.fork(tree, parent, slot)
            if child is not None:
                children.append(child)
        if len(children) < 2:
            return
        parent.status = "expanded"
        tree.branches.extend(children)
        self.counts.branches += len(children)

    # -- the result --------------------------------------------------------------------------
    def finish(self) -> Rollout:
        rollout = self.rollout
        leaves = [b for tree in self.trees for b in tree.branches if b.status in ("ended", "pruned", "cut")]
        owner = np.full(len(rollout.steps), -1, dtype=np.int64)
        for j, b in enumerate(leaves):
            won = b.won if b.won is not None else b.outcome >= WON_OUTCOME
            tree = self.trees[b.tree]
            ended = b.status == "ended"
            rollout.trajectories.append(
                Trajectory(
                    group=b.tree,
                    member=b.slot,
                    task_id=tree.task_id,
                    task_type=tree.task_type,
                    outcome=b.outcome if ended else 0.0,
                    length=len(b.path),
                    won=bool(won) if ended else False,
                    goal=tree.goal,
                    privileged=tree.privileged,
                )
            )
            for s in b.path:
                if owner[s] < 0:
                    owner[s] = j
        for rec, leaf in zip(rollout.steps, owner):
            rec.traj = int(leaf)
        rollout.rows = [(j, i) for j, b in enumerate(leaves) for i in b.path]
        rollout.tree_stats = {
            "rollout/decisions": float(len(rollout.steps)),
            "rollout/replay_steps": float(self.counts.replay_steps),
            "rollout/leaves": float(len(leaves)),
            "rollout/branches": float(self.counts.branches),
            "rollout/pruned": float(self.counts.pruned),
            "rollout/budget_cut": float(self.counts.cut),
            "rollout/forks": float(self.counts.forks),
        }
        return rollout


def collect_tree_rollout(
    envs: Any,
    policy: Policy,
    task_seeds: Sequence[int],
    seed: int,
    cfg: TreeConfig,
    max_steps: int,
    on_step: Callable[[int], None] | None = None,
    options: Sequence[Mapping[str, Any] | None] | None = None,
    scorer: Scorer | None = None,
) -> Rollout:
    """One tree per task of ``task_seeds`` over the members of ``envs`` (a
    :class:`wrappers.GroupVectorEnv`; group g's G members are tree g's slots). ``seed`` seeds
    the policy's sampling as :func:`trainers.rollouts.rollout.collect_rollout` does; ``scorer`` defaults to
    :func:`make_scorer` ``(cfg)``. Returns a :class:`~trainers.rollouts.rollout.Rollout` whose trajectories
    are the leaves, with their ``rows`` and ``tree_stats`` set."""
    t0 = time.perf_counter()
    if len(task_seeds) != envs.num_groups:
        raise ValueError(f"task_seeds: one per group ({envs.num_groups}), got {len(task_seeds)}")
    col = _TreeCollector(envs, policy, cfg, max_steps, scorer or make_scorer(cfg))
    try:
        col.start(task_seeds, options)
        k = 0
        while any(tree.active() for tree in col.trees):
            stop_request.raise_if_requested()
            col.enforce_budget()
            n = col.step(k, seed)
            k += 1
            if on_step is not None:
                on_step(n)
            if k % cfg.interval == 0:
                for tree in col.trees:
                    col.round(tree)
        rollout = col.finish()
    finally:  # on every way out, an error or a stop included: its members were driven one by one, so
        envs.require_reset()  # the vector env's own view of them is stale
    rollout.seconds = time.perf_counter() - t0
    return rollout
