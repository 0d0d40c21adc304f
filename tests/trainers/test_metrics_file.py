"""A run's ``metrics.jsonl`` as a user relies on it: written one record a line, read back to a torn
last line, rebuilt from the checkpoint's history on a resume (never through a link, the damaged
file kept beside it), mirrored to TensorBoard and W&B without the values they cannot take, and
the W&B id kept across a resume. Fast: no training run."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from trainers.rollouts.rollout import Rollout, StepRecord, Trajectory
from trainers.runs.metrics import (
    MetricsFileError,
    MetricsLogger,
    advantage_metrics,
    begins_with,
    free_name,
    read_metrics,
    restore_for_resume,
    rollout_metrics,
    scan_metrics,
    wandb_run_id,
    wandb_settings,
)

HISTORY = [{"iteration": 0, "kind": "eval", "eval/success": 0.25}, {"iteration": 1, "kind": "train", "loss": 0.5}]


def _write(path: Path, records: list, tail: str = "") -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)


# ----------------------------------------------------------------------------------- reading
def test_reading_stops_at_a_torn_line_and_skips_blank_ones(tmp_path):
    path = tmp_path / "metrics.jsonl"
    _write(path, HISTORY[:1], tail='\n   \n{"iteration": 1, "kind": "tr')
    assert read_metrics(path) == HISTORY[:1]
    _write(path, [HISTORY[0], "not a record", HISTORY[1]])
    with pytest.raises(MetricsFileError, match=r"line 2 is JSON but not a record \(str\); delete that line or start a"):
        read_metrics(path)
    path.write_bytes(json.dumps(HISTORY[0]).encode() + b"\n\xff\xfe garbled bytes\n")  # not UTF-8: a torn line
    assert read_metrics(path) == HISTORY[:1] and scan_metrics(path) == (HISTORY[:1], "line 2 is not JSON")


def test_a_scan_reads_past_a_bad_line_and_names_the_first_one(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps(HISTORY[0]) + "\n{torn\n[1, 2]\n" + json.dumps(HISTORY[1]) + "\n")
    assert scan_metrics(path) == (HISTORY, "line 2 is not JSON")
    path.write_text(json.dumps(HISTORY[0]) + "\n\n[1, 2]\n{torn\n")
    assert scan_metrics(path) == (HISTORY[:1], "line 3 is JSON but not a record (list)")
    _write(path, HISTORY)
    assert scan_metrics(path) == (HISTORY, None)


# ------------------------------------------------------------------------------ the rebuild
def test_a_file_that_matches_the_checkpoint_is_left_as_it_is(tmp_path):
    path = tmp_path / "metrics.jsonl"
    _write(path, HISTORY)
    before = path.stat().st_mtime_ns, path.read_bytes()
    assert restore_for_resume(path, HISTORY, 1) == (None, None)
    assert (path.stat().st_mtime_ns, path.read_bytes()) == before
    assert not list(tmp_path.glob("*.damaged*"))


def test_records_after_the_checkpoint_are_cut_quietly_records_without_an_iteration_kept(tmp_path):
    path = tmp_path / "metrics.jsonl"
    later = [{"iteration": 2, "kind": "train", "loss": 0.1}, {"iteration": 2, "kind": "eval"}]
    _write(path, HISTORY + later)
    assert restore_for_resume(path, HISTORY, 1) == (None, None)
    assert read_metrics(path) == HISTORY
    note = [{"kind": "note", "iteration": "n/a"}]  # a record whose iteration is not a number stays
    _write(path, HISTORY + note + later)
    assert restore_for_resume(path, HISTORY + note, 1) == (None, None)
    assert read_metrics(path) == HISTORY + note


def test_a_damaged_file_is_rebuilt_and_kept_beside_it_under_a_free_name(tmp_path):
    path = tmp_path / "metrics.jsonl"
    (tmp_path / "metrics.jsonl.damaged").mkdir()  # the name is taken: the next one is used
    garbled = json.dumps(HISTORY[0]) + "\n{garbled\n" + json.dumps(HISTORY[1]) + "\n"
    path.write_text(garbled)
    said, damaged = restore_for_resume(path, HISTORY, 1)
    assert damaged == tmp_path / "metrics.jsonl.damaged.1" and damaged.read_text() == garbled
    assert said == (
        f"{path} line 2 is not JSON; rebuilt its 2 records up to iteration 1 from the checkpoint's history "
        "(the file as found: metrics.jsonl.damaged.1)"
    )
    assert read_metrics(path) == HISTORY


def test_a_file_that_disagrees_with_the_checkpoint_is_rebuilt_from_it(tmp_path):
    path = tmp_path / "metrics.jsonl"
    other = [{**HISTORY[0], "eval/success": 0.75}, HISTORY[1]]
    _write(path, other)
    said, damaged = restore_for_resume(path, HISTORY, 1)
    assert said is not None and said.endswith(
        "does not match the checkpoint's records up to iteration 1; rebuilt its 2 records up to iteration 1 "
        "from the checkpoint's history (the file as found: metrics.jsonl.damaged)"
    )
    assert damaged is not None and read_metrics(damaged) == other and read_metrics(path) == HISTORY
    _write(path, HISTORY[:1])  # lines lost: fewer records than the checkpoint's
    assert restore_for_resume(path, HISTORY, 1)[1] == tmp_path / "metrics.jsonl.damaged.1"
    assert read_metrics(path) == HISTORY


def test_a_damaged_file_without_a_history_to_rebuild_from_is_one_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("{garbled\n")
    with pytest.raises(MetricsFileError, match="line 1 is not JSON, and the checkpoint holds no history to rebuild"):
        restore_for_resume(path, [], 0)
    assert path.read_text() == "{garbled\n" and not list(tmp_path.glob("*.damaged*"))
    _write(path, HISTORY)
    with pytest.raises(MetricsFileError, match="does not match the checkpoint, and .* repair that line or start a new"):
        restore_for_resume(path, [], 0)


def test_a_missing_file_or_a_link_is_rebuilt_and_what_the_link_pointed_at_is_untouched(tmp_path):
    path = tmp_path / "metrics.jsonl"
    assert restore_for_resume(path, HISTORY, 1) == (
        f"{path} was missing; rebuilt it from the checkpoint's history (2 records)",
        None,
    )
    assert read_metrics(path) == HISTORY
    elsewhere = tmp_path / "someone_elses.jsonl"
    _write(elsewhere, HISTORY)
    path.unlink()
    path.symlink_to(elsewhere)
    said, damaged = restore_for_resume(path, HISTORY[:1], 0)
    assert said == f"{path} was a link; replaced it by the run's own file, rebuilt from the checkpoint's history"
    assert damaged is None and not path.is_symlink() and read_metrics(path) == HISTORY[:1]
    assert read_metrics(elsewhere) == HISTORY


def test_a_folder_where_the_file_goes_is_refused(tmp_path):
    (tmp_path / "metrics.jsonl").mkdir()
    with pytest.raises(MetricsFileError, match="is not a regular file; move it away"):
        restore_for_resume(tmp_path / "metrics.jsonl", HISTORY, 1)


def test_begins_with_compares_records_in_order_key_order_aside():
    assert begins_with(HISTORY + [{"x": 1}], HISTORY) and begins_with(HISTORY, [])
    assert not begins_with(HISTORY[::-1], HISTORY) and not begins_with(HISTORY[:1], HISTORY)
    assert begins_with([{"b": 1, "a": 2}], [{"a": 2, "b": 1}]) and not begins_with([{"a": 2}], [{"a": 3}])


def test_free_name_counts_past_files_folders_and_dangling_links(tmp_path):
    base = tmp_path / "m.damaged"
    assert free_name(base) == base
    base.write_text("")
    (tmp_path / "m.damaged.1").symlink_to(tmp_path / "nowhere")
    (tmp_path / "m.damaged.2").mkdir()
    assert free_name(base) == tmp_path / "m.damaged.3"


# ------------------------------------------------------------------------------- the logger
def test_a_fresh_logger_starts_the_file_anew_and_a_resumed_one_appends(tmp_path):
    _write(tmp_path / "metrics.jsonl", HISTORY)
    log = MetricsLogger(tmp_path, tensorboard=False, resume_after=1)
    log.log({"iteration": 2, "kind": "train"})
    log.close()
    assert read_metrics(tmp_path / "metrics.jsonl") == HISTORY + [{"iteration": 2, "kind": "train"}]
    log = MetricsLogger(tmp_path, tensorboard=False)
    assert not (tmp_path / "metrics.jsonl").exists() and log.files == [tmp_path / "metrics.jsonl"]
    log.log(HISTORY[0])
    log.close()
    assert read_metrics(tmp_path / "metrics.jsonl") == HISTORY[:1]


class _Writer:
    """TensorBoard's SummaryWriter as the logger uses it."""

    def __init__(self, log_dir: str) -> None:
        self.dir, self.scalars, self.texts, self.flushed, self.closed = Path(log_dir), [], [], 0, False
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "events.out.tfevents.1").write_text("")

    def add_scalar(self, key, value, step):
        self.scalars.append((key, value, step))

    def add_text(self, key, text, step):
        self.texts.append((key, text, step))

    def flush(self):
        self.flushed += 1

    def close(self):
        self.closed = True


