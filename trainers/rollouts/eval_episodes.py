"""Held-out evaluation with a fixed episode list.

An evaluation plays every task of a split ``episodes_per_task`` times (task order and sampling
seeds fixed by ``seed``), so two evaluations of the same :class:`EvalPlan` see the same tasks in
the same order: their per-episode wins can be compared pairwise.
:func:`trainers.statistics.paired_bootstrap_ci` turns two such win vectors into the difference of
success rates with a 95% confidence interval ("did RL help?").

Example:
    >>> import numpy as np
    >>> from trainers.statistics import paired_bootstrap_ci
    >>> start = np.array([0, 1, 0, 0, 1, 0, 0, 1] * 18)
    >>> end = np.array([1, 1, 0, 1, 1, 0, 1, 1] * 18)
    >>> diff, lo, hi = paired_bootstrap_ci(start, end, seed=0)
    >>> round(diff, 3), lo > 0, hi < 1
    (0.375, True, True)
"""

# Imports inside functions: the rollout, the vector env and the baselines (gymnasium, process pools)
# load when episodes are played; reading eval records (the run summary, the lab) needs numpy alone.
from __future__ import annotations

import contextlib
import hashlib
import json
import queue
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from trainers import seeds
from wrappers.errors import UserError

__all__ = [
    "EvalPlan",
    "PanelMismatch",
    "check_same_panel",
    "episode_records",
    "example_episodes",
    "play_episodes",
    "random_baseline",
    "run_eval",
]


