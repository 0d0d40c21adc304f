"""ProGPO-ALFWorld-v0 on the real engine: embedded games, real games, bad input, checker."""

from __future__ import annotations

import random
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import progpo_envs  # noqa: F401  (registers the ids)
from progpo_envs.alfworld.env import ALFWorldEnv
from progpo_envs.alfworld.games import ALFWorldDataError, discover_games, resolve_data_dir
from progpo_envs.alfworld.tasks import TASK_TYPES

INFO_KEYS = {"admissible_commands", "task_id", "task_type", "goal", "won", "valid_action", "step", "outcome"}
# two real games of different grammar-sensitive kinds for the fast suite
FAST_REAL = ("pick_two_obj_and_place-CD-None-Safe-308", "pick_clean_then_place_in_recep-Cloth-None-CounterTop-424")


@pytest.fixture(scope="module")
def env(alfworld_engine: None):
    e = gym.make("ProGPO-ALFWorld-v0")
    yield e
    e.close()


def test_make_offline_default_set(env) -> None:
    obs, info = env.reset(seed=0)
    assert INFO_KEYS <= set(info)
    assert obs.startswith("-= Welcome to TextWorld, ALFRED! =-")
    assert info["task_type"] in TASK_TYPES and info["step"] == 0 and info["won"] is False
    assert info["goal"] and info["goal"] in obs
    assert info["admissible_commands"] == sorted(set(info["admissible_commands"]))
    assert any(c.startswith("go to ") for c in info["admissible_commands"])
    assert env.observation_space.contains(obs)


def test_same_seed_same_task_same_obs(env) -> None:
    first = [env.reset(seed=s) for s in (3, 4, 3)]
    assert first[0][0] == first[2][0] and first[0][1]["task_id"] == first[2][1]["task_id"]
    ids = {env.reset(seed=s)[1]["task_id"] for s in range(12)}
    assert len(ids) > 1


def test_step_semantics_and_expert_wins(env) -> None:
    _, info = env.reset(seed=1)
    plan = env.unwrapped.expert_plan()
    assert plan, "generated games carry their walkthrough"
    total = 0.0
    for i, cmd in enumerate(plan):
        assert cmd in info["admissible_commands"]
        obs, r, term, trunc, info = env.step(cmd)
        total += r
        assert info["valid_action"] and info["step"] == i + 1
        assert term == (i == len(plan) - 1) and not trunc
    assert total == 1.0 and info["won"] and info["outcome"] == 1.0


@pytest.mark.parametrize(
    "bad",
    [
        "",
        " ",
        "x" * (1 << 20),
        "pick up the \u00e9l\u00e9phant \u2603",
        "go to",
        "GO TO CABINET 1",
        b"\xff\xfe",
        None,
        42,
    ],
)
def test_bad_input_is_an_invalid_action(env, bad) -> None:
    _, info0 = env.reset(seed=2)
    obs, r, term, trunc, info = env.step(bad)
    assert obs == "Nothing happens."
    assert r == 0.0 and not term and not trunc and info["valid_action"] is False and info["step"] == 1
    assert info["admissible_commands"] == info0["admissible_commands"]
    # the episode goes on
    obs, *_, info = env.step(info["admissible_commands"][0])
    assert info["valid_action"] is True


def test_truncation_at_step_limit(alfworld_engine) -> None:
    e = gym.make("ProGPO-ALFWorld-v0", max_episode_steps=3)
    e.reset(seed=0)
    flags = [e.step("inventory")[3] for _ in range(3)]
    assert flags == [False, False, True]
    e.close()
    # a limit above the env's own 50 is honoured too (gym.make's TimeLimit alone truncates), the
    # registered default is 50, and an env built directly keeps its own limit
    for env, limit in [
        (gym.make("ProGPO-ALFWorld-v0", max_episode_steps=53), 53),
        (gym.make("ProGPO-ALFWorld-v0"), 50),
        (ALFWorldEnv(max_episode_steps=4), 4),
    ]:
        env.reset(seed=0)
        flags = [env.step("inventory")[3] for _ in range(limit)]
        assert flags == [False] * (limit - 1) + [True], limit
        env.close()


