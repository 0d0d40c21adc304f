"""A new teacher is one file outside the package: registered with its factory, label, checks and
report paragraph, it trains through ``python -m trainers.progpo`` (its loss in the update, its
label on every record) and is a ``+<teacher>`` method of the lab, with nothing of the package
changed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainers.teachers import registry as teacher_registry

sys.path.insert(0, str(Path(__file__).parent))
from plugin_runs import ROOT, TINY_RUN, forget_plugin_files, train

EXAMPLE = ROOT / "examples" / "custom_teacher.py"
TINY = f"{TINY_RUN} --iterations 2 --num-groups 2 --group-size 4 --max-steps 20 --seed 0".split()


@pytest.fixture
def self_imitation():
    """The example's teacher, registered for one test and removed after it."""
    from trainers.advantages.registry import load_plugin

    load_plugin(str(EXAMPLE))
    yield teacher_registry.teacher("self-imitation")
    teacher_registry.unregister_teacher("self-imitation")
    forget_plugin_files()


def _train(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    return train(tmp_path, TINY, *flags)


def test_the_registry_names_the_built_ins_and_refuses_a_taken_name() -> None:
    assert teacher_registry.teacher_names()[:3] == ("none", "privileged", "hindsight")
    assert teacher_registry.teacher("privileged").privileged and not teacher_registry.teacher("hindsight").privileged
    spec = teacher_registry.TeacherSpec("hindsight", "x:y", label=lambda c: "x")
    with pytest.raises(ValueError, match="'hindsight' is registered already"):
        teacher_registry.register_teacher(spec, replace=True)
    with pytest.raises(ValueError, match="other than 'none'"):
        teacher_registry.TeacherSpec("none", "x:y", label=lambda c: "x")


@pytest.mark.slow  # a trainer or interpreter in a subprocess
def test_trainer_trains_with_the_plugin_teacher_and_labels_every_record(tmp_path) -> None:
    done = _train(tmp_path, "--plugin", str(EXAMPLE), "--distill", "self-imitation", "--teacher-option", "coef=0.05")
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r.get("kind") == "train"]
    assert all(r["distill"] == "self-imitation (reward only)" for r in train)
    assert any(r["distill/steps"] > 0 and r["distill/self_imitation_nll"] > 0 for r in train)  # a won step imitated
    assert "**Teacher: self-imitation (reward only).**" in (tmp_path / "run" / "summary.md").read_text()
    assert "teacher: self-imitation (reward only)" in done.stdout


@pytest.mark.slow  # a trainer or interpreter in a subprocess
def test_the_teacher_s_own_check_and_an_unloaded_plugin_are_one_line(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"plugins: [{EXAMPLE}]\ndistill: {{mode: self-imitation, options: {{coef: -1}}}}\n")
    done = _train(tmp_path, "--config", str(bad))
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "self-imitation option coef must be a number >= 0, got -1" in done.stderr
    done = _train(tmp_path, "--distill", "self-imitation", "--overwrite")
    assert done.returncode == 2 and "invalid choice: 'self-imitation'" in done.stderr


def test_lab_runs_the_plugin_teacher_as_a_labelled_method(self_imitation, tmp_path) -> None:
    from trainers.lab.cli import parse
    from trainers.lab.methods import axes_of, labelled
    from trainers.lab.runs import trainer_args

    args = parse(["--plugin", str(EXAMPLE), "--methods", "gigpo+self-imitation", "--out", str(tmp_path)])
    assert axes_of("gigpo+self-imitation")["distill"] == "self-imitation"
    assert labelled("progpo-gigpo+self-imitation") == "progpo-gigpo+self-imitation [self-imitation (reward only)]"
    cmd = trainer_args(args, "gigpo+self-imitation", 3, 1, tmp_path / "r")
    assert cmd[cmd.index("--distill") + 1] == "self-imitation" and cmd[cmd.index("--plugin") + 1] == str(EXAMPLE)