@dataclass(frozen=True)
class EvalPlan:
    """Which episodes an evaluation plays: ``task_ids`` in order, each ``episodes_per_task`` times."""

    split: str
    task_ids: tuple[str, ...]
    episodes_per_task: int
    seed: int

    @property
    def num_episodes(self) -> int:
        return len(self.task_ids) * self.episodes_per_task

    def episodes(self) -> list[str]:
        """Task id of each episode (task-major: t0, t0, ..., t1, ...)."""
        return [t for t in self.task_ids for _ in range(self.episodes_per_task)]

    def panel(self) -> str:
        """A digest of the episodes this plan plays: the split, and each episode's task id and task
        seed, in order. Two evaluations can be paired episode by episode only when it is the same.

        >>> a = EvalPlan("valid", ("t1", "t2"), 2, seed=5)
        >>> a.panel() == EvalPlan("valid", ("t1", "t2"), 2, seed=5).panel(), a.panel() == EvalPlan("valid", ("t1", "t2"), 2, seed=6).panel()
        (True, False)
        """

        played = [[task, seeds.eval_task(self.seed, i)] for i, task in enumerate(self.episodes())]
        return hashlib.sha256(json.dumps([self.split, played]).encode("utf-8")).hexdigest()[:16]

    @classmethod
    def for_episodes(cls, split: str, task_ids: Sequence[str], num_episodes: int, seed: int) -> "EvalPlan":
        """At least ``num_episodes`` episodes spread evenly over ``task_ids`` (every task alike).

        Without task ids (an env that picks its task from the reset seed only), ``num_episodes``
        episodes with distinct fixed seeds.
        """
        if not task_ids:
            return cls(split, ("",) * int(num_episodes), 1, int(seed))
        reps = max(1, -(-int(num_episodes) // len(task_ids)))
        return cls(split, tuple(task_ids), reps, int(seed))

    @classmethod
    def for_env(cls, env_fn: Callable[[], Any], split: str, num_episodes: int, seed: int) -> "EvalPlan":
        """:meth:`for_episodes` over the task ids of ``env_fn()``'s split (``env.unwrapped.task_ids``)."""
        env = env_fn()
        try:
            ids = list(getattr(env.unwrapped, "task_ids", None) or [])
        finally:
            env.close()
        return cls.for_episodes(split, ids, num_episodes, seed)


class PanelMismatch(UserError, ValueError):
    """Two evaluations that a paired comparison would pair played different episodes."""


def check_same_panel(first: Any, second: Any, what: str = "the two evaluations") -> None:
    """Refuse to pair two eval records (``eval/panel``) that played different episodes: a paired
    interval assumes episode i of one is episode i of the other. Records from before panels were
    recorded carry none and pass.

    >>> check_same_panel({"eval/panel": "ab"}, {"eval/panel": "ab"})
    >>> try:
    ...     check_same_panel({"eval/panel": "ab"}, {"eval/panel": "cd"})
    ... except PanelMismatch as err:
    ...     print(str(err)[:60])
    the two evaluations played different episodes (panel ab vs c
    """
    a, b = first.get("eval/panel"), second.get("eval/panel")
    if a is not None and b is not None and a != b:
        raise PanelMismatch(
            f"{what} played different episodes (panel {a} vs {b}): a paired difference needs the "
            "same tasks and task seeds on both sides"
        )


def run_eval(
    policy: Any,
    env_fn: Callable[[], Any],
    plan: EvalPlan,
    batch: int = 48,
    on_step: Callable[[int], None] | None = None,
    step_timeout: float | str | None = "auto",
    streams: int = 1,
    processes: bool = False,
) -> Any:
    """Play ``plan`` with ``policy`` (one member per group, sync envs, ``batch`` at a time).

    ``step_timeout`` is passed to :class:`~wrappers.GroupVectorEnv` (a step past it truncates its episode).
    ``streams`` > 1 plays the episodes in that many concurrent streams, each with up to ``batch``
    envs of its own (the episodes go in chunks of ``batch x streams``, each dealt out as one piece a
    stream: episode ``i`` of a chunk to stream ``i mod streams``, so that the copies of one task,
    which cost alike, are spread over the streams), its forward passes at ``torch threads / streams``
    threads. Each piece has its own sampling seed, so the episodes (tasks and task seeds) are those
    of one stream, the actions sampled in them are not; the records do not depend on how the
    streams run:

    * ``processes=False``: each stream's policy calls run in a thread of its own; every env call
      still runs in the calling thread (a step timeout needs its ``SIGALRM``), where it overlaps
      the other streams' forward passes. A policy that scores with a shared model must tolerate
      concurrent ``act`` calls (:class:`agents.score_policy.ScorePolicy` does; the trainer
      refuses other modes).
    * ``processes=True`` (needs ``fork``; a model on the CPU: a forked process cannot use CUDA):
      the first stream plays in the calling process, each other one in a process forked from it
      (a copy of the policy and of its model as they are, envs of its own, its own ``SIGALRM``),
      so no two streams share an interpreter lock. Its step counts reach ``on_step`` while the
      first stream plays, its rollouts when it is done; an error in it is raised here, and an
      error or interrupt here stops it.

    Returns a :class:`trainers.rollouts.rollout.Rollout` whose trajectories follow ``plan.episodes()``.
    """
    from trainers.rollouts.rollout import Rollout

    if int(streams) < 1:
        raise ValueError(f"streams must be >= 1, got {streams}")
    episodes = plan.episodes()
    n = max(1, min(batch * int(streams), len(episodes)))  # each stream: up to batch envs
    pieces: list[tuple[int, list[int]]] = []  # (stream, episode indices): each chunk of n, one piece a stream
    for start in range(0, len(episodes), n):
        chunk = list(range(start, min(start + n, len(episodes))))
        pieces += [(k, chunk[k :: int(streams)]) for k in range(int(streams)) if chunk[k :: int(streams)]]
    n_lanes = max(k for k, _ in pieces) + 1 if pieces else 0
    lanes = [_EvalLane(env_fn, plan, step_timeout, policy, on_step) for _ in range(n_lanes)]
    try:
        if len(lanes) <= 1:
            played = [lanes[0].play(indices) for _, indices in pieces]
        elif processes:
            played = _play_in_processes(lanes, pieces)
        else:
            played = _play_concurrently(lanes, pieces)
    finally:
        for lane in lanes:
            lane.close()
    total = Rollout(trajectories=[None] * len(episodes))  # type: ignore[list-item]  # each filled below
    for (_, indices), rollout in zip(pieces, played):
        for s in rollout.steps:  # a piece's trajectory j is episode indices[j]
            s.traj = indices[s.traj]
        for j, tr in enumerate(rollout.trajectories):
            tr.group = indices[j]
            total.trajectories[indices[j]] = tr
        total.rows += [(indices[traj], i + len(total.steps)) for traj, i in rollout.rows]
        total.steps += rollout.steps
        total.seconds += rollout.seconds
        total.env_seconds += rollout.env_seconds
        total.reset_seconds += rollout.reset_seconds
        total.response_tokens += rollout.response_tokens
    return total


def play_episodes(
    policy: Any,
    env_fn: Callable[[], Any],
    plan: EvalPlan,
    indices: Sequence[int],
    step_timeout: float | str | None = "auto",
) -> Any:
    """Play episodes ``indices`` of ``plan`` (their tasks and task seeds) with ``policy``, one vector
    env of that many members; the rollout (trajectory ``j`` is episode ``indices[j]``)."""
    lane = _EvalLane(env_fn, plan, step_timeout, policy, None)
    try:
        return lane.play(list(indices))
    finally:
        lane.close()


class _EvalLane:
    """One stream of an evaluation: its vector env (rebuilt for a chunk of another width) and
    the chunks it plays. ``env_proxy`` wraps its env when its calls run in another thread."""

    def __init__(
        self,
        env_fn: Callable[[], Any],
        plan: EvalPlan,
        step_timeout: float | str | None,
        policy: Any,
        on_step: Callable[[int], None] | None,
    ) -> None:
        self.env_fn, self.plan, self.step_timeout, self.policy, self.on_step = (
            env_fn,
            plan,
            step_timeout,
            policy,
            on_step,
        )
        self.envs: Any = None
        self.env_proxy: Callable[[Any], Any] = lambda envs: envs

    def play(self, indices: Sequence[int]) -> Any:
        """Play episodes ``indices`` of the plan (its trajectory ``j`` is episode ``indices[j]``)."""
        from trainers.rollouts.rollout import collect_rollout
        from wrappers.group import GroupVectorEnv

        episodes = self.plan.episodes()
        chunk = [episodes[i] for i in indices]
        if self.envs is None or self.envs.num_envs != len(chunk):
            self.close()
            # a finished episode's group is held, not reset to a task nobody plays
            self.envs = GroupVectorEnv(
                self.env_fn,
                num_groups=len(chunk),
                group_size=1,
                backend="sync",
                seed=self.plan.seed,
                step_timeout=self.step_timeout,
                autoreset=False,
            )
        task_seeds = [seeds.eval_task(self.plan.seed, i) for i in indices]
        return collect_rollout(
            self.env_proxy(self.envs),
            self.policy,
            task_seeds,
            seed=seeds.eval_sampling(self.plan.seed, indices[0]),
            options=[{"task_id": t} if t else None for t in chunk],
            on_step=self.on_step,
        )

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()
            self.envs = None


def _play_concurrently(lanes: Sequence[_EvalLane], pieces: Sequence[tuple[int, list[int]]]) -> list[Any]:
    """Each lane plays its pieces (``(lane, episode indices)``) in a thread of its own (the
    policy's forward passes), while this thread runs every env call the lanes make; returns the
    rollouts in the order of ``pieces``."""
    import torch  # the [train] extra

    calls: queue.SimpleQueue = queue.SimpleQueue()
    for lane in lanes:
        lane.env_proxy = lambda envs: _CalledHere(envs, calls)
    threads = max(1, torch.get_num_threads() // len(lanes))
    modes = _TorchModes.of_this_thread()

    def run_lane(k: int) -> dict[int, Any]:
        torch.set_num_threads(threads)
        with modes.apply():
            return {i: lanes[k].play(indices) for i, (lane, indices) in enumerate(pieces) if lane == k}

    before = torch.get_num_threads()
    pool = ThreadPoolExecutor(max_workers=len(lanes), thread_name_prefix="eval-stream")
    futures = [pool.submit(run_lane, k) for k in range(len(lanes))]
    try:
        _serve(calls, futures)
    finally:
        pool.shutdown(wait=True)
        torch.set_num_threads(before)
    played: dict[int, Any] = {}
    for f in futures:
        played.update(f.result())  # a lane's error is raised here
    return [played[i] for i in range(len(pieces))]


def _play_in_processes(lanes: Sequence[_EvalLane], pieces: Sequence[tuple[int, list[int]]]) -> list[Any]:
    """Lane 0 plays its pieces here, every other lane in a process forked from this one
    (:func:`trainers.forked.run_forked`); returns the rollouts in the order of ``pieces``."""
    from trainers.forked import run_forked  # multiprocessing loads only where evaluation forks

    on_step = lanes[0].on_step

    def share(k: int) -> Callable[[Callable[[int], None]], dict[int, Any]]:
        def play(step: Callable[[int], None]) -> dict[int, Any]:
            lanes[k].on_step = step
            try:
                return {i: lanes[k].play(indices) for i, (lane, indices) in enumerate(pieces) if lane == k}
            finally:
                lanes[k].on_step = on_step
                if k:  # a forked lane's envs end with its process
                    lanes[k].close()

        return play

    played: dict[int, Any] = {}
    for part in run_forked([share(k) for k in range(len(lanes))], on_step=on_step, name="evaluation stream"):
        played.update(part)
    return [played[i] for i in range(len(pieces))]


def _serve(calls: "queue.SimpleQueue", futures: Sequence[Future]) -> None:
    """Run the env calls the lanes queue until every lane has finished. If one of them raises
    here (an interrupt), the calls still queued or queued later fail with it, so that every
    lane stops at its next env call."""
    try:
        while not all(f.done() for f in futures):
            try:
                fn, args, done = calls.get(timeout=0.05)
            except queue.Empty:
                continue
            try:
                done.set_result(fn(*args))
            except Exception as exc:  # the lane that made the call raises it
                done.set_exception(exc)
            except BaseException as exc:  # an interrupt: that lane stops too
                done.set_exception(RuntimeError(f"evaluation stopped: {type(exc).__name__}"))
                raise
    except BaseException as exc:
        stopped = RuntimeError(f"evaluation stopped: {type(exc).__name__}")
        while not all(f.done() for f in futures):
            try:
                _, _, done = calls.get(timeout=0.05)
                done.set_exception(stopped)
            except queue.Empty:
                continue
        raise


class _CalledHere:
    """A vector env whose ``reset`` / ``step`` run in the thread serving ``calls``; attributes are read directly."""

    def __init__(self, envs: Any, calls: "queue.SimpleQueue") -> None:
        self._envs, self._calls = envs, calls

    def __getattr__(self, name: str) -> Any:
        return getattr(self._envs, name)

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        done: Future = Future()
        self._calls.put((fn, args, done))
        return done.result()

    def reset(self, **kwargs: Any) -> Any:
        return self._call(lambda: self._envs.reset(**kwargs))

    def step(self, actions: Any) -> Any:
        return self._call(self._envs.step, actions)


@dataclass(frozen=True)
class _TorchModes:
    """The grad mode and autocast state of a thread, to apply in another (both are per thread)."""

    grad: bool
    autocast: tuple[tuple[str, Any], ...]  # (device type, dtype) of each enabled autocast

    @classmethod
    def of_this_thread(cls) -> "_TorchModes":
        import torch  # the [train] extra

        kinds = [d for d in ("cpu", "cuda") if torch.is_autocast_enabled(d)]
        return cls(torch.is_grad_enabled(), tuple((d, torch.get_autocast_dtype(d)) for d in kinds))

    @contextlib.contextmanager
    def apply(self) -> Any:
        import torch  # the [train] extra

        with contextlib.ExitStack() as stack:
            stack.enter_context(torch.set_grad_enabled(self.grad))
            for device, dtype in self.autocast:
                stack.enter_context(torch.autocast(device_type=device, dtype=dtype))
            yield


def episode_records(rollout: Any) -> dict[str, list[Any]]:
    """Per-episode columns of an evaluation (stored in the eval record for later comparison)."""
    return {
        "task_id": [t.task_id for t in rollout.trajectories],
        "won": [int(bool(t.won)) for t in rollout.trajectories],
        "score": [float(t.outcome) for t in rollout.trajectories],
    }


def example_episodes(rollout: Any, max_actions: int = 12, max_chars: int = 160) -> dict[str, dict[str, Any]]:
    """One won and one lost episode of an evaluation (the first of each), abridged: its episode
    index, task, outcome, the actions it took (the first ``max_actions``) and its last observation
    (``max_chars``). Either is absent when no episode ended that way.

    >>> from types import SimpleNamespace as S
    >>> r = S(trajectories=[S(won=False, task_id="t0", task_type="pick", outcome=0.0, length=2)],
    ...       steps=[S(traj=0, t=1, action="b", next_obs="end"), S(traj=0, t=0, action="a", next_obs="mid")])
    >>> example_episodes(r)["lost"]["actions"], "won" in example_episodes(r)
    (['a', 'b'], False)
    """
    by_traj: dict[int, list[Any]] = {}
    for s in rollout.steps:
        by_traj.setdefault(s.traj, []).append(s)
    out: dict[str, dict[str, Any]] = {}
    for j, traj in enumerate(rollout.trajectories):
        kind = "won" if traj.won else "lost"
        if kind in out:
            continue
        steps = sorted(by_traj.get(j, []), key=lambda s: s.t)
        last = steps[-1].next_obs.strip() if steps else ""
        out[kind] = {
            "episode": j,
            "task_id": traj.task_id,
            "task_type": traj.task_type,
            "outcome": float(traj.outcome),
            "steps": int(traj.length),
            "actions": [s.action for s in steps[:max_actions]],
            "last_observation": last[:max_chars] + ("..." if len(last) > max_chars else ""),
        }
    return out


def random_baseline(seed: int = 0) -> Any:
    """The evaluation's random baseline: :class:`agents.baselines.RandomAgent` drawing a uniformly
    random admissible command that can change the state (``look``/``inventory``/``examine``/``help``
    left out), with the rollout's policy interface."""
    from agents.baselines import RandomAgent, passive

    return RandomAgent(seed, fallback="", leave_out=passive, step_outputs=True)