def test_task_id_option_hard_split_and_errors(alfworld_engine) -> None:
    e = gym.make("ProGPO-ALFWorld-v0", split="valid")
    ids = e.unwrapped.task_ids
    assert {i.split("-")[0] for i in ids} == set(TASK_TYPES)
    _, info = e.reset(seed=0, options={"task_id": ids[-1]})
    assert info["task_id"] == ids[-1]
    with pytest.raises(ALFWorldDataError, match="unknown ALFWorld task_id 'nope'"):
        e.reset(options={"task_id": "nope"})
    e.close()
    hard = gym.make("ProGPO-ALFWorld-v0", difficulty="hard")
    assert hard.unwrapped.split == "hard"
    hard.close()
    with pytest.raises(ALFWorldDataError, match="valid_unseen.*not in the embedded"):
        gym.make("ProGPO-ALFWorld-v0", split="valid_unseen")
    with pytest.raises(ALFWorldDataError, match="no json_2.1.1"):
        gym.make("ProGPO-ALFWorld-v0", data_dir="/nonexistent/alfworld")


def test_check_env(alfworld_engine) -> None:
    e = gym.make("ProGPO-ALFWorld-v0", split="valid")
    check_env(e.unwrapped, skip_render_check=True)
    e.close()


def test_real_games_fast_subset(alfworld_engine, real_alfworld: Path, real_walkthroughs) -> None:
    e = gym.make("ProGPO-ALFWorld-v0", data_dir=real_alfworld, split="valid_unseen")
    records = {r.task_id: r for r in discover_games(resolve_data_dir(real_alfworld), "valid_unseen")}
    assert len(records) == 30
    for tid in [t for t in records if t.split("/")[0] in FAST_REAL][:2]:
        _, info = e.reset(options={"task_id": tid})
        assert info["admissible_commands"] and info["task_type"] == records[tid].task_type
        plan = real_walkthroughs(e.unwrapped._engine, records[tid])
        e.reset(options={"task_id": tid})
        for cmd in plan:
            obs, r, term, trunc, info = e.step(cmd)
            assert info["valid_action"], (tid, cmd, obs)
        assert term and r == 1.0 and info["won"]
    e.close()


@pytest.mark.slow
def test_all_30_real_games_are_won(alfworld_engine, real_alfworld: Path, real_walkthroughs) -> None:
    e = gym.make("ProGPO-ALFWorld-v0", data_dir=real_alfworld, split="valid_unseen")
    won = 0
    for tid in e.unwrapped.task_ids:
        _, info = e.reset(options={"task_id": tid})
        assert info["admissible_commands"], tid
        assert "Nothing happens." == e.step("jump")[0]
        plan = real_walkthroughs(e.unwrapped._engine, e.unwrapped._record(tid))
        _, info = e.reset(options={"task_id": tid})
        for cmd in plan:
            assert cmd in info["admissible_commands"], (tid, cmd)
            obs, r, term, trunc, info = e.step(cmd)
        won += int(info["won"] and term and r == 1.0)
    assert won == 30
    e.close()


def test_expert_plan_on_real_game_restores_episode(alfworld_engine, real_alfworld: Path) -> None:
    e = gym.make("ProGPO-ALFWorld-v0", data_dir=real_alfworld, split="valid_unseen")
    tid = next(t for t in e.unwrapped.task_ids if t.startswith("look_at_obj_in_light"))
    e.reset(options={"task_id": tid})
    rng = random.Random(0)
    _, _, _, _, info = e.step("inventory")
    before = e.step(rng.choice(info["admissible_commands"]))
    plan = e.unwrapped.expert_plan()  # real games store no walkthrough: the expert computes one
    assert plan and len(plan) <= 10
    # the episode state is the same as before the call
    assert e.step("look")[4]["admissible_commands"] == before[4]["admissible_commands"]
    e.reset(options={"task_id": tid})
    for cmd in plan:
        out = e.step(cmd)
    assert out[2] and out[4]["won"]
    e.close()


