"""The body of :class:`GroupVectorEnv` and its task schedule (:class:`GroupSeedSchedule`); the
package's docstring (:mod:`wrappers.group`) describes the layout, the schedule, the autoreset
mode and the infos."""

# Over 500 lines: one class, whose reset, step, group autoreset and forking share the members' state.
from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from wrappers.group.member_pools import (
    AsyncMemberPool,
    Crashed,
    MemberError,
    SyncMemberPool,
    UnsentActionError,
    check_timeout,
    describe_error,
)
from wrappers.signals import TAU_R
from wrappers.signals import all_failed as outcomes_all_failed

if TYPE_CHECKING:
    from wrappers.group.ray_pool import RayMemberPool

__all__ = ["DEFAULT_STEP_TIMEOUT", "GroupSeedSchedule", "GroupVectorEnv"]

#: A per-group seed is the task seed itself, reported in ``infos["task_seed"]`` (an int64 array).
_MAX_TASK_SEED = 2**63 - 1

DEFAULT_STEP_TIMEOUT = 600.0
"""Seconds one member step may take when ``step_timeout="auto"`` and the env declares none."""


def _check_int(name: str, value: Any, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:  # type: ignore[operator, unused-ignore]  # an Integral compares with an int; its stub has no __lt__
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:  # type: ignore[operator]  # as above
        raise ValueError(f"{name} must be an int <= {maximum} (2**63 - 1), got {value!r}")
    return int(value)


_SCALARS = (bool, int, float)


def _info_array(values: Sequence[Any], idx: Sequence[int], n: int, force_object: bool = False) -> np.ndarray:
    """One info key's values (member ``idx[k]`` holds ``values[k]``) as an array of ``n`` rows.

    * every value of one Python scalar type or one NumPy scalar dtype: an array of that dtype
      (absent members 0, their ``_key`` mask False), as Gymnasium's ``_add_info``;
    * ints and floats mixed (no bools): float64;
    * every value an ndarray of one shape and dtype: stacked, absent rows zero;
    * anything else (``None`` among numbers, str, dict, list, mixed types): an object array
      holding each value as it is (absent members ``None``).
    """
    first = values[0]
    kinds = {type(v) for v in values}
    if force_object:
        array = np.full(n, None, dtype=object)
    elif len(kinds) == 1 and (type(first) in _SCALARS or isinstance(first, np.number)):
        array = np.zeros(n, dtype=type(first))
    elif kinds <= {int, float}:
        array = np.zeros(n, dtype=np.float64)
    elif (
        len(kinds) == 1
        and isinstance(first, np.ndarray)
        and all(v.shape == first.shape and v.dtype == first.dtype for v in values)
    ):
        array = np.zeros((n, *first.shape), dtype=first.dtype)
    else:
        array = np.full(n, None, dtype=object)
    for i, v in zip(idx, values):
        array[i] = v
    return array


class GroupSeedSchedule:
    """Deterministic task seeds: ``seed_for(group, episode)`` -> int in [0, 2**32).

    From one vector seed ``s``: ``SeedSequence(s, spawn_key=(group, episode))``. From a list of
    per-group seeds: episode 0 uses the given seed itself, episode k >= 1
    ``SeedSequence(seeds[group], spawn_key=(k,))``.

    Example:
        >>> a, b = GroupSeedSchedule(0, num_groups=2), GroupSeedSchedule(0, num_groups=2)
        >>> a.seed_for(1, 3) == b.seed_for(1, 3), a.seed_for(0, 0) != a.seed_for(1, 0)
        (True, True)
        >>> GroupSeedSchedule([11, 12], num_groups=2).seed_for(1, 0)
        12
    """

    def __init__(self, seed: int | Sequence[int] | None, num_groups: int) -> None:
        self.num_groups = num_groups
        self.per_group: list[int] | None = None
        if seed is None:
            self.entropy: int | None = int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]  # SeedSequence() drew its own entropy, an int; the stub allows a sequence
        elif isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
            self.entropy = _check_int("seed", seed, 0)
        else:
            seeds = list(seed)  # type: ignore[arg-type]  # the int case returned above (numbers.Integral does not narrow)
            if len(seeds) != num_groups:
                raise ValueError(f"seed: expected {num_groups} per-group seeds, got {len(seeds)}")
            self.per_group = [_check_int("seed (each per-group seed)", s, 0, _MAX_TASK_SEED) for s in seeds]
            self.entropy = None

    def seed_for(self, group: int, episode: int) -> int:
        if self.per_group is not None:
            if episode == 0:
                return self.per_group[group]
            seq = np.random.SeedSequence(self.per_group[group], spawn_key=(episode,))
        else:
            seq = np.random.SeedSequence(self.entropy, spawn_key=(group, episode))
        return int(seq.generate_state(1, np.uint32)[0])


