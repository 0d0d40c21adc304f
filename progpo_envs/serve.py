"""Serve ProGPO-ALFWorld-v0 / ProGPO-WebShop-v0 over OpenEnv's HTTP/WebSocket interface.

Run (extra ``[openenv]``: ``pip install "progpo[openenv,alfworld,webshop]"``)::

    python -m progpo_envs.serve --env alfworld --port 8011            # 127.0.0.1:8011
    python -m progpo_envs.serve --env webshop --port 8012 --max-sessions 64 --host 0.0.0.0

The app is built by ``openenv-core``'s ``create_fastapi_app``, so the routes are OpenEnv's
standard ones: ``POST /reset {"seed", "episode_id", "task_id"?}``, ``POST /step {"action":
{"command": "..."}}`` (an action that does not fit the schema gets HTTP 422), ``GET /schema``,
``GET /health``, ``GET /metadata`` and ``/ws`` sessions. As in every OpenEnv server, the HTTP
``/reset`` and ``/step`` routes are stateless (each request gets a fresh env); an *episode*
lives in a ``/ws`` session, one env per session, up to ``--max-sessions`` at once. That is what
:class:`ProGPOEnvClient` (an OpenEnv ``EnvClient``) uses.

Limits. A session that sends no message for ``--idle-timeout`` seconds (default 600; pings do not
count) is closed by OpenEnv's reaper and its slot reused, so idle clients cannot lock others out;
every later message on the reaped session's socket is refused with "session expired", so at most
``--max-sessions`` sessions ever play.
An HTTP body over ``--max-body-bytes`` (default 4 MiB, the WebSocket frame cap) gets 413 and is
never held whole; a reset with a bad ``task_id`` gets 400 with one line.

- Action: :class:`CommandAction` -- one string field, ``command`` (``"go to desk 1"``,
  ``"search[red shoes]"``, ``"click[buy now]"``).
- Observation: :class:`TextObservation` -- ``text`` (what the agent reads), ``done``,
  ``reward`` (the env's outcome reward of the step), ``admissible_commands``, ``coverage``,
  ``coverage_rate`` and ``metadata``: the env's ``info`` made JSON-safe (sent as ``info``,
  since OpenEnv's serializer drops ``metadata``; the client restores it), so it carries ``admissible_commands``, ``coverage``, ``coverage_rate``,
  ``first_visit``, ``canonical_obs``, ``won``, ``valid_action``, ``task_id``, ``goal``... plus
  ``terminated`` / ``truncated``.
- The served env is ``FirstVisitCoverage(CanonicalizeObservation(gym.make(id, ...)))``, i.e. the
  same signals as in-process. Bad commands never end an episode (the env answers
  ``valid_action=False``).

Threads. OpenEnv runs each session's env calls on a worker thread. ALFWorld (TextWorld +
fast-downward) is not thread-safe, so :class:`ALFWorldEnvironment` asks OpenEnv for one shared
single-thread executor (``REQUIRES_SINGLE_THREAD_EXECUTOR``): sessions stay independent and
interleave, their engine calls run one at a time. WebShop sessions run on their own threads.

Client example (the server above running)::

    from progpo_envs.serve import CommandAction, ProGPOEnvClient
    with ProGPOEnvClient(base_url="http://127.0.0.1:8011").sync() as env:
        result = env.reset(seed=3)
        print(result.observation.metadata["admissible_commands"][:3])
        result = env.step(CommandAction(command="look"))
        print(result.reward, result.done, result.observation.metadata["coverage_rate"])
"""

# Over 500 lines: OpenEnv's three parts for one env (its typed action, observation and state, the
# environment served, and the client) live together with the server's limits and command line, so that
# the server and its client cannot drift apart.
from __future__ import annotations

import argparse
import json
import logging
import math
import uuid
from typing import Any, Callable, ClassVar, Mapping, Sequence

import gymnasium as gym
from pydantic import Field

