"""Start ``python -m progpo_envs.serve`` on a free loopback port for a test, and stop it."""
from __future__ import annotations

import contextlib
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
def running_server(env: str, *extra: str, timeout: float = 180.0) -> Iterator[str]:
    """Yield the base URL of a server for ``env``; the server runs in its own process group."""
    port = free_port()
    log = tempfile.TemporaryFile()  # a file, not a pipe: an unread pipe fills up and blocks the server
    proc = subprocess.Popen(
        [sys.executable, "-m", "progpo_envs.serve", "--env", env, "--port", str(port), *extra],
        cwd=ROOT, start_new_session=True, stdout=log, stderr=subprocess.STDOUT,
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
        tail = log.read().decode(errors="replace")[-3000:]
        log.close()
        if os.environ.get("PROGPO_SERVER_LOG"):
            print(tail)
