"""Where the members of a :class:`~wrappers.group.GroupVectorEnv` run: in-process or in workers.

A member pool owns ``n`` environments and answers two calls on a subset of them:
``reset(indices, seeds, options)`` and ``step(indices, actions)``. :class:`SyncMemberPool`
runs them one after the other in this process; :class:`AsyncMemberPool` runs each member in
its own worker process (``multiprocessing`` with the ``forkserver`` or ``spawn`` context) and
talks to it over a pipe.

Worker protocol (one ``Pipe`` per worker, request/answer, strictly alternating)::

    worker -> ("ready", (observation_space, action_space, metadata))  once, after creating the env
    main   -> ("reset", (seed, options))   worker -> ("ok", (obs, info))
    main   -> ("step", action)             worker -> ("ok", (obs, reward, terminated, truncated, info))
    main   -> ("close", None)              worker -> ("ok", None), then exits
    any request that raises                worker -> ("error", (exception type, message, traceback))

A worker that dies (killed, segfault, out of memory) or, with ``step_timeout`` / ``reset_timeout``, does not answer
in time is replaced by a fresh one built from the same env factory. ``step`` then returns a
:class:`Crashed` marker for that member (the group env reports its episode as truncated);
``reset`` retries once on the fresh worker.
"""
from __future__ import annotations

import multiprocessing as mp
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

import gymnasium as gym
from gymnasium.vector.utils import CloudpickleWrapper

__all__ = ["AsyncMemberPool", "Crashed", "MemberError", "SyncMemberPool"]

EnvFn = Callable[[], gym.Env]


@dataclass(frozen=True)
class Crashed:
    """Step result of a member whose worker died and was restarted."""

    reason: str


class MemberError(RuntimeError):
    """An exception raised inside a member env (message carries the remote traceback)."""


def _check_spaces(spaces: Sequence[tuple[gym.Space, gym.Space]]) -> tuple[gym.Space, gym.Space]:
    obs_space, act_space = spaces[0]
    for i, (o, a) in enumerate(spaces[1:], start=1):
        if o != obs_space or a != act_space:
            raise ValueError(
                f"env_fns_or_id: member {i} has observation/action spaces {o}/{a}, member 0 has "
                f"{obs_space}/{act_space}; all members of a GroupVectorEnv must share their spaces"
            )
    return obs_space, act_space


class SyncMemberPool:
    """All members in this process, stepped one after the other."""

    def __init__(self, env_fns: Sequence[EnvFn]) -> None:
        self.envs = [fn() for fn in env_fns]
        self.single_observation_space, self.single_action_space = _check_spaces(
            [(e.observation_space, e.action_space) for e in self.envs]
        )
        self.metadata: dict[str, Any] = dict(getattr(self.envs[0], "metadata", {}) or {})
        self.restarts = 0

    @property
    def pids(self) -> list[int | None]:
        return [None] * len(self.envs)

    def reset(self, indices: Sequence[int], seeds: Sequence[int], options: Sequence[dict | None]):
        """Reset members ``indices``; returns a list of ``((obs, info), restarted=False)``."""
        return [(self.envs[i].reset(seed=s, options=o), False) for i, s, o in zip(indices, seeds, options)]

    def step(self, indices: Sequence[int], actions: Sequence[Any]) -> list[tuple | Crashed]:
        return [self.envs[i].step(a) for i, a in zip(indices, actions)]

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _worker(index: int, env_fn: CloudpickleWrapper, conn: Connection) -> None:
    """Worker loop: build the env, then answer requests until ``close`` or a broken pipe."""
    try:
        env = env_fn.fn()
        conn.send(("ready", (env.observation_space, env.action_space, dict(getattr(env, "metadata", {}) or {}))))
    except BaseException as err:  # report creation errors instead of dying silently
        conn.send(("error", (type(err).__name__, str(err), traceback.format_exc())))
        conn.close()
        return
    while True:
        try:
            command, data = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            break
        try:
            if command == "step":
                conn.send(("ok", env.step(data)))
            elif command == "reset":
                seed, options = data
                conn.send(("ok", env.reset(seed=seed, options=options)))
            elif command == "close":
                env.close()
                conn.send(("ok", None))
                break
            else:
                raise ValueError(f"unknown worker command {command!r}")
        except (BrokenPipeError, EOFError):
            break
        except BaseException as err:
            try:
                conn.send(("error", (type(err).__name__, str(err), traceback.format_exc())))
            except (BrokenPipeError, OSError):
                break
    conn.close()