from progpo_envs import ALFWORLD_ID, WEBSHOP_ID
from progpo_envs.alfworld.canonical import canonicalize_alfworld
from progpo_envs.webshop.canonical import canonicalize_webshop
from wrappers import CanonicalizeObservation, FirstVisitCoverage
from wrappers.errors import UserError
from wrappers.group.member_pools import describe_error  # the one-line "Type: message" of an exception

try:  # openenv-core is the optional extra [openenv]; fail with the install command
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient
    from openenv.core.env_server import Action, Environment, Observation, State, create_fastapi_app
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError('progpo_envs.serve needs openenv-core: pip install "progpo[openenv]"') from exc

__all__ = [
    "ALFWorldEnvironment",
    "BadTaskError",
    "BodyLimit",
    "CommandAction",
    "ENVIRONMENT_CLASSES",
    "EpisodeState",
    "ProGPOEnvClient",
    "ProGPOEnvironment",
    "SessionExpiredError",
    "TextObservation",
    "WebShopEnvironment",
    "build_app",
    "main",
]

ENV_NAMES: tuple[str, ...] = ("alfworld", "webshop")


class CommandAction(Action):
    """One text command, e.g. ``CommandAction(command="go to desk 1")``."""

    command: str = Field(..., description="The text command the agent sends (one line)")


class TextObservation(Observation):
    """What the agent reads after a reset or a step, with the env's signals.

    OpenEnv's wire format drops ``metadata`` (its serializer excludes it), so the env's info also
    travels as ``info``; :class:`ProGPOEnvClient` puts it back into ``metadata``.
    """

    text: str = Field(default="", description="Observation text")
    admissible_commands: list[str] = Field(default_factory=list, description="Commands the env accepts now")
    coverage: int = Field(default=0, description="First-visit coverage D - 1 (new states reached this episode)")
    coverage_rate: float = Field(default=0.0, description="Coverage rate (D - 1) / T")
    info: dict[str, Any] = Field(default_factory=dict, description="The env's info, JSON-safe (= metadata)")


def _observation(text: Any, info: dict[str, Any], reward: float, done: bool, **extra: Any) -> TextObservation:
    meta = {**json_safe(info), **extra}
    return TextObservation(
        text=str(text),
        done=done,
        reward=reward,
        metadata=meta,
        info=meta,
        admissible_commands=[str(c) for c in meta.get("admissible_commands") or []],
        coverage=int(meta.get("coverage") or 0),
        coverage_rate=float(meta.get("coverage_rate") or 0.0),
    )


class BadTaskError(UserError, ValueError):
    """A reset asked for a task id that is not one of the env's (answered 400, one line)."""


class SessionExpiredError(UserError, RuntimeError):
    """A message on a /ws session the server has closed (idle past ``--idle-timeout``): refused."""


class EpisodeState(State):
    """Session state: OpenEnv's ``episode_id`` / ``step_count`` plus the task."""

    task_id: str | None = None
    seed: int | None = None


def json_safe(value: Any) -> Any:
    """``value`` as JSON-serialisable data (numpy scalars/arrays, tuples, non-finite floats).

    >>> import numpy as np
    >>> json_safe({"a": np.float32(0.5), "b": (1, np.bool_(True)), "c": float("nan")})
    {'a': 0.5, 'b': [1, True], 'c': None}
    """
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy scalar / array
        return json_safe(value.tolist())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


