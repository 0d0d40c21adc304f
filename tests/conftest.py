"""Shared pytest fixtures: location of the read-only reference data in ../shared/data."""
from __future__ import annotations

import os
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