def test_tensorboard_is_on_by_default_and_a_new_run_dir_is_made_with_its_parents(tmp_path, monkeypatch):
    import torch.utils.tensorboard as tb

    writers: list[_Writer] = []
    monkeypatch.setattr(tb, "SummaryWriter", lambda d: writers.append(_Writer(d)) or writers[-1])
    run = tmp_path / "a" / "b" / "run"
    log = MetricsLogger(run)  # no tensorboard folder yet
    log.log({"iteration": 1, "loss": 0.5})
    log.close()
    assert [w.dir for w in writers] == [run / "tensorboard"] and writers[0].scalars == [("loss", 0.5, 1)]
    assert log.files == [run / "metrics.jsonl", run / "tensorboard" / "events.out.tfevents.1"]


def test_tensorboard_gets_every_finite_number_at_its_iteration_and_the_config_as_text(tmp_path, monkeypatch):
    import torch.utils.tensorboard as tb

    writers: list[_Writer] = []
    monkeypatch.setattr(tb, "SummaryWriter", lambda d: writers.append(_Writer(d)) or writers[-1])
    (tmp_path / "tensorboard").mkdir()
    (tmp_path / "tensorboard" / "older.tfevents").write_text("")  # an earlier process's file: not this logger's
    log = MetricsLogger(tmp_path, tensorboard=True, config={"lr": 0.1, "env": "rooms"})
    (w,) = writers
    assert w.dir == tmp_path / "tensorboard" and w.texts == [("config", "    lr: 0.1\n    env: rooms", 0)]
    assert log.files == [tmp_path / "metrics.jsonl", tmp_path / "tensorboard" / "events.out.tfevents.1"]
    log.log({"iteration": 3, "loss": 0.5, "n": 2, "bad": float("nan"), "inf": float("inf"), "split": "valid"})
    log.log({"kind": "init", "x": 1.0})  # no iteration: step 0
    assert w.scalars == [("loss", 0.5, 3), ("n", 2, 3), ("x", 1.0, 0)] and w.flushed == 2
    log.close()
    assert w.closed