class ProGPOEnvironment(Environment[CommandAction, TextObservation, EpisodeState]):
    """OpenEnv ``Environment`` over one wrapped ProGPO env (subclasses fix ``env_name``).

    ``reset(seed=s)`` picks the task from the seed exactly as ``gym.make(...).reset(seed=s)``
    does; ``reset(task_id=...)`` picks it by id. ``env_kwargs`` go to ``gym.make`` (``split``,
    ``max_episode_steps``, ``data_dir``...).

    >>> env = WebShopEnvironment(max_episode_steps=5)  # doctest: +SKIP
    >>> env.reset(seed=0).metadata["admissible_commands"]  # doctest: +SKIP
    ['search[<query>]']
    """

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True
    env_name: ClassVar[str] = ""

    def __init__(self, **env_kwargs: Any) -> None:
        super().__init__()
        self._env_kwargs = env_kwargs
        self._env: gym.Env | None = None  # built on first reset (get_metadata/state stay cheap)
        self._state = EpisodeState()
        self._done = False
        #: set by close(): OpenEnv's idle reaper closes a session's env but not its socket, so every
        #: later message on it is refused (else a reset would revive a session the cap no longer counts)
        self._closed = False

    def _refuse_if_closed(self) -> None:
        if self._closed:
            raise SessionExpiredError(
                "session expired: it was idle past the server's --idle-timeout and its slot "
                "was freed; open a new connection"
            )

    def _make(self) -> gym.Env:
        import progpo_envs  # noqa: F401  (registers the ids)

        canon: Callable[[str, Mapping[str, Any]], str]
        if self.env_name == "alfworld":
            canon = canonicalize_alfworld
            env_id = ALFWORLD_ID
        elif self.env_name == "webshop":
            canon = canonicalize_webshop
            env_id = WEBSHOP_ID
        else:
            raise ValueError(f"unknown env {self.env_name!r}; choose one of {ENV_NAMES}")
        return FirstVisitCoverage(CanonicalizeObservation(gym.make(env_id, **self._env_kwargs), canon))

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, task_id: Any = None, **kwargs: Any
    ) -> TextObservation:
        if task_id is not None and (isinstance(task_id, bool) or not isinstance(task_id, (str, int))):
            raise BadTaskError(f"task_id must be a string or an integer, got {type(task_id).__name__}")
        self._refuse_if_closed()
        if self._env is None:
            self._env = self._make()
        options = {"task_id": task_id} if task_id is not None else None
        try:
            obs, info = self._env.reset(seed=seed, options=options)
        except Exception as err:  # a bad task id is the client's error, said in one line
            if task_id is None:
                raise
            raise BadTaskError(f"task_id {task_id!r} cannot be played: {describe_error(err)}") from None
        self._done = False
        self._state = EpisodeState(
            episode_id=episode_id or str(uuid.uuid4()),
            step_count=0,
            task_id=None if info.get("task_id") is None else str(info["task_id"]),
            seed=seed,
        )
        return _observation(obs, info, 0.0, False, terminated=False, truncated=False)

    def step(self, action: CommandAction, timeout_s: float | None = None, **kwargs: Any) -> TextObservation:
        self._refuse_if_closed()
        if self._env is None or self._done:
            why = "No episode: call reset first." if self._env is None else "Episode is over: call reset."
            return _observation(why, {"error": why, "valid_action": False}, 0.0, True)
        obs, reward, terminated, truncated, info = self._env.step(action.command)
        self._done = bool(terminated or truncated)
        self._state.step_count += 1
        return _observation(
            obs, info, float(reward), self._done, terminated=bool(terminated), truncated=bool(truncated)
        )

    @property
    def state(self) -> EpisodeState:
        return self._state

    def close(self) -> None:
        self._closed = True
        if self._env is not None:
            self._env.close()
            self._env = None


class ALFWorldEnvironment(ProGPOEnvironment):
    """``ProGPO-ALFWorld-v0`` per session; engine calls on one shared thread (not thread-safe)."""

    env_name: ClassVar[str] = "alfworld"
    REQUIRES_SINGLE_THREAD_EXECUTOR: ClassVar[bool] = True


class WebShopEnvironment(ProGPOEnvironment):
    """``ProGPO-WebShop-v0`` per session."""

    env_name: ClassVar[str] = "webshop"


#: the OpenEnv environment class of each env name
ENVIRONMENT_CLASSES: dict[str, type[ProGPOEnvironment]] = {
    "alfworld": ALFWorldEnvironment,
    "webshop": WebShopEnvironment,
}


