"""Fixtures for the ALFWorld tests: engine availability, the 30 real games, their walkthroughs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from progpo_envs.alfworld.engine import engine_available


@pytest.fixture(scope="session")
def _alfworld_cache_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("progpo_cache")


@pytest.fixture(scope="module", autouse=True)
def _alfworld_cache_dir(_alfworld_cache_path: Path):
    """Keep the materialized embedded games and the translation cache in the session's tmp dir.

    Set per module (and undone after it) rather than for the whole session: PROGPO_CACHE_DIR
    also moves the model cache, and the tests after this folder should keep the warm one.
    """
    before = os.environ.get("PROGPO_CACHE_DIR")
    os.environ["PROGPO_CACHE_DIR"] = str(_alfworld_cache_path)
    yield
    if before is None:
        os.environ.pop("PROGPO_CACHE_DIR", None)
    else:
        os.environ["PROGPO_CACHE_DIR"] = before


@pytest.fixture(scope="session")
def alfworld_engine() -> None:
    """Skip unless textworld[pddl] + alfworld import (CI installs them with the alfworld extra)."""
    if not engine_available():
        pytest.skip("the ALFWorld engine (textworld[pddl], alfworld) is not installed: pip install 'progpo[alfworld]'")


@pytest.fixture(scope="session")
def real_alfworld(shared_data: Path) -> Path:
    """The folder holding json_2.1.1/valid_unseen with the 30 real games."""
    root = shared_data / "alfworld-real"
    if not (root / "json_2.1.1" / "valid_unseen").is_dir():
        pytest.skip(f"real ALFWorld games not found under {root}")
    return root


@pytest.fixture(scope="session")
def real_walkthroughs(alfworld_engine: None, real_alfworld: Path, tmp_path_factory: pytest.TempPathFactory):
    """task_id -> walkthrough of the handcoded expert, computed once per session and cached on disk."""
    cache = tmp_path_factory.getbasetemp() / "alfworld_real_walkthroughs.json"
    plans: dict[str, list[str]] = json.loads(cache.read_text()) if cache.exists() else {}

    def get(engine, record) -> list[str]:
        from progpo_envs.alfworld.expert import solve

        if record.task_id not in plans:
            engine.load(str(record.path))
            plans[record.task_id] = solve(engine)
            cache.write_text(json.dumps(plans))
        return plans[record.task_id]

    return get
