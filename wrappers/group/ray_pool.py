"""Members of a :class:`~wrappers.group.GroupVectorEnv` as Ray actors, on any node of a Ray cluster.

:class:`RayMemberPool` answers the same calls as :class:`~wrappers.group.member_pools.AsyncMemberPool`
(``reset(indices, seeds, options)``, ``step(indices, actions)``, ``close()``) with the same
failure contract, so ``GroupVectorEnv(..., backend="ray")`` behaves like ``"async"``:

* each actor holds one member, or a *pack* of ``members_per_actor`` members stepped one after
  the other (fewer processes for cheap envs); an actor reserves ``num_cpus`` (fractional
  allowed) and optional custom ``resources``, and Ray places it on whichever node has them;
* an actor that dies (process killed, node lost, out of memory) or does not answer within the
  timeout is killed and replaced by a fresh one built from the same factories (own respawn:
  ``max_restarts=0``, so an old answer can never be taken for a new one). Each of its members
  that was playing gives :class:`~wrappers.group.member_pools.Crashed` on its next step (episode
  truncated, ``worker_restarted``); a reset retries once on the fresh actor;
* an exception inside a member's ``step`` gives ``Crashed(..., restarted=False)`` for that
  member only; in ``reset`` it raises :class:`~wrappers.group.member_pools.MemberError`;
* every action is pickled before any request is sent: one that cannot be raises
  :class:`~wrappers.group.member_pools.UnsentActionError` and nobody moves.

Cluster. When this process has not called ``ray.init`` yet, the pool calls
``ray.init(**ray_init)``: with no arguments Ray joins ``RAY_ADDRESS`` (e.g. ``ray start --head``
on one node, ``ray start --address HEAD:PORT`` on the others), else the cluster last started on
this machine, else it starts a local one. Every node must be able to import the env factories
(install the package there, or pass ``ray_init={"runtime_env": {...}}``). ``ray`` is imported
only when a pool is created: ``wrappers`` itself needs gymnasium and numpy alone.

Example (a local Ray is started on demand; ``ray.shutdown()`` ends it)::

    from wrappers import GroupVectorEnv
    from progpo_envs.rooms import TextRoomsEnv

    envs = GroupVectorEnv(TextRoomsEnv, num_groups=2, group_size=2, backend="ray", num_cpus=0.5, seed=0)
    obs, infos = envs.reset()
    print(envs.worker_node_ids)   # the Ray node of each member's actor
    envs.close()
"""

from __future__ import annotations

import functools
import os
import traceback
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym

from wrappers.group.member_pools import (
    Crashed,
    MemberError,
    check_member_spaces,
    check_timeout,
    describe_error,
    step_payloads,
)

__all__ = ["RayMemberPool", "import_ray"]

#: a factory that builds one member's env
EnvFn = Callable[[], gym.Env]
_Answer = tuple[str, Any]  # ("ok", result) or ("error", (type name, message, traceback))


def import_ray() -> Any:
    """``import ray``, or an ``ImportError`` that says how to install it."""
    try:
        import ray  # the [ray] extra
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ImportError("backend='ray' needs Ray: pip install 'progpo[ray]' (or pip install 'ray>=2.9')") from err
    return ray


