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
``reset`` retries once on the fresh worker. A member whose ``step`` raises gives a
:class:`Crashed` marker too (``restarted=False``: its env is kept and reset with its group).

Staying in step: every action is serialized before any is sent, so an action that cannot be
pickled raises :class:`UnsentActionError` with nothing sent. Each request's answer is read
before the next request; if a call is interrupted between the two (``KeyboardInterrupt``),
the unread answers are drained (or the worker restarted) at the start of the next call, so
an old answer is never taken for a new one.

:class:`SyncMemberPool` enforces ``step_timeout`` with ``SIGALRM`` (main thread, Unix, when no
other ``SIGALRM`` handler or timer is set): a step that runs past it is interrupted, the env is
rebuilt from its factory and the member reported as crashed. Code stuck inside a C call is only
interrupted when that call returns; use the async pool for engines that can hang in C.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import ForkingPickler
from typing import Any

import gymnasium as gym
from gymnasium.vector.utils import CloudpickleWrapper

from wrappers.errors import UserError

__all__ = [
    "AsyncMemberPool",
    "Crashed",
    "MemberError",
    "StepTimeout",
    "SyncMemberPool",
    "UnsentActionError",
    "check_timeout",
    "check_member_spaces",
    "describe_error",
]

#: a factory that builds one member's env
EnvFn = Callable[[], gym.Env]


@dataclass(frozen=True)
class Crashed:
    """Step result of a member that failed: its worker died or hung and was restarted
    (``restarted=True``), or its env's ``step`` raised (``restarted=False``, ``reason`` holds the
    exception type and message)."""

    reason: str
    restarted: bool = True


class MemberError(UserError, RuntimeError):
    """An exception raised inside a member env (message carries the remote traceback)."""


class UnsentActionError(TypeError):
    """An action could not be serialized for its worker; nothing was sent to any member."""


class StepTimeout(TimeoutError):
    """Raised inside a sync member's ``step`` by the ``SIGALRM`` timer."""


def check_timeout(name: str, value: Any) -> float | None:
    """``None`` or a finite number of seconds > 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be > 0 seconds or None, got {value!r}")
    return float(value)


def describe_error(err: BaseException) -> str:
    """An exception in one line: its class and the first line of its message (at most 300 characters)."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:300]}" if text else type(err).__name__


def step_payloads(indices: Sequence[int], actions: Sequence[Any], target: str) -> list[bytes]:
    """The pickled ``("step", action)`` message of each member, all built before anything is sent:
    an action that cannot be pickled raises :class:`UnsentActionError` and no member moves.

    >>> len(step_payloads([0, 1], ["look", "go east"], "worker process"))
    2
    """
    payloads = []
    for i, a in zip(indices, actions):
        try:
            payloads.append(bytes(ForkingPickler.dumps(("step", a))))
        except Exception as err:  # any pickling failure: nothing is sent
            raise UnsentActionError(
                f"actions[{i}]: cannot be sent to member {i}'s {target} ({describe_error(err)}); actions must be "
                "picklable. No member was stepped."
            ) from err
    return payloads


@contextlib.contextmanager
def _alarm(seconds: float | None) -> Iterator[None]:
    """Raise :class:`StepTimeout` in this thread after ``seconds`` (a no-op where it cannot)."""
    usable = (
        seconds is not None
        and hasattr(signal, "SIGALRM")
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None)
        and signal.getitimer(signal.ITIMER_REAL)[0] == 0.0
    )
    if not usable:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise StepTimeout(f"step did not return within {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)  # type: ignore[arg-type]  # usable above: seconds is not None
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, previous)


def check_member_spaces(
    spaces: Sequence[tuple[gym.Space[Any], gym.Space[Any]]],
) -> tuple[gym.Space[Any], gym.Space[Any]]:
    """The one (observation, action) space pair every member shares; a member with others is refused."""
    obs_space, act_space = spaces[0]
    for i, (o, a) in enumerate(spaces[1:], start=1):
        if o != obs_space or a != act_space:
            raise ValueError(
                f"env_fns_or_id: member {i} has observation/action spaces {o}/{a}, member 0 has "
                f"{obs_space}/{act_space}; all members of a GroupVectorEnv must share their spaces"
            )
    return obs_space, act_space


