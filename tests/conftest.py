"""Shared pytest fixtures: location of the read-only reference data in ../shared/data."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _shared_data() -> Path:
    env = os.environ.get("PROGPO_SHARED_DATA")
    if env:
        return Path(env)
    return ROOT.parent / "shared" / "data"


SHARED_DATA = _shared_data()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ../shared/data; skips the test with a clear message where it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"reference data not found at {SHARED_DATA} (set PROGPO_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def alfworld_engine_available() -> None:
    """Skip unless the ALFWorld engine (textworld[pddl] + alfworld) imports."""
    from progpo_envs.alfworld.engine import engine_available

    if not engine_available():
        pytest.skip("the ALFWorld engine is not installed: pip install 'progpo[alfworld]'")


@pytest.fixture
def kill_member_1():
    """``kill(envs)``: reset a 2 x 2 ``GroupVectorEnv`` of ``TextRoomsEnv``, SIGKILL member 1's
    worker and step every member once; checks that only member 1's episode was truncated (its
    worker restarted, the others' steps untouched) and returns ``(obs, obs2, infos, pids)``."""
    import signal

    def kill(envs):
        obs, _ = envs.reset()
        pids = envs.worker_pids
        os.kill(pids[1], signal.SIGKILL)
        obs2, _, term, trunc, infos = envs.step(["look", "look", "look", "inventory"])
        assert trunc.tolist() == [False, True, False, False] and not term.any()
        assert infos["worker_restarted"].tolist() == [False, True, False, False]
        assert obs2[0] == obs[0] and obs2[2] == obs[2] and obs2[3] == "You carry nothing."
        assert obs2[1] == obs[1] and infos["valid_action"][[0, 2, 3]].all()  # the crashed member keeps its observation
        return obs, obs2, infos, pids

    return kill


@pytest.fixture
def run_script():
    """``run_script("benchmarks/x.py", *args, timeout=300)``: one of the checkout's scripts run as a
    user runs it (this interpreter, from the checkout's root), its output captured as text."""
    root = Path(__file__).resolve().parents[1]

    def run(script: str, *args: object, timeout: float = 300) -> subprocess.CompletedProcess:
        cmd = [sys.executable, str(root / script), *map(str, args)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=root)

    return run
