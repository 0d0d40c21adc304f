"""progpo_envs.serve: both envs over OpenEnv's HTTP/WebSocket routes on loopback.

Expert episodes are computed in-process (the same seed gives the same task) and replayed through
the OpenEnv client, which must see the same observations and win.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv.core", reason="extra [openenv] not installed")
sys.path.insert(0, str(Path(__file__).parent))
from openenv_server import running_server

from progpo_envs.serve import CommandAction, ProGPOEnvClient, json_safe

pytestmark = pytest.mark.slow


def _post(url: str, body: bytes) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=body, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def _local_env(name: str, max_steps: int) -> Any:
    from trainers.envs import make_env

    return make_env(name, "train", max_steps)


def _webshop_expert(seed: int) -> tuple[list[str], list[str]]:
    """(commands, observations after each) of the oracle on the task of ``seed``, in-process."""
    from agents.baselines import WebShopOracleAgent

    env, agent = _local_env("webshop", 15), WebShopOracleAgent()
    obs, info = env.reset(seed=seed)
    cmds, texts, done = [], [obs], False
    while not done:
        cmd = agent.act([obs], [info])[0]
        obs, reward, term, trunc, info = env.step(cmd)
        cmds.append(cmd)
        texts.append(obs)
        done = term or trunc
    assert info["won"], "the oracle should win in-process"
    env.close()
    return cmds, texts


@pytest.fixture(scope="module")
def webshop_url():
    with running_server("webshop", "--max-sessions", "40") as url:
        yield url


def test_webshop_expert_episode_over_loopback_wins(webshop_url: str) -> None:
    cmds, texts = _webshop_expert(seed=3)
    with ProGPOEnvClient(base_url=webshop_url).sync() as env:
        r = env.reset(seed=3)
        assert r.observation.text == texts[0]
        assert r.observation.metadata["admissible_commands"] == r.observation.admissible_commands
        for k, cmd in enumerate(cmds):
            r = env.step(CommandAction(command=cmd))
            assert r.observation.text == texts[k + 1]
        assert r.done and r.observation.metadata["won"] and r.reward == pytest.approx(1.0)
        assert r.observation.coverage_rate == r.observation.metadata["coverage_rate"] > 0


def test_32_concurrent_sessions_keep_episodes_apart(webshop_url: str) -> None:
    """32 /ws sessions on 32 different tasks, steps interleaved; each matches its in-process twin."""
    seeds = list(range(100, 132))
    local = [_local_env("webshop", 15) for _ in seeds]
    first = [env.reset(seed=s)[0] for env, s in zip(local, seeds)]
    assert len(set(first)) > 1

    async def run() -> list[list[str]]:
        clients = [ProGPOEnvClient(base_url=webshop_url) for _ in seeds]
        await asyncio.gather(*(c.connect() for c in clients))
        try:
            resets = await asyncio.gather(*(c.reset(seed=s) for c, s in zip(clients, seeds)))
            seen = [[r.observation.text] for r in resets]
            for cmd in ("search[shoes]", "click[next >]", "search[gift set]"):
                results = await asyncio.gather(*(c.step(CommandAction(command=cmd)) for c in clients))
                for k, r in enumerate(results):
                    seen[k].append(r.observation.text)
            return seen
        finally:
            await asyncio.gather(*(c.close() for c in clients))

    seen = asyncio.run(run())
    for k, env in enumerate(local):
        want = [first[k]] + [env.step(cmd)[0] for cmd in ("search[shoes]", "click[next >]", "search[gift set]")]
        assert seen[k] == want, f"session {k} (seed {seeds[k]}) saw another session's episode"
        env.close()


def test_malformed_requests_get_4xx_and_server_goes_on(webshop_url: str) -> None:
    assert _post(webshop_url + "/step", b'{"action": {"cmd": 3}}')[0] == 422  # not the schema
    assert _post(webshop_url + "/step", b'{"action": {"command": 5}}')[0] == 422  # wrong type
    assert _post(webshop_url + "/step", b"not json")[0] == 422
    assert _post(webshop_url + "/reset", b'{"seed": "abc"}')[0] == 422
    schema = json.loads(urllib.request.urlopen(webshop_url + "/schema", timeout=30).read())
    assert schema["action"]["required"] == ["command"]
    # Stateless HTTP reset still serves, and a /ws session still plays.
    status, body = _post(webshop_url + "/reset", b'{"seed": 3}')
    assert status == 200 and body["observation"]["admissible_commands"] == ["search[<query>]"]
    with ProGPOEnvClient(base_url=webshop_url).sync() as env:
        env.reset(seed=3)
        r = env.step(CommandAction(command="\x00" * 10_000))  # junk command: an invalid action, not a crash
        assert r.observation.metadata["valid_action"] is False and not r.done


def test_alfworld_expert_episode_over_loopback_wins(alfworld_engine_available: None) -> None:
    env = _local_env("alfworld", 50)
    obs, _ = env.reset(seed=5)
    plan = env.unwrapped.expert_plan()
    env.close()
    assert plan
    with running_server("alfworld", "--max-sessions", "4") as url:
        with ProGPOEnvClient(base_url=url).sync() as client:
            r = client.reset(seed=5)
            assert r.observation.text == obs
            for cmd in plan:
                assert not r.done
                r = client.step(CommandAction(command=cmd))
            assert r.done and r.observation.metadata["won"] and r.reward == pytest.approx(1.0)
            assert r.observation.metadata["terminated"] is True


def test_json_safe_handles_numpy() -> None:
    import numpy as np

    assert json_safe({"x": np.arange(2), "y": np.float64("inf")}) == {"x": [0, 1], "y": None}


@pytest.mark.parametrize("task_id", ['"nope"', str(10**9), "[1, 2]", '{"a": 1}', "true"])
def test_http_reset_with_a_bad_task_id_is_a_4xx_with_one_line(webshop_url: str, task_id: str) -> None:
    status, body = _post(webshop_url + "/reset", f'{{"seed": 1, "task_id": {task_id}}}'.encode())
    assert status in (400, 422), (status, body)
    if status == 400:
        assert "task_id" in body["detail"] and "\n" not in body["detail"]
    assert _post(webshop_url + "/reset", b'{"seed": 3}')[0] == 200  # and the server goes on


def test_oversized_http_bodies_get_413_and_memory_stays_bounded(webshop_url: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    import psutil

    big = b'{"action": {"command": "' + b"x" * (50 * 2**20) + b'"}}'
    from openenv_server import server_pid

    proc = psutil.Process(server_pid(webshop_url))
    before = proc.memory_info().rss
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: _post(webshop_url + "/step", big)[0], range(8)))
    assert statuses == [413] * 8
    assert proc.memory_info().rss - before < 100 * 2**20  # 8 x 50 MB bodies were never held
    assert _post(webshop_url + "/reset", b'{"seed": 3}')[0] == 200


def test_idle_sessions_are_reaped_and_their_slots_reused() -> None:
    from openenv_server import idle_and_reconnect

    with running_server("webshop", "--max-sessions", "2", "--idle-timeout", "2") as url:
        waited = idle_and_reconnect(url, sessions=2, deadline=30.0)
    assert waited < 15.0  # reaped within the timeout plus one reaper pass (every max(T/4, 5) s)


@pytest.mark.parametrize(
    "flags, match",
    [
        (["--port", "99999"], "must be in 1..65535"),
        (["--max-sessions", "0"], "must be >= 1"),
        (["--idle-timeout", "-1"], "must be >= 0 seconds"),
    ],
)
def test_serve_cli_rejects_bad_numbers_in_one_line(flags: list[str], match: str) -> None:
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "progpo_envs.serve", "--env", "webshop", *flags],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and match in proc.stderr and "Traceback" not in proc.stderr


def test_a_reaped_session_stays_expired_so_the_cap_holds() -> None:
    """With --max-sessions 1: a session reaped while its socket stays open cannot be revived by a
    reset (nor stepped); it is told the session expired, and one new client plays at a time."""
    import asyncio

    import websockets
    from openenv_server import _try

    async def send(ws: Any, kind: str, data: dict) -> dict:
        await ws.send(json.dumps({"type": kind, "data": data}))
        return json.loads(await ws.recv())

    async def run(url: str) -> None:
        ws_url = url.replace("http://", "ws://") + "/ws"
        stale = [await websockets.connect(ws_url, ping_interval=0.5)]
        assert (await send(stale[0], "reset", {"seed": 1}))["type"] == "observation"
        for _ in range(2):  # reaped, then its slot taken by the next session, which idles in turn
            await asyncio.sleep(9.0)  # > the 2 s idle timeout plus one 5 s reaper pass
            nxt = await websockets.connect(ws_url, ping_interval=0.5)
            assert (await send(nxt, "reset", {"seed": 2}))["type"] == "observation"
            stale.append(nxt)
        player = stale.pop()  # the one live session; the others were reaped
        for ws in stale:
            for kind, data in (("reset", {"seed": 3}), ("step", {"command": "search[shoes]"})):
                answer = await send(ws, kind, data)
                assert answer["type"] == "error" and "session expired" in answer["data"]["message"], answer
        assert (await send(player, "step", {"command": "search[red shoes]"}))["type"] == "observation"
        # the cap: the live session holds the only slot
        assert await _try(ws_url, lambda ws: send(ws, "reset", {"seed": 4})) is None
        for ws in [*stale, player]:
            await ws.close()

    with running_server("webshop", "--max-sessions", "1", "--idle-timeout", "2") as url:
        asyncio.run(run(url))


def test_a_session_whose_first_reset_was_refused_then_plays(webshop_url: str) -> None:
    """A bad task id on the first reset, then a good reset: the episode steps normally."""
    with ProGPOEnvClient(base_url=webshop_url).sync() as env:
        with pytest.raises(Exception, match="cannot be played|task_id"):
            env.reset(task_id="no-such-goal")
        r = env.reset(seed=3)
        r = env.step(CommandAction(command=r.observation.admissible_commands[0].replace("<query>", "shoes")))
        assert r.observation.metadata["valid_action"] is True and not r.done


def test_normally_closed_sessions_leave_no_traceback_in_the_server_log() -> None:
    """A client that resets, steps and closes its /ws session is an ordinary session end: the
    server's log at its default level stays free of ASGI tracebacks."""
    log: list[str] = []
    with running_server("webshop", log_out=log) as url:
        for seed in (1, 2):
            with ProGPOEnvClient(base_url=url).sync() as env:
                r = env.reset(seed=seed)
                env.step(CommandAction(command=r.observation.admissible_commands[0]))
        time.sleep(1.0)  # the server handles the closes
    assert log and "Traceback" not in log[0] and "Exception in ASGI application" not in log[0], log[0][-2000:]