def test_expert_action_wins_online(alfworld_engine, real_alfworld: Path) -> None:
    e = gym.make("ProGPO-ALFWorld-v0", data_dir=real_alfworld, split="valid_unseen")
    tid = next(t for t in e.unwrapped.task_ids if t.startswith("pick_heat_then_place_in_recep"))
    _, info = e.reset(options={"task_id": tid})
    e.step("go to " + info["admissible_commands"][0].split("go to ", 1)[-1])  # a detour first
    for _ in range(20):
        cmd = e.unwrapped.expert_action()
        assert cmd is not None
        _, r, term, _, info = e.step(cmd)
        if term:
            break
    assert info["won"] and r == 1.0
    e.close()


def test_canonical_on_real_transcript(alfworld_engine, real_alfworld: Path) -> None:
    from progpo_envs.alfworld.canonical import canonicalize_alfworld as canon

    e = gym.make("ProGPO-ALFWorld-v0", data_dir=real_alfworld, split="valid_unseen")
    tid = next(t for t in e.unwrapped.task_ids if t.startswith("pick_two_obj_and_place-CD"))
    _, info = e.reset(options={"task_id": tid})
    gotos = [c for c in info["admissible_commands"] if c.startswith("go to ")]
    a, b = gotos[0], gotos[-1]
    first = e.step(a)
    second = e.step(b)
    again = e.step(a)
    assert canon(first[0], first[4]) == canon(again[0], again[4])
    assert canon(first[0], first[4]) != canon(second[0], second[4])
    fail1 = e.step("jump")
    fail2 = e.step("take the moon from the sky")
    assert fail1[0] == fail2[0] == "Nothing happens."
    # a failed command leaves the agent where it was: the key of the state it is in
    assert canon(fail1[0], fail1[4]) == canon(fail2[0], fail2[4]) == canon(again[0], again[4])
    look = e.step("look")
    assert canon(look[0], look[4]) == canon(again[0], again[4])  # look re-prints the same state
    e.step(b)
    fail3 = e.step("jump")
    assert canon(fail3[0], fail3[4]) != canon(fail1[0], fail1[4])  # same text, other state
    assert canon(fail3[0], fail3[4]) == canon(second[0], second[4])
    e.close()


def _covered(env):
    from progpo_envs.alfworld.canonical import canonicalize_alfworld
    from wrappers import CanonicalizeObservation, FirstVisitCoverage

    return FirstVisitCoverage(CanonicalizeObservation(env, canonicalize_alfworld))


def test_invalid_actions_are_never_first_visits(env) -> None:
    cov = _covered(env)
    _, info = cov.reset(seed=0)
    start = info["canonical_obs"]
    gotos = [c for c in info["admissible_commands"] if c.startswith("go to ")]
    for bad in ("jump", "", "take the moon from the sky", "jump"):  # the first failure at the start
        *_, info = cov.step(bad)
        assert info["valid_action"] is False and info["first_visit"] is False and info["coverage"] == 0
        assert info["canonical_obs"] == start
    for k, place in enumerate(gotos[:3], start=1):
        *_, info = cov.step(place)
        assert info["first_visit"] is True and info["coverage"] == k
        here = info["canonical_obs"]
        *_, info = cov.step("jump")  # the first failure in each new place is not new either
        assert (info["first_visit"], info["coverage"], info["canonical_obs"]) == (False, k, here)
    assert cov.coverage == 3 and cov.num_steps == 10