class AsyncMemberPool:
    """One worker process per member; dead or hung workers are restarted.

    Args:
        env_fns: one picklable (cloudpickle) factory per member.
        context: ``"forkserver"`` (default where available), ``"spawn"`` or ``"fork"``
            (``fork`` is unsafe once threads exist, e.g. after importing torch).
        step_timeout: seconds a worker may take for one ``step`` before it is killed and
            restarted (``None``: wait forever; a dead worker is still noticed at once).
        reset_timeout: the same for one ``reset``.
        start_timeout: seconds a fresh worker may take to build its env.
    """

    def __init__(
        self,
        env_fns: Sequence[EnvFn],
        context: str | None = None,
        step_timeout: float | None = None,
        reset_timeout: float | None = None,
        start_timeout: float = 300.0,
    ) -> None:
        if context is None:
            context = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        if context not in mp.get_all_start_methods():
            raise ValueError(f"context must be one of {mp.get_all_start_methods()}, got {context!r}")
        for name, value in (("step_timeout", step_timeout), ("reset_timeout", reset_timeout)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0 seconds or None, got {value}")
        self._ctx = mp.get_context(context)
        self._fns = [CloudpickleWrapper(fn) for fn in env_fns]
        self.step_timeout = step_timeout
        self.reset_timeout = reset_timeout
        self.start_timeout = start_timeout
        self._procs: list[Any] = [None] * len(env_fns)
        self._conns: list[Connection | None] = [None] * len(env_fns)
        self.restarts = 0
        self._closed = False
        try:
            for i in range(len(env_fns)):
                self._launch(i)
            spaces = [self._await_ready(i) for i in range(len(env_fns))]
        except BaseException:
            self.close()
            raise
        self.single_observation_space, self.single_action_space = _check_spaces([(o, a) for o, a, _ in spaces])
        self.metadata = spaces[0][2]

    @property
    def pids(self) -> list[int | None]:
        """Process id of each member's current worker (changes when a worker is restarted)."""
        return [p.pid if p is not None else None for p in self._procs]

    # -- process management -------------------------------------------------------------
    def _launch(self, i: int) -> None:
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(
            target=_worker, args=(i, self._fns[i], child), name=f"GroupVectorEnv-member-{i}", daemon=True
        )
        proc.start()
        child.close()  # the worker holds the only other end: its death gives EOF here
        self._procs[i], self._conns[i] = proc, parent

    def _await_ready(self, i: int) -> tuple[gym.Space, gym.Space, dict]:
        answer = self._receive(i, self.start_timeout)
        if isinstance(answer, Crashed):
            raise RuntimeError(f"env_fns_or_id: worker for member {i} died while creating its env ({answer.reason})")
        status, payload = answer
        if status == "error":
            name, message, tb = payload
            raise MemberError(f"env_fns_or_id: creating member {i} failed in its worker: {name}: {message}\n{tb}")
        return payload

    def _kill(self, i: int) -> None:
        proc, conn = self._procs[i], self._conns[i]
        if conn is not None:
            conn.close()
        if proc is not None:
            if proc.is_alive():
                proc.kill()
            proc.join(timeout=5)
        self._procs[i], self._conns[i] = None, None

    def _restart(self, i: int) -> None:
        self._kill(i)
        self._launch(i)
        self._await_ready(i)
        self.restarts += 1

    # -- messaging ----------------------------------------------------------------------
    def _send(self, i: int, message: tuple) -> bool:
        conn = self._conns[i]
        if conn is None:
            return False
        try:
            conn.send(message)
            return True
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            return False

    def _receive(self, i: int, timeout: float | None) -> tuple | Crashed:
        conn, proc = self._conns[i], self._procs[i]
        if conn is None or proc is None:
            return Crashed("worker not running")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            ready = wait([conn, proc.sentinel], timeout=remaining)
            if conn in ready or (ready and conn.poll()):
                try:
                    return conn.recv()
                except (EOFError, OSError, ConnectionResetError):
                    proc.join(timeout=1)
                    return Crashed(f"worker exited (exit code {proc.exitcode})")
            if proc.sentinel in ready:
                return Crashed(f"worker exited (exit code {proc.exitcode})")
            if deadline is not None and time.monotonic() >= deadline:
                return Crashed(f"worker did not answer within {timeout} s")

    def _unwrap(self, i: int, answer: tuple, what: str) -> Any:
        status, payload = answer
        if status == "error":
            name, message, tb = payload
            raise MemberError(f"member {i} raised during {what}: {name}: {message}\n--- worker traceback ---\n{tb}")
        return payload

    # -- pool API -----------------------------------------------------------------------
    def reset(self, indices: Sequence[int], seeds: Sequence[int], options: Sequence[dict | None]):
        """Reset members ``indices`` in parallel; returns ``((obs, info), restarted)`` per member."""
        sent = [self._send(i, ("reset", (s, o))) for i, s, o in zip(indices, seeds, options)]
        answers = [self._receive(i, self.reset_timeout) if ok else Crashed("pipe closed") for i, ok in zip(indices, sent)]
        results = []
        for i, s, o, answer in zip(indices, seeds, options, answers):
            restarted = False
            if isinstance(answer, Crashed):
                self._restart(i)
                restarted = True
                answer = self._receive(i, self.reset_timeout) if self._send(i, ("reset", (s, o))) else Crashed("pipe closed")
                if isinstance(answer, Crashed):
                    raise RuntimeError(f"member {i}: worker died twice while resetting with seed {s} ({answer.reason})")
            results.append((self._unwrap(i, answer, "reset"), restarted))
        return results

    def step(self, indices: Sequence[int], actions: Sequence[Any]) -> list[tuple | Crashed]:
        """Step members ``indices`` in parallel; a dead worker is restarted and gives :class:`Crashed`."""
        sent = [self._send(i, ("step", a)) for i, a in zip(indices, actions)]
        answers = [self._receive(i, self.step_timeout) if ok else Crashed("pipe closed") for i, ok in zip(indices, sent)]
        results: list[tuple | Crashed] = []
        for i, answer in zip(indices, answers):
            if isinstance(answer, Crashed):
                self._restart(i)
                results.append(answer)
            else:
                results.append(self._unwrap(i, answer, "step"))
        return results

    def close(self, timeout: float = 5.0) -> None:
        if self._closed:
            return
        self._closed = True
        for i in range(len(self._procs)):
            if self._procs[i] is not None and self._procs[i].is_alive():
                self._send(i, ("close", None))
        deadline = time.monotonic() + timeout
        for i, proc in enumerate(self._procs):
            if proc is not None:
                proc.join(timeout=max(deadline - time.monotonic(), 0.0))
            self._kill(i)

    def __del__(self) -> None:
        try:
            self.close(timeout=1.0)
        except Exception:
            pass
