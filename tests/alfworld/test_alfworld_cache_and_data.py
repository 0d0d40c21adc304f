"""A damaged translation cache entry is recomputed (never reaches
fast-downward, never blames the game file), and broken ALFWorld data gives ALFWorldDataError
or a logged skip instead of a raw AttributeError / a silent skip."""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import gymnasium as gym
import pytest

import progpo_envs  # noqa: F401  (registers the ids)
from progpo_envs.alfworld.games import ALFWorldDataError, discover_games, resolve_data_dir

REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ data errors (no engine)
def _game(root: Path, folder: str, trial: str, game: object = None, traj: object = None) -> Path:
    d = root / "json_2.1.1" / "train" / folder / trial
    d.mkdir(parents=True)
    game = {"pddl_domain": "", "grammar": "", "pddl_problem": "", "solvable": True} if game is None else game
    traj = {"task_type": "pick_and_place_simple"} if traj is None else traj
    (d / "game.tw-pddl").write_text(game if isinstance(game, str) and game.startswith("{") else json.dumps(game))
    (d / "traj_data.json").write_text(json.dumps(traj))
    return d


@pytest.mark.parametrize("content", [[], "a string", 3])
def test_game_file_that_is_not_an_object_is_a_data_error(tmp_path: Path, content: object) -> None:
    _game(tmp_path, "pick_and_place_simple-Mug-None-Desk-1", "trial_A")
    _game(tmp_path, "pick_and_place_simple-Mug-None-Desk-1", "trial_B", game=content)
    with pytest.raises(ALFWorldDataError, match=r"trial_B/game.tw-pddl holds a JSON (list|str|int), not an object"):
        gym.make("ProGPO-ALFWorld-v0", data_dir=str(tmp_path), split="train")


def test_traj_data_that_is_a_list_is_a_data_error(tmp_path: Path) -> None:
    # the folder name carries no task type, so traj_data.json is read for it
    _game(tmp_path, "custom_task-Mug-None-Desk-1", "trial_A", traj=[{"task_type": "pick_and_place_simple"}])
    with pytest.raises(ALFWorldDataError, match=r"traj_data.json holds a JSON list, not an object"):
        gym.make("ProGPO-ALFWorld-v0", data_dir=str(tmp_path), split="train")


def test_truncated_game_is_skipped_with_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _game(tmp_path, "pick_and_place_simple-Mug-None-Desk-1", "trial_A")
    bad = _game(
        tmp_path,
        "pick_and_place_simple-Mug-None-Desk-1",
        "trial_B",
        game='{"pddl_domain": "(define (domain alfred)", "gram',
    )  # cut mid-file
    _game(tmp_path, "custom_task-Mug-None-Desk-1", "trial_C", traj={"task_type": "pick_and_place_simple"})
    (tmp_path / "json_2.1.1/train/custom_task-Mug-None-Desk-1/trial_C/traj_data.json").write_text('{"task_ty')
    with caplog.at_level(logging.WARNING, logger="progpo_envs.alfworld.games"):
        env = gym.make("ProGPO-ALFWorld-v0", data_dir=str(tmp_path), split="train")
        assert env.unwrapped.task_ids == ["pick_and_place_simple-Mug-None-Desk-1/trial_A"]
        discover_games(resolve_data_dir(tmp_path), "train")  # a second scan logs nothing new
    skipped = sorted(r.getMessage() for r in caplog.records)  # custom_task-... < pick_and_place-...
    assert len(skipped) == 2, skipped
    assert "trial_C" in skipped[0] and "traj_data.json is unreadable or truncated" in skipped[0]
    assert str(bad / "game.tw-pddl") in skipped[1] and "game.tw-pddl is unreadable or truncated" in skipped[1]