#: the backends each backend-specific argument of GroupVectorEnv applies to
_BACKEND_OPTIONS = {
    "context": ("async",),
    "reset_timeout": ("async", "ray"),
    "num_cpus": ("ray",),
    "resources": ("ray",),
    "members_per_actor": ("ray",),
    "ray_init": ("ray",),
}


def _check_backend_options(backend: str, **given: Any) -> None:
    """One error naming every argument that was set but does not apply to ``backend``."""
    wrong = [name for name, value in given.items() if value is not None and backend not in _BACKEND_OPTIONS[name]]
    if wrong:
        where = sorted({b for name in wrong for b in _BACKEND_OPTIONS[name]})
        raise ValueError(
            f"{', '.join(wrong)}: apply to backend={' or '.join(repr(b) for b in where)} only, not {backend!r}"
        )


def _resolve_env_fns(
    env_fns_or_id: str | Callable[..., gym.Env] | Sequence[Callable[..., gym.Env]],
    num_envs: int,
    env_kwargs: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None,
) -> list[Callable[[], gym.Env]]:
    """One zero-argument, picklable env factory per member."""
    if env_kwargs is None:
        kwargs_list: list[dict[str, Any]] = [{} for _ in range(num_envs)]
    elif isinstance(env_kwargs, Mapping):
        kwargs_list = [dict(env_kwargs) for _ in range(num_envs)]
    elif isinstance(env_kwargs, Sequence) and not isinstance(env_kwargs, (str, bytes)):
        if len(env_kwargs) != num_envs or not all(isinstance(k, Mapping) for k in env_kwargs):
            raise ValueError(
                f"env_kwargs: a list must hold one dict per member ({num_envs} = num_groups * group_size), "
                f"got {len(env_kwargs)} entries"
            )
        kwargs_list = [dict(k) for k in env_kwargs]
    else:
        raise TypeError(
            f"env_kwargs must be None, a dict or a list of {num_envs} dicts, got {type(env_kwargs).__name__}"
        )

    if isinstance(env_fns_or_id, str):
        try:
            spec = gym.spec(env_fns_or_id)
        except gym.error.Error as err:
            raise ValueError(
                f"env_fns_or_id: unknown environment id {env_fns_or_id!r} ({err}). Import the package that "
                "registers it first (e.g. `import progpo_envs`) or use the 'module:EnvId' form."
            ) from err
        # The EnvSpec (not the id) travels to workers: a fresh process has not imported the
        # module that registered the id, but gym.make(spec) imports the entry point itself.
        return [functools.partial(gym.make, spec, **kw) for kw in kwargs_list]
    if callable(env_fns_or_id):
        return [functools.partial(env_fns_or_id, **kw) for kw in kwargs_list]
    if isinstance(env_fns_or_id, Sequence):
        fns: list[Callable[..., gym.Env]] = list(env_fns_or_id)  # type: ignore[arg-type]  # a str returned above
        if len(fns) != num_envs:
            raise ValueError(
                f"env_fns_or_id: a list must hold one env factory per member ({num_envs} = num_groups * group_size), "
                f"got {len(fns)}"
            )
        bad = [i for i, fn in enumerate(fns) if not callable(fn)]
        if bad:
            raise TypeError(f"env_fns_or_id: entries {bad} are not callables returning an env")
        return [functools.partial(fn, **kw) for fn, kw in zip(fns, kwargs_list)]
    raise TypeError(
        f"env_fns_or_id must be a registered env id (str), an env factory or a list of them, got {type(env_fns_or_id).__name__}"
    )