class _MemberActor:
    """Ray actor body: a pack of member envs (built from pickled factories), stepped in order."""

    def __init__(self, env_fns: Sequence[EnvFn]) -> None:
        self.envs = [fn() for fn in env_fns]

    def describe(self) -> tuple[int, str, list[tuple[gym.Space[Any], gym.Space[Any]]], dict[str, Any]]:
        """(pid, Ray node id, per-env (observation, action) spaces, metadata of env 0)."""
        import ray  # the [ray] extra

        spaces = [(e.observation_space, e.action_space) for e in self.envs]
        return (
            os.getpid(),
            ray.get_runtime_context().get_node_id(),
            spaces,
            dict(getattr(self.envs[0], "metadata", {}) or {}),
        )

    @staticmethod
    def _call(fn: Callable[[], Any]) -> _Answer:
        try:
            return "ok", fn()
        except Exception as err:  # the caller decides (step: truncate, reset: raise)
            return "error", (type(err).__name__, str(err), traceback.format_exc())

    def reset(
        self, slots: Sequence[int], seeds: Sequence[int], options: Sequence[dict[str, Any] | None]
    ) -> list[_Answer]:
        return [
            self._call(functools.partial(self.envs[s].reset, seed=seed, options=o))
            for s, seed, o in zip(slots, seeds, options)
        ]

    def step(self, slots: Sequence[int], actions: Sequence[Any]) -> list[_Answer]:
        return [self._call(functools.partial(self.envs[s].step, a)) for s, a in zip(slots, actions)]

    def close(self) -> None:
        for env in self.envs:
            env.close()


@functools.cache
def _actor_class() -> Any:
    ray = import_ray()
    return ray.remote(max_restarts=0, max_task_retries=0)(_MemberActor)