class SyncMemberPool:
    """All members in this process, stepped one after the other.

    Args:
        env_fns: one factory per member.
        step_timeout: seconds one ``step`` may run before ``SIGALRM`` interrupts it (see the
            module docs for when that is possible); the env is then rebuilt from its factory.
    """

    def __init__(self, env_fns: Sequence[EnvFn], step_timeout: float | None = None) -> None:
        self._fns = list(env_fns)
        self.step_timeout = check_timeout("step_timeout", step_timeout)
        self.envs = [fn() for fn in env_fns]
        self.single_observation_space, self.single_action_space = check_member_spaces(
            [(e.observation_space, e.action_space) for e in self.envs]
        )
        self.metadata: dict[str, Any] = dict(getattr(self.envs[0], "metadata", {}) or {})
        self.restarts = 0

    @property
    def pids(self) -> list[int | None]:
        return [None] * len(self.envs)

    def reset(
        self, indices: Sequence[int], seeds: Sequence[int], options: Sequence[dict[str, Any] | None]
    ) -> list[tuple[Any, bool]]:
        """Reset members ``indices``; returns a list of ``((obs, info), restarted=False)``."""
        return [(self.envs[i].reset(seed=s, options=o), False) for i, s, o in zip(indices, seeds, options)]

    def step(self, indices: Sequence[int], actions: Sequence[Any]) -> list[tuple[Any, ...] | Crashed]:
        """Step members ``indices``; a member whose ``step`` raises (or times out) gives :class:`Crashed`."""
        results: list[tuple[Any, ...] | Crashed] = []
        for i, a in zip(indices, actions):
            try:
                with _alarm(self.step_timeout):
                    results.append(self.envs[i].step(a))
            except StepTimeout:
                self._rebuild(i)
                results.append(
                    Crashed(f"worker did not answer within {self.step_timeout} s (step interrupted, env rebuilt)")
                )
            except Exception as err:  # the member's episode is truncated with the message
                results.append(Crashed(describe_error(err), restarted=False))
        return results

    def _rebuild(self, i: int) -> None:
        with contextlib.suppress(Exception):
            self.envs[i].close()
        self.envs[i] = self._fns[i]()
        self.restarts += 1

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
        except BaseException as err:  # a request that cannot be unpickled here: answer, stay in step
            try:
                conn.send(("error", (type(err).__name__, str(err), traceback.format_exc())))
            except (BrokenPipeError, OSError):
                break
            continue
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


