"""Fuzzing the action input (>= 2k actions) and fast-vs-stock transcript identity."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import progpo_envs  # noqa: F401  (registers the ids)
from progpo_envs.alfworld.games import discover_games, resolve_data_dir

ACTIONS_PER_EXAMPLE = 50
EXAMPLES = 44  # 44 * 50 = 2200 actions


@pytest.fixture(scope="module")
def fuzz_env(alfworld_engine: None):
    e = gym.make("ProGPO-ALFWorld-v0", split="valid")
    yield e
    e.close()


_action = st.one_of(
    st.text(max_size=40),  # any unicode, incl. empty and control characters
    st.sampled_from(["go to", "take", "open", "use", "move  to", "put mug 1 in/on desk 1", "look", "inventory"]),
    st.integers(min_value=0, max_value=10_000),  # index into the admissible commands
    st.binary(max_size=20),
)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 10_000), actions=st.lists(_action, min_size=ACTIONS_PER_EXAMPLE, max_size=ACTIONS_PER_EXAMPLE)
)
def test_fuzz_actions_never_crash(fuzz_env, seed, actions) -> None:
    _, info = fuzz_env.reset(seed=seed)
    step = 0
    for a in actions:  # every action is played: a finished episode is reset and the next one goes on
        if isinstance(a, int):
            a = info["admissible_commands"][a % len(info["admissible_commands"])]
        legal = isinstance(a, str) and a.strip() in info["admissible_commands"]
        prev = info["admissible_commands"]
        obs, r, term, trunc, info = fuzz_env.step(a)
        step += 1
        assert isinstance(obs, str) and obs and info["step"] == step
        assert fuzz_env.observation_space.contains(obs)
        assert info["valid_action"] is legal
        if not legal:
            assert obs == "Nothing happens." and r == 0.0 and info["admissible_commands"] == prev
        assert term == info["won"] and (r == 1.0) == term
        assert trunc == (not term and step >= 50)
        if term or trunc:
            _, info = fuzz_env.reset(seed=seed + step)
            step = 0


def _check(game_files: list[Path], steps: int = 50) -> None:
    from progpo_envs.alfworld.engine import StockEngine
    from progpo_envs.alfworld.fast import FastEngine
    from progpo_envs.alfworld.identity import compare_game

    stock, fast = StockEngine(), FastEngine()
    for i, f in enumerate(game_files):
        m = compare_game(stock, fast, str(f), steps=steps, seed=i)
        assert m is None, f"{m.game} step {m.step} {m.what}:\nstock={m.stock!r}\nfast ={m.fast!r}"
    fast.close()


def test_fast_equals_stock_sample(alfworld_engine, real_alfworld: Path) -> None:
    real = discover_games(resolve_data_dir(real_alfworld), "valid_unseen")
    from progpo_envs.alfworld.embedded import embedded_root

    gen = discover_games(embedded_root() / "json_2.1.1", "valid")
    # one real game (old grammar) and one generated game (wheel grammar), 50 steps each
    _check([real[7].path, gen[0].path])


@pytest.mark.slow
def test_fast_equals_stock_more_games(alfworld_engine, real_alfworld: Path) -> None:
    real = discover_games(resolve_data_dir(real_alfworld), "valid_unseen")
    from progpo_envs.alfworld.embedded import embedded_root

    hard = discover_games(embedded_root() / "json_2.1.1", "hard")
    by_type = {}
    for g in real:
        by_type.setdefault(g.task_type, g)
    # two more real task types (the fast test covers another) and two hard generated games
    picked = [by_type["look_at_obj_in_light"], by_type["pick_heat_then_place_in_recep"]]
    _check([g.path for g in picked] + [hard[0].path, hard[-1].path])


@pytest.mark.slow
def test_fast_equals_stock_when_the_memento_cache_is_emptied_at_every_game(
    alfworld_engine, real_alfworld: Path, monkeypatch
) -> None:
    """Bounding textworld's global memo cache changes nothing a player sees (objects compare by value)."""
    from progpo_envs.alfworld.embedded import embedded_root
    from progpo_envs.alfworld.fast import memo

    monkeypatch.setattr(memo, "MEMENTO_LIMIT", 0)  # emptied at every load of the fast engine
    real = discover_games(resolve_data_dir(real_alfworld), "valid_unseen")
    gen = discover_games(embedded_root() / "json_2.1.1", "valid")
    _check([real[7].path, gen[0].path, real[7].path], steps=30)


@pytest.mark.slow
def test_memory_stays_flat_over_many_distinct_games(alfworld_engine, monkeypatch) -> None:
    """A process cycling distinct games: the memo cache stays under its bound and the traced
    memory stops growing once the (LRU-bounded) per-game caches are full."""
    import gc
    import tracemalloc

    import gymnasium as gym
    from mementos import core

    from progpo_envs.alfworld.fast import grammar, memo, translation

    monkeypatch.setattr(memo, "MEMENTO_LIMIT", 5_000)
    for table in (grammar._LOGIC, translation._TASKS):  # small LRUs: full after a few games
        monkeypatch.setattr(table, "size", 4)
    memo.clear_caches()
    env = gym.make("ProGPO-ALFWorld-v0", split="train")
    ids = env.unwrapped.task_ids[:34]
    traced = []
    try:  # traced from game 10 on, once the small LRUs are full (tracing slows every allocation)
        for k, tid in enumerate(ids):
            if k == 10:
                gc.collect()
                tracemalloc.start()
                traced.append(tracemalloc.get_traced_memory()[0])
            _, info = env.reset(options={"task_id": tid})
            env.step(info["admissible_commands"][0])
            assert len(core._memento_cache) < memo.MEMENTO_LIMIT + 5_000  # one game adds ~450
        gc.collect()
        traced.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
        env.close()
        memo.clear_caches()
    assert traced[1] - traced[0] < 8 * 2**20, [t / 2**20 for t in traced]  # 24 more distinct games