class RayMemberPool:
    """Members as Ray actors (see the module docs).

    Args:
        env_fns: one picklable factory per member.
        num_cpus: CPUs each actor reserves (> 0, fractional allowed: ``0.5`` packs two per core).
        resources: custom Ray resources each actor reserves, e.g. ``{"alfworld": 1}``.
        members_per_actor: members per actor (the last actor may hold fewer).
        step_timeout: seconds one member step may take; a pack's call may take that times the
            number of its members stepped. ``None``: wait forever (a dead actor is still noticed).
        reset_timeout: the same for one reset.
        start_timeout: seconds a fresh actor may take to be placed and build its envs.
        ray_init: keyword arguments of ``ray.init`` when Ray is not initialized in this process.
    """

    def __init__(
        self,
        env_fns: Sequence[EnvFn],
        num_cpus: float = 1.0,
        resources: Mapping[str, float] | None = None,
        members_per_actor: int = 1,
        step_timeout: float | None = None,
        reset_timeout: float | None = None,
        start_timeout: float = 300.0,
        ray_init: Mapping[str, Any] | None = None,
    ) -> None:
        if isinstance(num_cpus, bool) or not isinstance(num_cpus, (int, float)) or not num_cpus >= 0:
            raise ValueError(f"num_cpus must be a number >= 0 (fractions allowed, e.g. 0.5), got {num_cpus!r}")
        if resources is not None and (
            not isinstance(resources, Mapping)
            or not all(
                isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
                for k, v in resources.items()
            )
        ):
            raise ValueError(f"resources must be a dict of resource name -> amount >= 0, got {resources!r}")
        if isinstance(members_per_actor, bool) or not isinstance(members_per_actor, int) or members_per_actor < 1:
            raise ValueError(f"members_per_actor must be an int >= 1, got {members_per_actor!r}")
        self.step_timeout = check_timeout("step_timeout", step_timeout)
        self.reset_timeout = check_timeout("reset_timeout", reset_timeout)
        self.start_timeout = start_timeout
        self._ray = ray = import_ray()
        if not ray.is_initialized():
            ray.init(**dict(ray_init or {}))
        self._options = {"num_cpus": float(num_cpus), "resources": dict(resources or {})}
        self._fns = list(env_fns)
        n = len(self._fns)
        #: members of each actor, and (actor, slot) of each member
        self._packs = [list(range(a, min(a + members_per_actor, n))) for a in range(0, n, members_per_actor)]
        self._where = [(a, s) for a, pack in enumerate(self._packs) for s in range(len(pack))]
        self._actors: list[Any] = [None] * len(self._packs)
        self._described: list[tuple[int, str] | None] = [None] * len(self._packs)
        self._lost: dict[int, str] = {}  # member -> why its env was lost (reported on its next step)
        self._pending: dict[int, Any] = {}  # actor -> a request whose answer was not read (interrupted call)
        self.restarts = 0
        self._closed = False
        try:
            ready = [self._launch(a) for a in range(len(self._packs))]
            described = [self._await_ready(a, ref) for a, ref in enumerate(ready)]
        except BaseException:
            self.close()
            raise
        self.single_observation_space, self.single_action_space = check_member_spaces(
            [sp for d in described for sp in d[2]]
        )
        self.metadata: dict[str, Any] = described[0][3]

    # -- actor management ---------------------------------------------------------------
    def _launch(self, a: int) -> Any:
        handle = _actor_class().options(**self._options).remote([self._fns[i] for i in self._packs[a]])
        self._actors[a] = handle
        return handle.describe.remote()

    def _await_ready(self, a: int, ref: Any) -> tuple[Any, ...]:
        ray = self._ray
        try:
            described = ray.get(ref, timeout=self.start_timeout)
        except ray.exceptions.GetTimeoutError as err:
            raise RuntimeError(
                f"env_fns_or_id: the Ray actor of members {self._packs[a]} was not running within "
                f"{self.start_timeout} s: does the cluster have num_cpus={self._options['num_cpus']} and "
                f"resources={self._options['resources']} free for it?"
            ) from err
        except ray.exceptions.RayActorError as err:
            raise MemberError(
                f"env_fns_or_id: creating members {self._packs[a]} failed in their Ray actor: {err}"
            ) from err
        self._described[a] = (described[0], described[1])
        return described

    def _restart(self, a: int, why: str) -> None:
        """Kill actor ``a`` and start a fresh one; its members' envs are lost until reset."""
        handle = self._actors[a]
        self._pending.pop(a, None)
        if handle is not None:
            try:
                self._ray.kill(handle, no_restart=True)
            except Exception:  # already dead
                pass
        self._await_ready(a, self._launch(a))
        self.restarts += 1
        for i in self._packs[a]:
            self._lost.setdefault(i, why)

    def _resync(self) -> None:
        """Wait for answers left unread by an interrupted call; restart actors that stay silent."""
        if not self._pending:
            return
        ray = self._ray
        refs = dict(self._pending)
        done, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=self.step_timeout or 60.0)
        self._pending.clear()
        for a, ref in refs.items():
            if ref not in done:
                self._restart(a, "actor did not answer an interrupted request")

    def _by_actor(self, indices: Sequence[int]) -> dict[int, list[int]]:
        positions: dict[int, list[int]] = defaultdict(list)
        for pos, i in enumerate(indices):
            positions[self._where[i][0]].append(pos)
        return positions

    def _call(
        self, method: str, indices: Sequence[int], args: Sequence[Sequence[Any]], timeout: float | None
    ) -> list[_Answer | Crashed]:
        """Send ``method`` to the actors of ``indices`` (one request per actor), gather the answers."""
        ray = self._ray
        by_actor = self._by_actor(indices)
        refs = {}
        for a, positions in by_actor.items():
            slots = [self._where[indices[p]][1] for p in positions]
            refs[a] = getattr(self._actors[a], method).remote(slots, *[[arg[p] for p in positions] for arg in args])
        self._pending.update(refs)
        limit = None if timeout is None else timeout * max(len(p) for p in by_actor.values())
        done, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=limit) if refs else ([], [])
        out: list[_Answer | Crashed] = [Crashed("no answer")] * len(indices)
        for a, positions in by_actor.items():
            self._pending.pop(a, None)
            if refs[a] not in done:
                crash = Crashed(f"worker did not answer within {timeout} s (Ray actor killed and restarted)")
                self._restart(a, crash.reason)
                answers: list[_Answer | Crashed] = [crash] * len(positions)
            else:
                try:
                    answers = list(ray.get(refs[a]))
                except ray.exceptions.RayActorError as err:
                    crash = Crashed(f"worker exited (Ray actor died: {describe_error(err)})")
                    self._restart(a, crash.reason)
                    answers = [crash] * len(positions)
            for p, answer in zip(positions, answers):
                out[p] = answer
        return out

    # -- pool API -----------------------------------------------------------------------
    @property
    def pids(self) -> list[int | None]:
        """Process id of each member's actor (changes when the actor is restarted)."""
        return [d[0] if (d := self._described[a]) else None for a, _ in self._where]

    @property
    def node_ids(self) -> list[str | None]:
        """Ray node id of each member's actor."""
        return [d[1] if (d := self._described[a]) else None for a, _ in self._where]

    def reset(
        self, indices: Sequence[int], seeds: Sequence[int], options: Sequence[dict[str, Any] | None]
    ) -> list[tuple[Any, bool]]:
        """Reset members ``indices``; returns ``((obs, info), restarted)`` per member."""
        self._resync()
        answers = self._call("reset", indices, (seeds, options), self.reset_timeout)
        retry = [p for p, ans in enumerate(answers) if isinstance(ans, Crashed)]
        restarted = {p: False for p in range(len(indices))}
        if retry:
            again = self._call(
                "reset",
                [indices[p] for p in retry],
                ([seeds[p] for p in retry], [options[p] for p in retry]),
                self.reset_timeout,
            )
            for p, ans in zip(retry, again):
                if isinstance(ans, Crashed):
                    raise RuntimeError(
                        f"member {indices[p]}: Ray actor died twice while resetting with seed {seeds[p]} ({ans.reason})"
                    )
                answers[p], restarted[p] = ans, True
        results = []
        for p, (i, answer) in enumerate(zip(indices, answers)):
            assert not isinstance(answer, Crashed)
            status, payload = answer
            if status == "error":
                name, message, tb = payload
                raise MemberError(f"member {i} raised during reset: {name}: {message}\n--- actor traceback ---\n{tb}")
            restarted[p] = restarted[p] or i in self._lost
            self._lost.pop(i, None)
            results.append((payload, restarted[p]))
        return results

    def step(self, indices: Sequence[int], actions: Sequence[Any]) -> list[tuple[Any, ...] | Crashed]:
        """Step members ``indices``; see the module docs for what a failure gives."""
        step_payloads(indices, actions, "Ray actor")  # every action picklable, or nobody moves
        self._resync()
        lost = {i: Crashed(self._lost.pop(i)) for i in indices if i in self._lost}
        live = [p for p, i in enumerate(indices) if i not in lost]
        answers = self._call("step", [indices[p] for p in live], ([actions[p] for p in live],), self.step_timeout)
        results: list[tuple[Any, ...] | Crashed] = [lost.get(i, Crashed("no answer")) for i in indices]
        for p, answer in zip(live, answers):
            i = indices[p]
            if isinstance(answer, Crashed):
                self._lost.pop(i, None)  # reported now
                results[p] = answer
            elif answer[0] == "error":
                name, message, _ = answer[1]
                first = str(message).strip().splitlines()
                results[p] = Crashed(f"{name}: {first[0][:300]}" if first else name, restarted=False)
            else:
                results[p] = answer[1]
        return results

    def close(self, timeout: float = 5.0) -> None:
        """Close every env and end the actors (the Ray cluster itself is left running)."""
        if self._closed:
            return
        self._closed = True
        ray = self._ray
        live = [h for h in self._actors if h is not None]
        try:
            refs = [h.close.remote() for h in live]
            if refs:
                ray.wait(refs, num_returns=len(refs), timeout=timeout)
        except Exception:  # closing anyway
            pass
        for h in live:
            try:
                ray.kill(h, no_restart=True)
            except Exception:  # already gone
                pass
        self._actors = [None] * len(self._actors)

    def __del__(self) -> None:
        try:
            if self._ray.is_initialized():
                self.close(timeout=1.0)
        except Exception:
            pass
