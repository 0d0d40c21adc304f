"""ALFWorld pieces that need no engine: task specs, canonicalizer, game discovery, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from progpo_envs.alfworld.canonical import canonicalize_alfworld
from progpo_envs.alfworld.games import ALFWorldDataError, discover_games, resolve_data_dir
from progpo_envs.alfworld.tasks import TASK_TYPES, TaskSpec, task_type_of_folder


def _game(root: Path, split: str, folder: str, trial: str, solvable: bool | None = True) -> Path:
    d = root / "json_2.1.1" / split / folder / trial
    d.mkdir(parents=True)
    data = {"pddl_domain": "", "grammar": "", "pddl_problem": ""}
    if solvable is not None:
        data["solvable"] = solvable
    (d / "game.tw-pddl").write_text(json.dumps(data))
    (d / "traj_data.json").write_text(json.dumps({"task_type": folder.split("-")[0]}))
    return d


def test_task_spec_reads_every_real_goal(real_alfworld: Path) -> None:
    seen = set()
    for game_file in sorted(real_alfworld.glob("json_2.1.1/valid_unseen/*/*/game.tw-pddl")):
        folder = game_file.parent.parent.name
        spec = TaskSpec.from_goal_pddl(json.loads(game_file.read_text())["pddl_problem"])
        traj = json.loads((game_file.parent / "traj_data.json").read_text())
        assert spec.task_type == task_type_of_folder(folder) == traj["task_type"]
        assert spec.object_type == traj["pddl_params"]["object_target"]
        if spec.task_type == "look_at_obj_in_light":
            assert spec.toggle_type == traj["pddl_params"]["toggle_target"]
        else:
            assert spec.receptacle_type == traj["pddl_params"]["parent_target"]
        seen.add(spec.task_type)
    assert seen == set(TASK_TYPES)


def test_discover_skips_unsolvable_movable_sliced(tmp_path: Path) -> None:
    _game(tmp_path, "train", "pick_and_place_simple-Mug-None-Desk-1", "trial_A")
    _game(tmp_path, "train", "pick_and_place_simple-Mug-None-Desk-1", "trial_B", solvable=False)
    _game(tmp_path, "train", "pick_and_place_simple-Mug-None-Desk-1", "trial_C", solvable=None)
    _game(tmp_path, "train", "pick_and_place_with_movable_recep-Mug-Bowl-Desk-1", "trial_D")
    _game(tmp_path, "train", "pick_heat_then_place_in_recep-AppleSliced-None-Desk-1", "trial_E")
    games = discover_games(resolve_data_dir(tmp_path), "train")
    assert [g.task_id for g in games] == ["pick_and_place_simple-Mug-None-Desk-1/trial_A"]
    assert games[0].task_type == "pick_and_place_simple"


def test_data_dir_errors_name_the_path_and_the_fix(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ALFWorldDataError, match="nope.*json_2.1.1.*does not exist"):
        resolve_data_dir(missing)
    _game(tmp_path, "valid_unseen", "pick_and_place_simple-Mug-None-Desk-1", "trial_A")
    with pytest.raises(ALFWorldDataError, match=r"split 'train' not found.*valid_unseen"):
        discover_games(resolve_data_dir(tmp_path), "train")
    (tmp_path / "json_2.1.1" / "empty").mkdir()
    with pytest.raises(ALFWorldDataError, match="holds no playable game"):
        discover_games(resolve_data_dir(tmp_path), "empty")
    # the json_2.1.1 folder itself is accepted too
    assert resolve_data_dir(tmp_path / "json_2.1.1") == tmp_path / "json_2.1.1"


def test_alfworld_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _game(tmp_path, "train", "pick_and_place_simple-Mug-None-Desk-1", "trial_A")
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    assert resolve_data_dir(None) == tmp_path / "json_2.1.1"
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "missing"))
    with pytest.raises(ALFWorldDataError, match=r"\$ALFWORLD_DATA"):
        resolve_data_dir(None)
    monkeypatch.delenv("ALFWORLD_DATA")
    assert resolve_data_dir(None) is None


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            "You arrive at loc 13. On the bed 1, you see a pillow 1, and a book 1.",
            "You arrive at bed 1. On the bed 1, you see a book 1, and a pillow 1.",
        ),
        (
            "You open the drawer 2. The drawer 2 is open. In it, you see a pen 1.",
            "You arrive at loc 4. The drawer 2 is open. In it, you see a pen 1.",
        ),
        ("You close the safe 1.", "You arrive at loc 9. The safe 1 is closed."),
        ("You put the cd 1 in/on the safe 1.", "You move the cd 1 to the safe 1."),
    ],
)
def test_canonical_merges_same_state(a: str, b: str) -> None:
    assert canonicalize_alfworld(a, {}) == canonicalize_alfworld(b, {})


def test_canonical_keeps_different_states_apart() -> None:
    c = canonicalize_alfworld
    assert c("On the desk 1, you see a mug 1.", {}) != c("On the desk 1, you see a mug 2.", {})
    assert c("The drawer 1 is open. In it, you see nothing.", {}) != c("The drawer 1 is closed.", {})
    assert c("You are carrying: a mug 1.", {}) != c("You are not carrying anything.", {})
    intro = (
        "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, "
        "you see a bed 1, and a desk 1.\n\nYour task is to: put some cd on safe."
    )
    assert c(intro, {}) == "You are in the middle of a room. Looking quickly around you, you see: a bed 1, a desk 1."


def test_canonical_docstring_examples() -> None:
    import doctest

    import progpo_envs.alfworld.canonical as mod

    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 10 and result.failed == 0


def test_canonical_state_key_ignores_reprints_and_order() -> None:
    c = canonicalize_alfworld
    here = {"admissible_commands": ["look", "inventory", "examine desk 1", "take mug 1 from desk 1"]}
    shuffled = {"admissible_commands": list(reversed(here["admissible_commands"]))}
    key = c("You arrive at desk 1. On the desk 1, you see a mug 1.", here)
    for reprint in (
        "You are facing the desk 1. Next to it, you see nothing.",
        "You are not carrying anything.",
        "On the desk 1, you see a mug 1.",
        "Nothing happens.",
        "-= Welcome to TextWorld, ALFRED! =-",
    ):
        assert c(reprint, here) == c(reprint, shuffled) == key
    assert c("You heat the mug 1 using the microwave 1.", here) == key + " You heat the mug 1 using the microwave 1."
    assert c("You sliced the apple 1 with the knife 1.", here).endswith("You sliced the apple 1 with the knife 1.")
    assert c("You turn off the desklamp 1.", here) == key
    assert c("Nothing happens.", {}) == "Nothing happens."  # text-only key without the engine state


@pytest.mark.parametrize("verb,prep", [("put", "in/on"), ("put", "in"), ("move", "to")])
def test_the_carry_free_key_drops_a_held_object_whichever_verb_the_grammar_uses(verb, prep):
    """Old-grammar games offer only ``put X in/on Y`` for a held object, newer ones ``move X to Y``:
    either way, carrying it does not make a known place new again."""
    from progpo_envs.alfworld.canonical import canonicalize_alfworld_carry_free, held_objects

    place = ["examine shelf 1", "go to desk 1", "look"]
    carrying = place + ["examine mug 1", f"{verb} mug 1 {prep} shelf 1"]
    assert held_objects(carrying) == {"mug 1"} and held_objects(place) == set()
    keys = [
        canonicalize_alfworld_carry_free("On the shelf 1, you see nothing.", {"admissible_commands": c})
        for c in (place, carrying)
    ]
    assert keys[0] == keys[1]
