"""Start ``python -m progpo_envs.serve`` on a free loopback port for a test, and stop it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running_server(env: str, *extra: str, timeout: float = 180.0, log_out: list[str] | None = None) -> Iterator[str]:
    """Yield the base URL of a server for ``env``; the server runs in its own process group.
    ``log_out``: a list that gets the server's whole log once it has stopped."""
    port = free_port()
    log = tempfile.TemporaryFile()  # a file, not a pipe: an unread pipe fills up and blocks the server
    proc = subprocess.Popen(
        [sys.executable, "-m", "progpo_envs.serve", "--env", env, "--port", str(port), *extra],
        cwd=ROOT,
        start_new_session=True,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"server exited: {log.read().decode(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"server on {url} not healthy after {timeout} s")
            time.sleep(0.5)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.seek(0)
        whole = log.read().decode(errors="replace")
        tail = whole[-3000:]
        log.close()
        if log_out is not None:
            log_out.append(whole)
        if os.environ.get("PROGPO_SERVER_LOG"):
            print(tail)


def idle_and_reconnect(url: str, sessions: int, deadline: float) -> float:
    """Fill every /ws slot with idle sessions (each reset once, then silent but kept open and
    answering pings), check that one more client is refused, then return how many seconds it
    took until a new client got a slot and played a reset."""
    import asyncio

    import websockets

    ws_url = url.replace("http://", "ws://") + "/ws"

    async def reset(ws: object) -> dict:
        await ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
        return json.loads(await ws.recv())

    async def run() -> float:
        idle = [await websockets.connect(ws_url, ping_interval=0.5) for _ in range(sessions)]
        try:
            for ws in idle:
                assert (await reset(ws)).get("type") == "observation"
            t0 = time.monotonic()
            refused = await _try(ws_url, reset)
            assert refused is None, "a client got a slot while every slot was held"
            while time.monotonic() - t0 < deadline:
                got = await _try(ws_url, reset)
                if got is not None and got.get("type") == "observation":
                    return time.monotonic() - t0
                await asyncio.sleep(0.5)
            raise AssertionError(f"no slot freed within {deadline} s")
        finally:
            for ws in idle:
                with contextlib.suppress(Exception):
                    await ws.close()

    return asyncio.run(run())


async def _try(ws_url: str, reset: object) -> dict | None:
    """The answer to a reset from a new client; None when the server refuses it a slot."""
    import websockets

    try:
        async with websockets.connect(ws_url) as ws:
            answer = await reset(ws)
            return None if answer.get("type") == "error" else answer
    except (websockets.ConnectionClosed, OSError):
        return None


def server_pid(url: str) -> int:
    """The process id of the server listening on ``url``'s port."""
    import psutil

    port = int(url.rsplit(":", 1)[1])
    return next(
        c.pid
        for c in psutil.net_connections("tcp")
        if c.laddr and c.laddr.port == port and c.status == "LISTEN" and c.pid
    )