def test_look_inventory_examine_are_not_first_visits(env) -> None:
    """Re-prints (look, inventory, examine, help) never count; open / take / put do, once; close does not."""
    cov = _covered(env)
    _, info = cov.reset(seed=0)
    seen_flags: list[tuple[str, bool]] = []

    def step(cmd: str) -> dict:
        assert cmd in info_box[0]["admissible_commands"], cmd
        *_, out = cov.step(cmd)
        assert out["valid_action"] is True, cmd
        seen_flags.append((cmd, out["first_visit"]))
        info_box[0] = out
        return out

    def reprints() -> None:
        cmds = [
            c
            for c in info_box[0]["admissible_commands"]
            if c in ("look", "inventory", "help") or c.startswith("examine ")
        ]
        assert "look" in cmds and "inventory" in cmds
        for c in cmds:
            assert step(c)["first_visit"] is False, c

    info_box = [info]
    reprints()  # at the start
    cmds = info["admissible_commands"]
    for closed in [c for c in cmds if c.startswith("go to ")]:  # a closed receptacle
        assert step(closed)["first_visit"] is True  # every place is new once
        reprints()
        openers = [c for c in info_box[0]["admissible_commands"] if c.startswith("open ")]
        if openers:
            break
    else:  # pragma: no cover - every generated room has a drawer or a cabinet
        pytest.fail("no closed receptacle")
    opener = openers[0]
    assert step(opener)["first_visit"] is True
    reprints()
    assert step(opener.replace("open ", "close ", 1))["first_visit"] is False  # back to the closed state
    assert step(opener)["first_visit"] is False  # opened before
    # a receptacle with something to take
    for place in [c for c in cmds if c.startswith("go to ")]:
        out = step(place)
        takes = [c for c in out["admissible_commands"] if c.startswith("take ")]
        if takes:
            break
    else:  # pragma: no cover - the seed-0 game has objects in the open
        pytest.fail("no object to take")
    assert step(takes[0])["first_visit"] is True
    reprints()
    put = next(c for c in info_box[0]["admissible_commands"] if c.startswith(("move ", "put ")))
    assert step(put)["first_visit"] is False  # putting it back where it was: the state seen on arrival
    assert step(takes[0])["first_visit"] is False
    other = next(c for c in cmds if c.startswith("go to ") and c != place)
    step(other)
    put = next(c for c in info_box[0]["admissible_commands"] if c.startswith(("move ", "put ")))
    assert step(put)["first_visit"] is True  # the object somewhere new
    reprints()
    assert sum(f for _, f in seen_flags) == cov.coverage


@pytest.mark.parametrize("kind", ["pick_clean", "pick_heat", "pick_cool", "look_at_obj_in_light"])
def test_effects_are_first_visits_once(env, kind) -> None:
    """clean / heat / cool / turn on keep the command list but change the world: new once."""
    cov = _covered(env)
    tid = next(t for t in env.unwrapped.task_ids if t.startswith(kind))
    _, info = cov.reset(options={"task_id": tid})
    plan = env.unwrapped.expert_plan()
    effect = next(c for c in plan if c.split()[0] in ("clean", "heat", "cool", "use"))
    for cmd in plan[: plan.index(effect)]:
        cov.step(cmd)
    *_, before = cov.step("look")
    assert before["first_visit"] is False
    *_, info = cov.step(effect)
    assert info["first_visit"] is True and info["admissible_commands"] == before["admissible_commands"]
    for again in ("look", "inventory", effect):  # the effect repeated is not new
        if info.get("won"):
            break
        *_, info = cov.step(again)
        assert info["first_visit"] is False, again


def test_corrupt_game_file_gives_a_clear_error(alfworld_engine, tmp_path: Path) -> None:
    import json

    d = tmp_path / "json_2.1.1" / "train" / "pick_and_place_simple-Mug-None-Desk-1" / "trial_X"
    d.mkdir(parents=True)
    (d / "game.tw-pddl").write_text(
        json.dumps({"solvable": True, "pddl_domain": "(define (domain", "grammar": "", "pddl_problem": "garbage"})
    )
    (d / "traj_data.json").write_text("{}")
    e = gym.make("ProGPO-ALFWorld-v0", data_dir=tmp_path)
    with pytest.raises(ALFWorldDataError, match="cannot load ALFWorld game .*trial_X/game.tw-pddl"):
        e.reset(seed=0)
    e.close()
