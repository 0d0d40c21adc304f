"""The task generator and the embedded default set."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import gymnasium as gym
import pytest

import progpo_envs  # noqa: F401  (registers the ids)
from progpo_envs.alfworld.embedded import ARCHIVE, load_archive
from progpo_envs.alfworld.tasks import TASK_TYPES, TaskSpec


def test_default_set_shape() -> None:
    payload = load_archive(ARCHIVE)
    per_split = Counter((g["split"], g["traj_data"]["task_type"]) for g in payload["games"])
    for tt in TASK_TYPES:
        assert per_split[("train", tt)] >= 20
        assert per_split[("valid", tt)] >= 1 and per_split[("hard", tt)] >= 1
    ids = [(g["split"], g["task_folder"], g["trial"]) for g in payload["games"]]
    assert len(ids) == len(set(ids))
    for g in payload["games"]:
        spec = TaskSpec.from_goal_pddl(g["pddl_problem"])
        assert spec.task_type == g["traj_data"]["task_type"] == g["task_folder"].split("-")[0]
        assert g["walkthrough"] and len(g["walkthrough"]) <= 20
    # valid games come from floor plans that train never uses (unseen scenes)
    scenes = {
        s: {g["traj_data"]["scene"]["floor_plan"] for g in payload["games"] if g["split"] == s}
        for s in ("train", "valid")
    }
    assert not scenes["train"] & scenes["valid"]
    assert ARCHIVE.stat().st_size < 3_000_000


def test_hard_games_are_harder() -> None:
    games = load_archive(ARCHIVE)["games"]
    mean = {
        s: sum(len(g["walkthrough"]) for g in games if g["split"] == s) / sum(g["split"] == s for g in games)
        for s in ("valid", "hard")
    }
    objects = {
        s: sum(g["pddl_problem"].count("- object") for g in games if g["split"] == s)
        / sum(g["split"] == s for g in games)
        for s in ("valid", "hard")
    }
    assert mean["hard"] > mean["valid"] and objects["hard"] > objects["valid"]


def test_materialized_set_is_content_keyed(alfworld_engine, tmp_path: Path) -> None:
    from progpo_envs.alfworld.embedded import embedded_root

    a = embedded_root(cache_dir=tmp_path)
    assert embedded_root(cache_dir=tmp_path) == a
    game = next((a / "json_2.1.1" / "hard").glob("*/*/game.tw-pddl"))
    data = json.loads(game.read_text())
    assert data["solvable"] is True and data["walkthrough"] and "UNKNOWN GOAL" not in data["grammar"]
    changed = tmp_path / "other.json.xz"
    changed.write_bytes(ARCHIVE.read_bytes())  # same content -> same key
    assert embedded_root(changed, cache_dir=tmp_path) == a


@pytest.mark.slow
def test_generator_cli_writes_original_layout_and_games_are_won(alfworld_engine, tmp_path: Path) -> None:
    from progpo_envs.alfworld.generate import main

    assert (
        main(
            [
                "--out",
                str(tmp_path),
                *(
                    "--per-type 1 --seed 5 --split train -q --task-types pick_two_obj_and_place "
                    "look_at_obj_in_light --floor-plans FloorPlan301 FloorPlan302 FloorPlan303 FloorPlan304"
                ).split(),
            ]
        )
        == 0
    )
    files = sorted((tmp_path / "json_2.1.1" / "train").glob("*/*/game.tw-pddl"))
    assert len(files) == 2
    env = gym.make("ProGPO-ALFWorld-v0", data_dir=tmp_path, split="train", fast=False)  # stock engine
    for tid in env.unwrapped.task_ids:
        _, info = env.reset(options={"task_id": tid})
        assert not info["won"]
        for cmd in env.unwrapped.expert_plan():
            obs, r, term, trunc, info = env.step(cmd)
        assert term and info["won"]
    env.close()
    traj = json.loads((files[0].parent / "traj_data.json").read_text())
    assert traj["task_type"] in TASK_TYPES and traj["scene"]["floor_plan"].startswith("FloorPlan30")


def test_easy_splits_small_rooms_nothing_hidden_disjoint_floor_plans() -> None:
    """easy-train / easy-valid: all six types, <= 8 receptacles, one instance per class, targets never
    in closed receptacles, and held-out floor plans for easy-valid."""
    import re

    payload = load_archive(ARCHIVE)
    games = {
        s: [g for g in payload["games"] if g["split"] == s] for s in ("easy-train", "easy-valid", "train", "valid")
    }
    assert len(games["easy-train"]) == 144 and len(games["easy-valid"]) == 36
    for split in ("easy-train", "easy-valid"):
        assert Counter(g["traj_data"]["task_type"] for g in games[split]) == {
            t: len(games[split]) // 6 for t in TASK_TYPES
        }
    plans = {s: {g["traj_data"]["scene"]["floor_plan"] for g in gs} for s, gs in games.items()}
    assert not plans["easy-train"] & plans["easy-valid"]
    assert plans["easy-valid"] <= plans["valid"] | set(plans["easy-valid"])  # same held-out pool as valid
    assert not plans["easy-valid"] & plans["train"]
    for g in games["easy-train"] + games["easy-valid"]:
        problem = g["pddl_problem"]
        receptacles = set(re.findall(r"\(receptacleType (\S+) ", problem)) - {"?r"}  # ?r: the goal
        assert len(receptacles) <= 8
        spec = TaskSpec.from_goal_pddl(problem)
        typed = [(o, t) for o, t in re.findall(r"\(objectType (\S+) (\w+)Type\)", problem) if not o.startswith("?")]
        targets = [o for o, t in typed if t == spec.object_type]
        openable = set(re.findall(r"\(openable (\S+)\)", problem))
        for obj in targets:
            inside = re.search(rf"\(inReceptacle {re.escape(obj)} (\S+)\)", problem).group(1)
            assert inside not in openable, f"{g['task_folder']}: target {obj} starts in a closed receptacle"
        classes = Counter(t for _, t in typed)
        assert all(
            n == 1
            for t, n in classes.items()
            if not (t == spec.object_type and spec.task_type == "pick_two_obj_and_place")
        )
    # easier than the standard split: shorter expert walkthroughs
    mean = lambda gs: sum(len(g["walkthrough"]) for g in gs) / len(gs)  # noqa: E731 - a one-line callable, read where it is passed
    assert mean(games["easy-valid"]) < mean(games["valid"])


def test_easy_difficulty_kwarg(alfworld_engine) -> None:
    env = gym.make("ProGPO-ALFWorld-v0", difficulty="easy", split="valid")
    assert env.unwrapped.split == "easy-valid"
    obs, info = env.reset(seed=0)
    assert info["task_id"] in env.unwrapped.task_ids and info["admissible_commands"]
    env.close()