def test_no_tensorboard_installed_leaves_the_jsonl_alone(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # the import fails
    log = MetricsLogger(tmp_path, tensorboard=True)
    log.log({"iteration": 1, "loss": 0.5})
    log.close()
    assert log.writer is None and read_metrics(tmp_path / "metrics.jsonl") == [{"iteration": 1, "loss": 0.5}]


def test_wandb_gets_the_finite_numbers_but_iteration_and_booleans_and_the_run_is_finished(tmp_path, monkeypatch):
    calls: list = []

    class Run:
        def log(self, scalars, step):
            calls.append(("log", scalars, step))

        def finish(self):
            calls.append(("finish",))

    fake = types.ModuleType("wandb")
    fake.init = lambda **kw: calls.append(("init", kw)) or Run()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "wandb", fake)
    log = MetricsLogger(tmp_path, tensorboard=False, wandb={"project": "p", "id": "abc"})
    log.log({"iteration": 4, "loss": 0.25, "done": True, "nan": float("nan"), "split": "x", "n": 3})
    log.log({"kind": "init", "x": 2.0})  # no iteration: step 0
    log.close()
    log.close()  # a second close finishes nothing again
    assert calls == [
        ("init", {"project": "p", "id": "abc", "resume": "allow", "reinit": "finish_previous"}),
        ("log", {"loss": 0.25, "n": 3}, 4),
        ("log", {"x": 2.0}, 0),
        ("finish",),
    ]


def test_the_wandb_id_is_kept_for_a_resume_and_a_bad_kept_one_is_replaced(tmp_path):
    first = wandb_run_id(tmp_path, resume=False)
    assert (tmp_path / "wandb_id").read_text() == first + "\n" and len(first) == 16 and first.isalnum()
    assert wandb_run_id(tmp_path, resume=True) == first
    assert wandb_run_id(tmp_path, resume=False) != first  # a fresh run in the same dir is a new W&B run
    first = wandb_run_id(tmp_path, resume=False)
    (tmp_path / "wandb_id").write_bytes(b"\xffab\n")  # not UTF-8: not an id
    assert wandb_run_id(tmp_path, resume=True) not in (first, "ab")
    (tmp_path / "wandb_id").write_text("../../etc\n")  # not an id: a new one, kept
    new = wandb_run_id(tmp_path, resume=True)
    assert new != first and new.isalnum() and (tmp_path / "wandb_id").read_text() == new + "\n"
    (tmp_path / "wandb_id").write_text("x" * 65)
    assert wandb_run_id(tmp_path, resume=True) != "x" * 65
    (tmp_path / "wandb_id").write_text("y" * 64)
    assert wandb_run_id(tmp_path, resume=True) == "y" * 64