@pytest.mark.timeout(60)
def test_special_and_oversized_game_files_are_skipped_unread(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from progpo_envs.alfworld.games import MAX_GAME_FILE_BYTES

    _game(tmp_path, "pick_and_place_simple-Mug-None-Desk-1", "trial_A")
    zero = _game(tmp_path, "pick_and_place_simple-Mug-None-Desk-1", "trial_B") / "game.tw-pddl"
    zero.unlink()
    zero.symlink_to("/dev/zero")  # read whole, it would exhaust memory
    fifo = _game(tmp_path, "pick_and_place_simple-Mug-None-Desk-1", "trial_C") / "game.tw-pddl"
    fifo.unlink()
    os.mkfifo(fifo)  # opened, it would block forever
    big = _game(tmp_path, "pick_and_place_simple-Mug-None-Desk-1", "trial_D") / "game.tw-pddl"
    with open(big, "r+b") as f:  # sparse: 200 MB on paper, nothing on disk
        f.truncate(200 * 2**20)
    with caplog.at_level(logging.WARNING, logger="progpo_envs.alfworld.games"):
        env = gym.make("ProGPO-ALFWorld-v0", data_dir=str(tmp_path), split="train")
    assert env.unwrapped.task_ids == ["pick_and_place_simple-Mug-None-Desk-1/trial_A"]
    reasons = {m.split("trial_")[1][0]: m for m in (r.getMessage() for r in caplog.records)}
    assert "not a regular file" in reasons["B"] and "not a regular file" in reasons["C"]
    assert f"over the {MAX_GAME_FILE_BYTES // 2**20} MiB limit" in reasons["D"]


# ------------------------------------------------------------------ translation cache
@pytest.fixture()
def sas_cache(alfworld_engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """(translation module, game data, the one cache entry written for it) in a fresh cache dir."""
    from progpo_envs.alfworld.embedded import embedded_root
    from progpo_envs.alfworld.fast import clear_caches
    from progpo_envs.alfworld.fast import translation as tr_mod

    game_file = sorted((embedded_root() / "json_2.1.1" / "easy-valid").glob("*/*/game.tw-pddl"))[0]
    monkeypatch.setenv("PROGPO_CACHE_DIR", str(tmp_path / "cache"))
    clear_caches()
    data = json.loads(game_file.read_text())
    fresh = tr_mod.translation(data["pddl_domain"], data["pddl_problem"])
    entries = list((tmp_path / "cache" / "alfworld-sas").iterdir())
    assert len(entries) == 1 and entries[0].name.endswith(".json.gz")
    yield tr_mod, data, entries[0], fresh, game_file
    clear_caches()


def _rewrite(entry: Path, edit, keep_checksum: bool) -> None:
    """Apply ``edit`` to the record of ``entry``; keep the old checksum or write a matching one."""
    header, _, payload = gzip.decompress(entry.read_bytes()).partition(b"\n")
    record = edit(json.loads(payload))
    new = json.dumps(record).encode()
    fields = header.decode().split(" ")
    if not keep_checksum:
        fields[3] = hashlib.sha256(new).hexdigest()
    entry.write_bytes(gzip.compress(" ".join(fields).encode() + b"\n" + new))


def _garble_sas(rec):
    rec["sas"] = "Xegin_version\n" + rec["sas"][13:]
    return rec


def _garble_init(rec):
    rec["init"] = [["atlocation", [["agent1"]]]] + rec["init"]  # an argument without its type
    return rec


def _init_unknown_key(rec):
    del rec["init"]
    return rec


@pytest.mark.parametrize(
    "damage",
    [
        "sas, stale checksum",
        "sas, matching checksum",
        "init, matching checksum",
        "missing init, matching checksum",
        "truncated file",
        "not gzip",
        "another game's entry",
    ],
)
def test_bad_cache_entry_is_deleted_and_recomputed(sas_cache, damage: str) -> None:
    tr_mod, data, entry, fresh, _ = sas_cache
    from progpo_envs.alfworld.fast import clear_caches

    good = entry.read_bytes()
    if damage == "sas, stale checksum":
        _rewrite(entry, _garble_sas, keep_checksum=True)
    elif damage == "sas, matching checksum":
        _rewrite(entry, _garble_sas, keep_checksum=False)
    elif damage == "init, matching checksum":
        _rewrite(entry, _garble_init, keep_checksum=False)
    elif damage == "missing init, matching checksum":
        _rewrite(entry, _init_unknown_key, keep_checksum=False)
    elif damage == "truncated file":
        entry.write_bytes(good[: len(good) // 2])
    elif damage == "not gzip":
        entry.write_bytes(b"begin_version\n3\nend_version\n")
    else:  # a valid entry of another game copied under this game's name
        other = data["pddl_problem"].replace("(:init", "(:init (isReceptacleObject agent1)", 1)
        clear_caches()
        tr_mod.translation(data["pddl_domain"], other)
        (foreign,) = [p for p in entry.parent.iterdir() if p != entry]
        entry.write_bytes(foreign.read_bytes())
    clear_caches()
    with pytest.warns(RuntimeWarning, match=r"translation cache entry .* is corrupt .*deleted, translating again"):
        again = tr_mod.translation(data["pddl_domain"], data["pddl_problem"])
    assert again.sas_bytes == fresh.sas_bytes and again._init == fresh._init
    clear_caches()  # the rewritten entry is whole again: read back without a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tr_mod.translation(data["pddl_domain"], data["pddl_problem"]).sas_bytes == fresh.sas_bytes
    assert entry.read_bytes() == good  # deterministic record, same checksum


def test_entries_are_written_atomically_with_a_checksum(sas_cache) -> None:
    _, _, entry, fresh, _ = sas_cache
    header, _, payload = gzip.decompress(entry.read_bytes()).partition(b"\n")
    magic, fmt, key, digest = header.decode().split(" ")
    assert (magic, fmt) == ("PROGPO-SAS", "2") and entry.name == f"{key}.json.gz"
    assert hashlib.sha256(payload).hexdigest() == digest
    assert json.loads(payload)["sas"].encode() == fresh.sas_bytes
    assert not [p for p in entry.parent.iterdir() if p.suffix == ".tmp"]  # no temporary file left behind


def test_garbled_sas_entry_never_reaches_fast_downward(sas_cache, tmp_path: Path) -> None:
    """The reported failure: fast-downward exited the whole process (code 33) on a garbled entry.
    In a subprocess, so that a regression cannot take the test session down with it."""
    _, _, entry, _, game_file = sas_cache
    _rewrite(entry, _garble_sas, keep_checksum=False)
    script = textwrap.dedent(f"""
        import warnings, gymnasium as gym, progpo_envs
        warnings.simplefilter("always")
        from progpo_envs.alfworld.engine import StockEngine
        from progpo_envs.alfworld.env import make_engine
        eng = make_engine(True)
        eng.load({str(game_file)!r})
        obs = eng.reset()
        stock = StockEngine(); stock.load({str(game_file)!r})
        assert obs == stock.reset() and eng.admissible_commands == stock.admissible_commands
        print("survived")
    """)
    env = dict(os.environ, PROGPO_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "survived" in out.stdout and "is corrupt" in out.stderr and "the game file is fine" in out.stderr


def test_a_rescan_sees_games_added_changed_or_removed(tmp_path: Path) -> None:
    """An unchanged split folder reuses its last scan; any game or traj_data.json that is added,
    rewritten or removed is seen by the next scan."""
    import os

    _game(tmp_path, "pick_and_place_simple-Mug-None-Desk-1", "trial_A")
    root = resolve_data_dir(tmp_path)
    first = discover_games(root, "train")
    assert [g.task_id for g in first] == ["pick_and_place_simple-Mug-None-Desk-1/trial_A"]
    assert discover_games(root, "train") == first
    b = _game(tmp_path, "pick_and_place_simple-Mug-None-Desk-1", "trial_B")
    assert len(discover_games(root, "train")) == 2
    game = b / "game.tw-pddl"
    game.write_text(json.dumps({"pddl_domain": "", "grammar": "", "pddl_problem": "", "solvable": False}))
    os.utime(game, ns=(1, 1))  # an edit in the same clock tick still changes the size or the time
    assert [g.task_id for g in discover_games(root, "train")] == ["pick_and_place_simple-Mug-None-Desk-1/trial_A"]
    (b / "traj_data.json").unlink()
    game.write_text(json.dumps({"pddl_domain": "", "grammar": "", "pddl_problem": "", "solvable": True}))
    assert len(discover_games(root, "train")) == 1  # no traj_data.json: still skipped