def _script_hint(ctx: Any) -> str:
    """Where a worker died at its start and the program is a script: the likely cause. A worker
    started by spawn or forkserver imports the script again, so unguarded code there builds the
    pool once more inside the worker, which Python refuses."""
    main = sys.modules.get("__main__")
    if ctx.get_start_method() == "fork" or not getattr(main, "__file__", None):
        return ""
    return (
        f"; if {main.__file__} builds the env at its top level, put that code under "  # type: ignore[union-attr]  # checked above
        '`if __name__ == "__main__":` (each worker imports the script again)'
    )


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
        step_timeout = check_timeout("step_timeout", step_timeout)
        reset_timeout = check_timeout("reset_timeout", reset_timeout)
        self._ctx = mp.get_context(context)
        self._fns = [CloudpickleWrapper(fn) for fn in env_fns]
        self.step_timeout = step_timeout
        self.reset_timeout = reset_timeout
        self.start_timeout = start_timeout
        self._procs: list[Any] = [None] * len(env_fns)
        self._conns: list[Connection | None] = [None] * len(env_fns)
        self.restarts = 0
        self._unanswered: set[int] = set()  # members sent a request whose answer is not read yet
        self._closed = False
        try:
            for i in range(len(env_fns)):
                self._launch(i)
            spaces = [self._await_ready(i) for i in range(len(env_fns))]
        except BaseException:
            self.close()
            raise
        self.single_observation_space, self.single_action_space = check_member_spaces([(o, a) for o, a, _ in spaces])
        self.metadata = spaces[0][2]

    @property
    def pids(self) -> list[int | None]:
        """Process id of each member's current worker (changes when a worker is restarted)."""
        return [p.pid if p is not None else None for p in self._procs]

    # -- process management -------------------------------------------------------------
    def _launch(self, i: int) -> None:
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(  # type: ignore[attr-defined]  # every start method's context has Process; the stub's BaseContext does not
            target=_worker, args=(i, self._fns[i], child), name=f"GroupVectorEnv-member-{i}", daemon=True
        )
        proc.start()
        child.close()  # the worker holds the only other end: its death gives EOF here
        self._procs[i], self._conns[i] = proc, parent

    def _await_ready(self, i: int) -> tuple[gym.Space[Any], gym.Space[Any], dict[str, Any]]:
        answer = self._receive(i, self.start_timeout)
        if isinstance(answer, Crashed):
            raise RuntimeError(
                f"env_fns_or_id: worker for member {i} died while creating its env ({answer.reason}){_script_hint(self._ctx)}"
            )
        status, payload = answer
        if status == "error":
            name, message, tb = payload
            raise MemberError(f"env_fns_or_id: creating member {i} failed in its worker: {name}: {message}\n{tb}")
        return payload

    def _kill(self, i: int) -> None:
        self._unanswered.discard(i)
        proc, conn = self._procs[i], self._conns[i]
        if conn is not None:
            conn.close()
        if proc is not None:
            if proc.is_alive():
                proc.kill()
            proc.join(timeout=5)
        self._procs[i], self._conns[i] = None, None

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("AsyncMemberPool is closed: no worker is started after close()")

    def _restart(self, i: int) -> None:
        self._check_open()
        self._kill(i)
        self._launch(i)
        self._await_ready(i)
        self.restarts += 1

    # -- messaging ----------------------------------------------------------------------
    def _send(self, i: int, message: tuple[Any, ...] | bytes) -> bool:
        """Send a request (a tuple, or one already serialized with ``ForkingPickler``)."""
        conn = self._conns[i]
        if conn is None:
            return False
        payload = message if isinstance(message, bytes) else bytes(ForkingPickler.dumps(message))
        try:
            self._unanswered.add(i)
            conn.send_bytes(payload)
            return True
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            return False

    def _receive(self, i: int, timeout: float | None) -> tuple[Any, ...] | Crashed:
        answer = self._receive_raw(i, timeout)
        if not isinstance(answer, Crashed):
            self._unanswered.discard(i)
        return answer

    def _resync(self) -> None:
        """Read (and drop) answers left unread by an interrupted call; restart silent workers."""
        for i in sorted(self._unanswered):
            answer = self._receive(i, self.step_timeout if self.step_timeout is not None else 60.0)
            if isinstance(answer, Crashed):
                self._restart(i)

    def _receive_raw(self, i: int, timeout: float | None) -> tuple[Any, ...] | Crashed:
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
                except Exception as err:  # the answer was read whole but cannot be unpickled here
                    return ("error", (type(err).__name__, f"cannot unpickle the worker's answer: {err}", ""))
            if proc.sentinel in ready:
                return Crashed(f"worker exited (exit code {proc.exitcode})")
            if deadline is not None and time.monotonic() >= deadline:
                return Crashed(f"worker did not answer within {timeout} s")

    def _unwrap(self, i: int, answer: tuple[Any, ...], what: str) -> Any:
        status, payload = answer
        if status == "error":
            name, message, tb = payload
            raise MemberError(f"member {i} raised during {what}: {name}: {message}\n--- worker traceback ---\n{tb}")
        return payload

    # -- pool API -----------------------------------------------------------------------
    def reset(
        self, indices: Sequence[int], seeds: Sequence[int], options: Sequence[dict[str, Any] | None]
    ) -> list[tuple[Any, bool]]:
        """Reset members ``indices`` in parallel; returns ``((obs, info), restarted)`` per member."""
        self._check_open()
        self._resync()
        sent = [self._send(i, ("reset", (s, o))) for i, s, o in zip(indices, seeds, options)]
        answers = [
            self._receive(i, self.reset_timeout) if ok else Crashed("pipe closed") for i, ok in zip(indices, sent)
        ]
        results = []
        for i, s, o, answer in zip(indices, seeds, options, answers):
            restarted = False
            if isinstance(answer, Crashed):
                self._restart(i)
                restarted = True
                answer = (
                    self._receive(i, self.reset_timeout) if self._send(i, ("reset", (s, o))) else Crashed("pipe closed")
                )
                if isinstance(answer, Crashed):
                    raise RuntimeError(f"member {i}: worker died twice while resetting with seed {s} ({answer.reason})")
            results.append((self._unwrap(i, answer, "reset"), restarted))
        return results

    def step(self, indices: Sequence[int], actions: Sequence[Any]) -> list[tuple[Any, ...] | Crashed]:
        """Step members ``indices`` in parallel.

        Every action is serialized first: one that cannot be raises :class:`UnsentActionError`
        and no member is sent anything. A dead or hung worker is restarted and gives
        :class:`Crashed`; a member whose ``step`` raised gives ``Crashed(..., restarted=False)``.
        """
        self._check_open()
        payloads = step_payloads(indices, actions, "worker process")
        self._resync()
        sent = [self._send(i, p) for i, p in zip(indices, payloads)]
        answers = [
            self._receive(i, self.step_timeout) if ok else Crashed("pipe closed") for i, ok in zip(indices, sent)
        ]
        results: list[tuple[Any, ...] | Crashed] = []
        for i, answer in zip(indices, answers):
            if isinstance(answer, Crashed):
                self._restart(i)
                results.append(answer)
            elif answer[0] == "error":
                name, message, _ = answer[1]
                first = str(message).strip().splitlines()
                results.append(Crashed(f"{name}: {first[0][:300]}" if first else name, restarted=False))
            else:
                results.append(answer[1])
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