def test_wandb_settings_name_the_project_the_full_run_dir_and_its_config(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    got = wandb_settings({"lr": 0.1}, tmp_path / "run", "id1")
    assert got == {
        "project": "progpo",
        "name": str((tmp_path / "run").absolute()),
        "config": {"lr": 0.1},
        "dir": str(tmp_path / "run"),
        "id": "id1",
    }
    monkeypatch.setenv("WANDB_PROJECT", "mine")
    assert wandb_settings({}, "r")["project"] == "mine" and "id" not in wandb_settings({}, "r")


# --------------------------------------------------------------------------- the diagnostics
def test_advantage_metrics_say_where_the_progress_term_acted():
    adv, failed, step_failed = np.array([0.5, 0.0, -0.5, 1.0]), np.array([True, False]), np.array([1, 1, 0, 0], bool)
    on = advantage_metrics(adv, failed, step_failed, progpo=True, gate="all_failed")
    assert on == {
        "adv/nonzero_frac": 0.75,
        "adv/abs_mean": 0.5,
        "adv/groups": 2.0,
        "adv/progress_groups": 1.0,
        "adv/progress_group_frac": 0.5,
        "adv/progress_step_frac": 0.5,
    }
    always = advantage_metrics(adv, failed, step_failed, progpo=True, gate="always")
    assert (always["adv/progress_groups"], always["adv/progress_step_frac"]) == (2.0, 1.0)
    off = advantage_metrics(adv, failed, step_failed, progpo=False, gate="all_failed")
    assert (off["adv/groups"], off["adv/progress_groups"], off["adv/progress_group_frac"]) == (2.0, 0.0, 0.0)
    assert off["adv/progress_step_frac"] == 0.0
    empty = advantage_metrics(np.zeros(0), np.zeros(0, bool), np.zeros(0, bool), progpo=True, gate="all_failed")
    assert empty["adv/nonzero_frac"] == empty["adv/abs_mean"] == empty["adv/progress_group_frac"] == 0.0
    assert empty["adv/progress_step_frac"] == 0.0


def _step(traj: int, t: int, state: str, action: str, first: bool, valid: bool = True) -> StepRecord:
    return StepRecord(traj, t, None, state, state + "'", first, 0.0, valid, action)


def test_rollout_metrics_read_success_coverage_repeats_and_invalid_actions_of_each_trajectory():
    trajs = [
        Trajectory(0, 0, "t0", "heat", outcome=1.0, length=3, won=True),
        Trajectory(0, 1, "t0", "heat", outcome=0.0, length=1),
        Trajectory(1, 2, "t1", "cool", outcome=0.0005, length=2),  # a signal below tau_r's 1e-3
        Trajectory(1, 3, "t1", "cool", outcome=0.0, length=0),
    ]
    steps = [
        _step(0, 0, "a", "x", True),
        _step(0, 1, "a", "x", False),  # the same action from the same state: a repeat
        _step(0, 2, "b", "y", True, valid=False),
        _step(1, 0, "a", "x", True),  # another trajectory's: not a repeat
        _step(2, 0, "c", "z", True),
        _step(2, 1, "d", "z", True),
    ]
    m = rollout_metrics(Rollout(steps=steps, trajectories=trajs), prefix="eval/")
    assert m == pytest.approx(
        {
            "eval/success": 0.25,
            "eval/score_mean": 1.0005 / 4,
            "eval/success_by_type/cool": 0.0,
            "eval/success_by_type/heat": 0.5,
            "eval/all_failed_frac": 0.5,
            "eval/episode_length": 1.5,
            "eval/coverage_rate": (2 / 3 + 1 + 1 + 0) / 4,  # first visits per step; none in 0 steps
            "eval/coverage": 5 / 4,
            "eval/repeated_action_rate": 1 / 6,
            "eval/invalid_action_rate": 1 / 6,
            "eval/env_steps": 6.0,
        },
        abs=1e-12,
    )
    assert rollout_metrics(Rollout(steps=steps, trajectories=trajs), tau_r=1e-4)["all_failed_frac"] == 0.0
    assert rollout_metrics(Rollout()) == {}