def _make_pool(
    backend: str,
    env_fns: list[Callable[[], gym.Env]],
    step_timeout: float | None,
    context: str | None,
    reset_timeout: float | None,
    num_cpus: float | None,
    resources: Mapping[str, float] | None,
    members_per_actor: int | None,
    ray_init: Mapping[str, Any] | None,
) -> SyncMemberPool | AsyncMemberPool | RayMemberPool:
    """The member pool of ``backend``: in this process, one process per member, or Ray actors."""
    if backend == "sync":
        return SyncMemberPool(env_fns, step_timeout=step_timeout)
    if backend == "ray":
        from wrappers.group.ray_pool import RayMemberPool  # lazy: ray is an optional dependency

        return RayMemberPool(
            env_fns,
            num_cpus=1.0 if num_cpus is None else num_cpus,
            resources=resources,
            members_per_actor=members_per_actor or 1,
            step_timeout=step_timeout,
            reset_timeout=reset_timeout,
            ray_init=ray_init,
        )
    return AsyncMemberPool(env_fns, context=context, step_timeout=step_timeout, reset_timeout=reset_timeout)


class GroupVectorEnv(VectorEnv):
    """B groups of G members; a group's members share one task per episode (see module docs).

    Args:
        env_fns_or_id: a registered env id (``gym.make`` is called per member), one env factory
            used for every member, or a list of ``num_groups * group_size`` factories.
        num_groups: B >= 1.
        group_size: G >= 1.
        backend: ``"sync"`` (members stepped in this process), ``"async"`` (one worker process
            per member, restarted when it dies; its episode is then reported truncated with
            ``infos["worker_restarted"]``) or ``"ray"`` (members as Ray actors on any node of a
            Ray cluster, same semantics as ``"async"``: :mod:`wrappers.group.ray_pool`).
        seed: vector seed of the task schedule (``None``: random, see ``schedule.entropy``);
            ``reset(seed=...)`` replaces it.
        tau_r: success threshold: a group is all-failed when every outcome < ``tau_r``.
        env_kwargs: keyword arguments for each member's factory: one dict for all, or a list of
            one dict per member.
        context: multiprocessing start method for ``"async"`` (default forkserver, else spawn).
        step_timeout: seconds one member step may take before it is treated as a crash (async:
            the worker is killed and restarted; sync: the step is interrupted, see the module
            docs) and its episode reported truncated. ``"auto"`` (default): the env's
            ``metadata["step_timeout"]`` if set, else :data:`DEFAULT_STEP_TIMEOUT`; ``None``
            waits forever.
        reset_timeout: ``"async"`` / ``"ray"`` only: the same for one reset (resets of real
            engines are slower than steps); a reset that times out is retried once on a fresh worker.
        num_cpus: ``"ray"`` only: CPUs each actor reserves (default 1; fractions allowed).
        resources: ``"ray"`` only: custom Ray resources each actor reserves.
        members_per_actor: ``"ray"`` only: members packed into one actor (default 1).
        ray_init: ``"ray"`` only: ``ray.init`` keyword arguments, used when this process has not
            joined a cluster yet (default: ``RAY_ADDRESS``, else a local Ray).
        autoreset: ``True`` (default): a finished group starts its next task in the same step.
            ``False``: a finished group is held: its members keep waiting on their final
            observations (no-op steps, ``infos["waiting"]`` True) until ``reset()``, the layout of
            a fixed-size rollout batch (verl-agent's collector) where a group plays one task.

    Raises:
        ValueError: a bad argument value, the message naming the argument.
        TypeError: an argument of the wrong type, the message naming the argument.
    """

    def __init__(
        self,
        env_fns_or_id: str | Callable[..., gym.Env] | Sequence[Callable[..., gym.Env]],
        num_groups: int,
        group_size: int,
        backend: str = "sync",
        seed: int | None = None,
        tau_r: float = TAU_R,
        env_kwargs: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        context: str | None = None,
        step_timeout: float | str | None = "auto",
        reset_timeout: float | None = None,
        num_cpus: float | None = None,
        resources: Mapping[str, float] | None = None,
        members_per_actor: int | None = None,
        ray_init: Mapping[str, Any] | None = None,
        autoreset: bool = True,
    ) -> None:
        self.num_groups = _check_int("num_groups", num_groups, 1)
        self.group_size = _check_int("group_size", group_size, 1)
        if backend not in ("sync", "async", "ray"):
            raise ValueError(f"backend must be 'sync', 'async' or 'ray', got {backend!r}")
        # the options of one backend or another, checked against ``backend`` and handed to its pool
        pool_options: dict[str, Any] = dict(context=context, reset_timeout=reset_timeout, num_cpus=num_cpus)
        pool_options.update(resources=resources, members_per_actor=members_per_actor, ray_init=ray_init)
        _check_backend_options(backend, **pool_options)
        if not isinstance(tau_r, numbers.Real) or not math.isfinite(tau_r):
            raise ValueError(f"tau_r must be a finite number, got {tau_r!r}")
        if seed is not None:
            _check_int("seed", seed, 0)
        if not isinstance(autoreset, bool):
            raise TypeError(f"autoreset must be True or False, got {autoreset!r}")
        self.autoreset: bool = autoreset
        self.num_envs = self.num_groups * self.group_size
        self.tau_r: float = float(tau_r)
        self.backend = backend
        auto_timeout = isinstance(step_timeout, str)
        if auto_timeout and step_timeout != "auto":
            raise ValueError(f"step_timeout must be 'auto', None or a number of seconds > 0, got {step_timeout!r}")
        explicit_timeout = None if auto_timeout else check_timeout("step_timeout", step_timeout)
        env_fns = _resolve_env_fns(env_fns_or_id, self.num_envs, env_kwargs)
        self.pool: SyncMemberPool | AsyncMemberPool | RayMemberPool = _make_pool(
            backend, env_fns, explicit_timeout, **pool_options
        )
        if auto_timeout:
            declared = self.pool.metadata.get("step_timeout")
            try:
                self.pool.step_timeout = check_timeout("metadata['step_timeout']", declared) or DEFAULT_STEP_TIMEOUT
            except ValueError:
                self.pool.step_timeout = DEFAULT_STEP_TIMEOUT
        self.member_errors: int = 0
        self._interrupted: bool = False

        self._set_spaces(env_fns_or_id)

        self.group_ids: np.ndarray = np.repeat(np.arange(self.num_groups), self.group_size)
        self.schedule: GroupSeedSchedule = GroupSeedSchedule(seed, self.num_groups)
        self._episode: np.ndarray = np.full(self.num_groups, -1, dtype=np.int64)  # k of each group's current task
        self._obs: list[Any] = [None] * self.num_envs
        self._done: np.ndarray = np.zeros(self.num_envs, dtype=bool)
        self._outcomes: np.ndarray = np.zeros(self.num_envs, dtype=np.float64)
        self._needs_reset: bool = True
        #: groups whose autoreset raised: {group: one-line reason}; retried on the next step()
        self._pending_reset: dict[int, str] = {}

    def _set_spaces(self, env_fns_or_id: object) -> None:
        """The spaces, metadata and spec of the batch, from the members' (read by the pool)."""
        self.single_observation_space = self.pool.single_observation_space
        self.single_action_space = self.pool.single_action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {
            **self.pool.metadata,
            "autoreset_mode": AutoresetMode.SAME_STEP,
            "group_autoreset": "wait" if self.autoreset else "hold",
        }
        if isinstance(env_fns_or_id, str):
            self.spec = gym.spec(env_fns_or_id)

    # -- helpers ---------------------------------------------------------------------------
    def _members(self, group: int) -> range:
        return range(group * self.group_size, (group + 1) * self.group_size)

    def _batch_obs(self) -> Any:
        out = create_empty_array(self.single_observation_space, self.num_envs)
        return concatenate(self.single_observation_space, self._obs, out)  # type: ignore[arg-type]  # out is an array of the space's shape here, never None

    def _group_seeds_from(self, seed: Any) -> GroupSeedSchedule | None:
        """Validate ``reset(seed=...)``: None, an int, or one seed per group / per member."""
        if seed is None:
            return None
        if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
            return GroupSeedSchedule(_check_int("seed", seed, 0), self.num_groups)
        if not isinstance(seed, (Sequence, np.ndarray)) or isinstance(seed, (str, bytes)):
            raise TypeError(f"seed must be None, an int or a list of ints, got {type(seed).__name__}")
        seeds = list(seed)
        if len(seeds) == self.num_envs and self.num_envs != self.num_groups:
            for g in range(self.num_groups):
                members = [seeds[i] for i in self._members(g)]
                if any(s != members[0] for s in members):
                    raise ValueError(
                        f"seed: members {list(self._members(g))} of group {g} got different seeds {members}; "
                        "all members of a group must share one seed (or pass one seed per group)"
                    )
            seeds = seeds[:: self.group_size]
        elif len(seeds) != self.num_groups:
            raise ValueError(
                f"seed: a list needs one seed per group ({self.num_groups}) or per member ({self.num_envs}), "
                f"got {len(seeds)}"
            )
        return GroupSeedSchedule(seeds, self.num_groups)

    def _group_options(self, options: Any) -> list[dict[str, Any] | None]:
        if options is None or isinstance(options, Mapping):
            return [options] * self.num_groups  # type: ignore[list-item]  # a Mapping is one group's options, repeated
        if isinstance(options, Sequence) and not isinstance(options, (str, bytes)) and len(options) == self.num_groups:
            if all(o is None or isinstance(o, Mapping) for o in options):
                return list(options)
        raise ValueError(f"options must be None, a dict, or a list of {self.num_groups} dicts (one per group)")

    def _reset_groups(
        self, groups: Sequence[int], options: Sequence[dict[str, Any] | None]
    ) -> dict[int, tuple[Any, dict[str, Any]]]:
        """Start the next scheduled task in ``groups``; returns {member: (obs, reset info)}."""
        indices, seeds, opts = [], [], []
        for g, o in zip(groups, options):
            self._episode[g] += 1
            seed = self.schedule.seed_for(g, int(self._episode[g]))
            for i in self._members(g):
                indices.append(i)
                seeds.append(seed)
                opts.append(o)
        results = self.pool.reset(indices, seeds, opts)
        out: dict[int, tuple[Any, dict[str, Any]]] = {}
        for i, seed, ((obs, info), restarted) in zip(indices, seeds, results):
            info = dict(info)
            info["task_seed"] = seed
            info["group_reset"] = True
            info["worker_restarted"] = restarted
            self._obs[i] = obs
            self._done[i] = False
            self._outcomes[i] = 0.0
            out[i] = (obs, info)
        return out

    def _collect_infos(self, per_member: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Per-member info dicts -> Gymnasium dict-of-arrays with ``_key`` masks.

        Same layout as ``VectorEnv._add_info`` (dicts nest; ``final_obs`` is an object array),
        built one key at a time instead of one member at a time. The array type of a key comes
        from every member's value, not the first one (:func:`_info_array`): an optional value
        (an int on one page, ``None`` on another) or a type that differs between members gives
        an object array instead of a crash.
        """
        n = self.num_envs
        by_key: dict[str, tuple[list[int], list[Any]]] = {}
        for i, info in enumerate(per_member):
            for key, value in info.items():
                idx, values = by_key.setdefault(key, ([], []))
                idx.append(i)
                values.append(value)
        infos: dict[str, Any] = {}
        for key, (idx, values) in by_key.items():
            if key != "final_obs" and all(isinstance(v, dict) for v in values):
                nested: list[Mapping[str, Any]] = [{} for _ in range(n)]
                for i, v in zip(idx, values):
                    nested[i] = v
                array: Any = self._collect_infos(nested)
            else:
                array = _info_array(values, idx, n, force_object=key == "final_obs")
            mask = np.zeros(n, dtype=np.bool_)
            mask[idx] = True
            infos[key], infos[f"_{key}"] = array, mask
        return infos

    # -- VectorEnv API -----------------------------------------------------------------------
    def reset(
        self,
        *,
        seed: int | Sequence[int] | None = None,
        options: dict[str, Any] | Sequence[dict[str, Any]] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Start every group on a new task.

        Args:
            seed: ``None`` continues the schedule (every group moves to its next task); an int
                restarts the schedule from that vector seed; a list gives one seed per group (or
                per member, then equal within each group) for this reset, later tasks follow
                from it.
            options: passed to every member's ``reset`` (a dict), or one dict per group. Used for
                this reset only; group autoresets pass ``options=None``.
        """
        self._check_open()
        schedule = self._group_seeds_from(seed)
        group_options = self._group_options(options)
        if schedule is not None:
            self.schedule = schedule
            self._episode[:] = -1
        if isinstance(seed, numbers.Integral):
            super().reset(seed=int(seed))
        self._needs_reset = True  # until every member is reset
        self._pending_reset.clear()
        results = self._reset_groups(range(self.num_groups), group_options)
        per_member = []
        for i in range(self.num_envs):
            info = results[i][1]
            info["group_id"] = int(self.group_ids[i])
            info["waiting"] = False
            per_member.append(info)
        self._needs_reset = False
        self._interrupted = False
        return self._batch_obs(), self._collect_infos(per_member)

    def require_reset(self) -> None:
        """Refuse ``step()`` until the next ``reset()``: for a caller that drove members directly
        (:meth:`reset_members`, :meth:`step_members`, :meth:`fork`; a tree rollout's branches),
        after which this env's view of them is stale."""
        self._needs_reset = True

    # -- members one by one, outside the group schedule (a tree rollout's branches) ------------
    def reset_members(
        self, members: Sequence[int], task_seeds: Sequence[int], options: Sequence[dict[str, Any] | None] | None = None
    ) -> list[tuple[Any, dict[str, Any]]]:
        """Reset ``members`` to the given task seeds (and options); their ``(obs, info)``. The
        groups' schedule is left alone: ``step()`` is refused until the next ``reset()``."""
        self._check_open()
        self._needs_reset = True
        opts = list(options) if options is not None else [None] * len(members)
        return [obs_info for obs_info, _ in self.pool.reset(list(members), [int(t) for t in task_seeds], opts)]

    def step_members(self, members: Sequence[int], actions: Sequence[Any]) -> list[tuple[Any, ...] | Crashed]:
        """Step ``members`` in their own episodes: per member its ``(obs, reward, terminated,
        truncated, info)``, or a :class:`~wrappers.group.member_pools.Crashed` (no tuple) where its
        worker died, hung or raised. ``step()`` is refused until the next ``reset()``."""
        self._check_open()
        self._needs_reset = True
        return self.pool.step(list(members), list(actions))

    def fork(
        self, member: int, task_seed: int, options: dict[str, Any] | None, actions: Sequence[Any]
    ) -> tuple[tuple[Any, dict[str, Any]], list[tuple[Any, ...] | Crashed]]:
        """``member`` reset to ``task_seed`` and made to replay ``actions`` (a branch from a shared
        prefix): the reset's ``(obs, info)`` and each step's result, up to the first that crashed."""
        reset = self.reset_members([member], [task_seed], [options])[0]
        results: list[tuple[Any, ...] | Crashed] = []
        for action in actions:
            results.append(self.step_members([member], [action])[0])
            if not isinstance(results[-1], tuple):
                break
        return reset, results

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("GroupVectorEnv is closed: its workers are gone; create a new GroupVectorEnv")

    def _split_actions(self, actions: Any) -> list[Any]:
        if isinstance(actions, (str, bytes, bytearray, memoryview)):
            raise TypeError(
                f"actions: expected a sequence of {self.num_envs} member actions, got {type(actions).__name__} "
                "(a str or bytes is not split into actions)"
            )
        try:
            items = list(iterate(self.action_space, actions))
        except Exception as err:  # re-raised with the argument named
            raise ValueError(f"actions: cannot split into {self.num_envs} member actions ({err})") from err
        if len(items) != self.num_envs:
            raise ValueError(f"actions: expected {self.num_envs} actions (one per member), got {len(items)}")
        return items

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        self._check_open()
        if self._needs_reset:
            if self._interrupted:
                raise RuntimeError(
                    "GroupVectorEnv: a previous step() was interrupted part-way, so members may be out of "
                    "step; call reset() before stepping again"
                )
            raise RuntimeError("GroupVectorEnv.step() called before reset()")
        action_list = self._split_actions(actions)
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=bool)
        truncations = np.zeros(self.num_envs, dtype=bool)
        retried = self._retry_pending_resets()
        waiting = self._done.copy()
        for i in retried:
            waiting[i] = True  # reset in this step: the action is ignored, the obs is its new first obs
        running = [i for i in range(self.num_envs) if not waiting[i]]
        try:
            results = self.pool.step(running, [action_list[i] for i in running])
        except UnsentActionError:
            raise  # nothing was sent: every member is where it was
        except BaseException:
            self._needs_reset = self._interrupted = True
            raise

        per_member: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        finished_now: list[int] = []
        for i, result in zip(running, results):
            if isinstance(result, Crashed):
                obs, reward, term, trunc = self._obs[i], 0.0, False, True
                info: dict[str, Any] = {"worker_restarted": result.restarted, "worker_error": result.reason}
                outcome = 0.0
                self.member_errors += 1
            else:
                obs, reward, term, trunc, info = result
                info = dict(info)
                info["worker_restarted"] = False
                outcome = float(info["outcome"]) if "outcome" in info else float(reward)
            self._obs[i] = obs
            rewards[i], terminations[i], truncations[i] = float(reward), bool(term), bool(trunc)
            if term or trunc:
                self._done[i] = True
                self._outcomes[i] = outcome
                finished_now.append(i)
                info = {**info, "final_obs": obs, "final_info": dict(info)}
            per_member[i] = info
        for i in map(int, np.flatnonzero(waiting)):
            per_member[i] = retried.get(i, {"worker_restarted": False})

        completed = sorted(
            {int(self.group_ids[i]) for i in finished_now if self._done[self._members(int(self.group_ids[i]))].all()}
        )
        if completed:
            self._finish_groups(completed, per_member)
        for i in range(self.num_envs):
            per_member[i]["waiting"] = bool(waiting[i])
        return self._batch_obs(), rewards, terminations, truncations, self._collect_infos(per_member)

    def _finish_groups(self, completed: list[int], per_member: list[dict[str, Any]]) -> None:
        """Close the groups whose last member just finished: their outcomes and all-failed flag on
        every member's info, then the group autoreset (or the hold), keeping each member's final
        observation and error."""
        group_flags = {}
        for g in completed:
            outcomes = self._outcomes[self._members(g)].copy()
            group_flags[g] = (outcomes, outcomes_all_failed(outcomes, self.tau_r))
        resets = self._autoreset(completed) if self.autoreset else {}
        for g in completed:
            outcomes, all_failed = group_flags[g]
            for i in self._members(g):
                if i in resets:
                    info = resets[i][1]
                elif not self.autoreset:  # held: the member waits on its final obs until reset()
                    info = {"group_reset": False, "worker_restarted": False}
                else:  # the reset raised: the member waits on its final obs until the retry
                    info = {
                        "group_reset": False,
                        "worker_restarted": False,
                        "worker_error": f"reset failed: {self._pending_reset[g]}",
                    }
                if "final_obs" in per_member[i]:
                    info["final_obs"] = per_member[i]["final_obs"]
                    info["final_info"] = per_member[i]["final_info"]
                if "worker_error" in per_member[i]:  # a failed step that completed its group
                    info["worker_error"] = per_member[i]["worker_error"]
                info["worker_restarted"] = info["worker_restarted"] or per_member[i].get("worker_restarted", False)
                info["group_id"] = g
                info["group_outcomes"] = outcomes
                info["group_all_failed"] = all_failed
                per_member[i] = info

    def _try_reset_group(self, g: int) -> tuple[dict[int, tuple[Any, dict[str, Any]]], Exception | None]:
        """Reset group ``g`` to its next scheduled task: (its members' resets, None), or ({}, the
        error) when a member's reset raised (the schedule has then moved on to that task)."""
        try:
            return self._reset_groups([g], [None]), None
        except (KeyboardInterrupt, SystemExit):
            self._needs_reset = self._interrupted = True
            raise
        except Exception as err:  # the caller reports it (infos or one-line MemberError)
            return {}, err

    def _autoreset(self, groups: Sequence[int]) -> dict[int, tuple[Any, dict[str, Any]]]:
        """Reset each finished group to its next task; a group whose reset raises is kept for a
        retry on the next ``step()`` (:attr:`_pending_reset`) instead of losing this step."""
        out: dict[int, tuple[Any, dict[str, Any]]] = {}
        for g in groups:
            resets, err = self._try_reset_group(g)
            out.update(resets)
            if err is not None:
                self._episode[g] -= 1  # the retry plays the same scheduled task
                self._pending_reset[g] = describe_error(err)
                self.member_errors += 1
        return out

    def _retry_pending_resets(self) -> dict[int, dict[str, Any]]:
        """Retry the resets that failed in the previous ``step()``; a second failure raises."""
        retried: dict[int, dict[str, Any]] = {}
        for g, reason in sorted(self._pending_reset.items()):
            resets, err = self._try_reset_group(g)
            if err is not None:
                self._needs_reset = True
                raise MemberError(
                    f"group {g}: resetting to its next task failed twice (task seed "
                    f"{self.schedule.seed_for(g, int(self._episode[g]))}): {describe_error(err)}; "
                    f"first failure: {reason}"
                ) from err
            del self._pending_reset[g]
            for i, (_, info) in resets.items():
                info["group_id"] = g
                retried[i] = info
        return retried

    @property
    def worker_restarts(self) -> int:
        """Workers restarted (async) or envs rebuilt after a timeout (sync) since creation."""
        return int(self.pool.restarts)

    @property
    def step_timeout(self) -> float | None:
        """Seconds one member step may take (``"auto"`` resolved), ``None``: no limit."""
        return self.pool.step_timeout

    @property
    def worker_pids(self) -> list[int | None]:
        """Process id of each member's worker or Ray actor (``None`` entries for the sync backend)."""
        return self.pool.pids

    @property
    def worker_node_ids(self) -> list[str | None]:
        """Ray node id of each member's actor (``"ray"``; ``None`` entries for the other backends)."""
        return list(getattr(self.pool, "node_ids", [None] * self.num_envs))

    @property
    def episode_index(self) -> np.ndarray:
        """k of the task each group is playing (its index in the group's seed schedule)."""
        return self._episode.copy()

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            try:
                self.close()
            except Exception:  # interpreter shutdown: nothing left to report to
                pass

    def close_extras(self, **kwargs: Any) -> None:
        pool = getattr(self, "pool", None)  # absent when __init__ failed
        if pool is not None:
            pool.close()
