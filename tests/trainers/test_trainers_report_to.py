"""--report-to: TensorBoard, Weights & Biases or none, as TRL's report_to (comma-separated)."""

from __future__ import annotations

import importlib.util
import sys
from types import SimpleNamespace

import pytest

from trainers.cli.train import main
from trainers.config import ConfigError, TrainConfig

FLAGS = (
    "--env rooms --model tiny --num-groups 2 --group-size 2 --max-steps 3 --iterations 2 "
    "--eval-episodes 4 --warm-start none --no-progress-bars --no-baseline-random --torch-threads 1"
).split()


def test_report_to_names_trackers_like_trl():
    assert TrainConfig().trackers == ("tensorboard",)
    assert TrainConfig(report_to="none").trackers == ()
    assert TrainConfig(report_to="tensorboard", tensorboard=False).trackers == ()  # --no-tensorboard still works
    for bad, said in (
        ("mlflow", "report_to takes tensorboard, wandb, none"),
        ("none,tensorboard", "none reports"),
        ("", "report_to takes"),
    ):
        with pytest.raises(ConfigError, match=said):
            TrainConfig(report_to=bad)


def test_wandb_without_its_extra_is_one_line_before_anything_is_written(tmp_path, capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    assert main([*FLAGS, "--report-to", "wandb", "--output-dir", str(tmp_path / "run")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and "pip install 'progpo[wandb]'" in err[0] and not (tmp_path / "run").exists()


class _FakeWandb:
    """What the trainer calls of ``wandb``, recorded."""

    def __init__(self) -> None:
        self.inits, self.logged, self.finished = [], [], 0

    def init(self, **kw):
        self.inits.append(kw)
        return SimpleNamespace(log=lambda data, step: self.logged.append((step, dict(data))), finish=self._finish)

    def _finish(self):
        self.finished += 1


def test_every_record_reaches_wandb_at_its_iteration(tmp_path, monkeypatch):
    fake = _FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "wandb" else real(name, *a))
    run = tmp_path / "myrun"
    assert main([*FLAGS, "--report-to", "wandb", "--output-dir", str(run)]) == 0
    (init,) = fake.inits
    assert init["name"] == str(run.absolute()) and init["dir"] == str(run) and init["config"]["report_to"] == "wandb"
    assert init["project"] == "progpo" and fake.finished == 1
    steps = [step for step, _ in fake.logged]
    assert steps == sorted(steps) and {1, 2} <= set(steps)
    import json

    recorded = [json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(fake.logged) == len(recorded)  # every record, under the keys metrics.jsonl uses
    for (step, logged), rec in zip(fake.logged, recorded):
        numbers = {
            k: v for k, v in rec.items() if k != "iteration" and isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        assert step == rec["iteration"] and logged == numbers
    assert not (run / "tensorboard").exists()  # only what report_to names


def test_a_resumed_run_logs_on_into_the_same_wandb_run_and_two_dirs_named_run_stay_apart(tmp_path, monkeypatch):
    fake = _FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "wandb" else real(name, *a))
    one, two = tmp_path / "a" / "run", tmp_path / "b" / "run"
    assert main([*FLAGS, "--report-to", "wandb", "--output-dir", str(one)]) == 0
    more = [*FLAGS, "--iterations", "3"]  # the later flag wins: one more iteration
    assert main([*more, "--report-to", "wandb", "--output-dir", str(one), "--resume"]) == 0
    assert main([*FLAGS, "--report-to", "wandb", "--output-dir", str(two)]) == 0
    first, resumed, other = fake.inits
    assert first["id"] and resumed["id"] == first["id"] and resumed["resume"] == "allow"
    assert (one / "wandb_id").read_text().strip() == first["id"]
    assert other["id"] != first["id"] and other["name"] != first["name"]


def test_wandb_offline_writes_its_run_beside_the_runs_files(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="extra [wandb] not installed")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    assert main([*FLAGS, "--report-to", "tensorboard,wandb", "--output-dir", str(run)]) == 0
    offline = list((run / "wandb").glob("offline-run-*/*.wandb"))
    assert len(offline) == 1 and offline[0].stat().st_size > 0 and (run / "tensorboard").is_dir()