def environment_class(name: str, **env_kwargs: Any) -> type[ProGPOEnvironment]:
    """The environment class for ``name``, with ``env_kwargs`` bound as class defaults.

    OpenEnv detects ``SUPPORTS_CONCURRENT_SESSIONS`` and ``REQUIRES_SINGLE_THREAD_EXECUTOR``
    on a class factory, so kwargs are bound by subclassing rather than by ``functools.partial``.
    """
    if name not in ENVIRONMENT_CLASSES:
        raise ValueError(f"unknown env {name!r}; choose one of {ENV_NAMES}")
    base = ENVIRONMENT_CLASSES[name]
    if not env_kwargs:
        return base
    bound = dict(env_kwargs)

    def __init__(self: ProGPOEnvironment, **kw: Any) -> None:
        base.__init__(self, **{**bound, **kw})

    return type(base.__name__, (base,), {"__init__": __init__, "__module__": __name__})


#: Seconds a /ws session may stay silent (pings do not count) before its slot is freed.
DEFAULT_IDLE_TIMEOUT = 600.0
#: Largest HTTP request body accepted (as the 4 MiB cap on WebSocket frames); larger gets 413.
MAX_BODY_BYTES = 4 * 2**20


class BodyLimit:
    """ASGI middleware: an HTTP request body over ``max_bytes`` gets 413 with a one-line reason;
    the app (and its JSON parser) never sees it, and no more than ``max_bytes`` of it is held
    (the rest is read and dropped, so the client gets the answer instead of a reset)."""

    def __init__(self, app: Any, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app, self.max_bytes = app, int(max_bytes)

    async def _reject(self, receive: Any, send: Any, more: bool) -> None:
        while more:  # drop the rest unread-into-memory, so the client can read the answer
            message = await receive()
            more = message["type"] == "http.request" and message.get("more_body", False)
        body = json.dumps({"detail": f"request body over {self.max_bytes} bytes; send one command per step"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            await _quiet_close(self.app, scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(receive, send, more=True)
            return
        chunks, size = [], 0
        while True:  # read the whole body, counting: a chunked upload has no content-length
            message = await receive()
            if message["type"] != "http.request":
                chunks.append(message)
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                chunks.clear()
                await self._reject(receive, send, more=message.get("more_body", False))
                return
            chunks.append(message)
            if not message.get("more_body", False):
                break
        replay = iter(chunks)

        async def replayed() -> Any:
            nxt = next(replay, None)
            return nxt if nxt is not None else await receive()

        await self.app(scope, replayed, send)


async def _quiet_close(app: Any, scope: Any, receive: Any, send: Any) -> None:
    """A ``/ws`` connection: OpenEnv closes the socket after its client has already closed it,
    which the server's ASGI layer reports as a ``WebSocketDisconnect`` traceback at every normal
    end of a connection. That one exception is the normal end, logged as one line (debug level)."""
    from starlette.websockets import WebSocketDisconnect  # the [openenv] extra

    try:
        await app(scope, receive, send)
    except WebSocketDisconnect as exc:
        logging.getLogger("progpo_envs.serve").debug("/ws session closed by the client (code %s)", exc.code)


def build_app(
    env: str,
    max_sessions: int = 64,
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
    max_body_bytes: int = MAX_BODY_BYTES,
    **env_kwargs: Any,
) -> Any:
    """The FastAPI app serving ``env`` (``"alfworld"`` or ``"webshop"``) with OpenEnv's routes.

    ``idle_timeout``: seconds a /ws session may go without a message before OpenEnv's reaper
    closes its env and frees the slot (checked every ``max(idle_timeout / 4, 5)`` s; ``None``:
    never). ``max_body_bytes``: larger HTTP bodies get 413. A bad ``task_id`` gets 400.

    >>> app = build_app("webshop", max_sessions=4)  # doctest: +SKIP
    >>> sorted(r.path for r in app.routes if r.path in ("/reset", "/step", "/schema", "/ws"))  # doctest: +SKIP
    ['/reset', '/schema', '/step', '/ws']
    """
    from fastapi.responses import JSONResponse  # the [openenv] extra
    from openenv.core.env_server import ConcurrencyConfig  # the [openenv] extra

    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
        raise ValueError(f"max_sessions must be an int >= 1, got {max_sessions!r}")
    if idle_timeout is not None and not (
        isinstance(idle_timeout, (int, float)) and math.isfinite(idle_timeout) and idle_timeout > 0
    ):
        raise ValueError(f"idle_timeout must be a number of seconds > 0 or None, got {idle_timeout!r}")
    app = create_fastapi_app(
        environment_class(env, **env_kwargs),
        CommandAction,
        TextObservation,
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=idle_timeout),
    )

    async def bad_task(request: Any, exc: BadTaskError) -> Any:
        return JSONResponse(status_code=400, content={"detail": str(exc)})

    app.add_exception_handler(BadTaskError, bad_task)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    return app


class ProGPOEnvClient(EnvClient[CommandAction, TextObservation, EpisodeState]):
    """OpenEnv client of a ProGPO server (async; ``.sync()`` for a blocking one).

    >>> with ProGPOEnvClient(base_url="http://127.0.0.1:8011").sync() as env:  # doctest: +SKIP
    ...     r = env.reset(seed=0); r = env.step(CommandAction(command="look"))
    """

    def _step_payload(self, action: CommandAction) -> dict[str, Any]:
        return {"command": action.command}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[TextObservation]:
        obs = payload.get("observation", {}) or {}
        done = bool(payload.get("done", obs.get("done", False)))
        reward = payload.get("reward", obs.get("reward"))
        info = obs.get("info") or {}
        return StepResult(
            observation=TextObservation(
                text=obs.get("text", ""),
                done=done,
                reward=reward,
                metadata=info,
                info=info,
                admissible_commands=obs.get("admissible_commands") or [],
                coverage=obs.get("coverage", 0),
                coverage_rate=obs.get("coverage_rate", 0.0),
            ),
            reward=reward,
            done=done,
        )

    def _parse_state(self, payload: dict[str, Any]) -> EpisodeState:
        return EpisodeState(**payload)


def _parse_kwargs(pairs: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep:
            raise SystemExit(f"--env-kwarg expects KEY=VALUE, got {pair!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def _bounded_int(low: int, high: int | None = None) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(
                f"must be in {low}..{high}, got {value}" if high is not None else f"must be >= {low}, got {value}"
            )
        return value

    return parse


def _seconds(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 seconds (0: no timeout), got {text}")
    return value or None


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m progpo_envs.serve --env alfworld|webshop --port P [--host H]``."""
    parser = argparse.ArgumentParser(prog="python -m progpo_envs.serve", description=__doc__.split("\n")[0])
    parser.add_argument("--env", choices=ENV_NAMES, required=True)
    parser.add_argument("--port", type=_bounded_int(1, 65535), default=8000, help="TCP port, 1..65535")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default loopback only)")
    parser.add_argument("--max-sessions", type=_bounded_int(1), default=64, help="concurrent /ws sessions (>= 1)")
    parser.add_argument(
        "--idle-timeout",
        type=_seconds,
        default=DEFAULT_IDLE_TIMEOUT,
        help=f"seconds a /ws session may stay silent before its slot is freed (default "
        f"{DEFAULT_IDLE_TIMEOUT:.0f}; 0: never)",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=_bounded_int(1024),
        default=MAX_BODY_BYTES,
        help=f"largest HTTP request body (default {MAX_BODY_BYTES}); larger gets 413",
    )
    parser.add_argument(
        "--env-kwarg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help='gym.make keyword (JSON value), e.g. split="valid_seen"; repeatable',
    )
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    import uvicorn  # the [openenv] extra

    app = build_app(
        args.env,
        args.max_sessions,
        idle_timeout=args.idle_timeout,
        max_body_bytes=args.max_body_bytes,
        **_parse_kwargs(args.env_kwarg),
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, ws_max_size=2**22)


if __name__ == "__main__":
    main()
