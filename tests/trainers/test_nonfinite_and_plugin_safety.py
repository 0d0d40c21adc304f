"""What a careless or hostile input must never do: train on into NaN weights and save them, run
code named by a checkpoint, resume on changed plug-in code unnoticed, or end in a traceback.

Each run is a real tiny trainer run on the rooms env, in a fresh process (:mod:`plugin_runs`).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from plugin_runs import ROOT, TINY_RUN, forget_plugin_files, train

from trainers.advantages import AdvantageConfig, step_advantages
from trainers.advantages.registry import TermError, register_estimator, unregister
from trainers.runs.checkpoint import checksum_path, latest_checkpoint, load_checkpoint
from trainers.runs.provenance import read_provenance

BASE = TINY_RUN.split()

NAN_TERM = """
import numpy as np
from trainers.advantages.registry import register_estimator

@register_estimator("nan-term", help="a step term that goes NaN")
def _nan(ctx):
    return np.full(ctx.traj.size, np.nan)
"""


def _command(cwd: Path, module: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS`` from ``cwd``, as a user runs it there."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1"),
        timeout=600,
    )


def _checkpoints_finite(run: Path) -> list[str]:
    """The checkpoints of ``run`` (names), each asserted to hold finite weights only."""
    names = sorted(p.name for p in (run / "checkpoints").glob("iter_*.pt"))
    for name in names:
        model = load_checkpoint(run / "checkpoints" / name)["model"]
        assert all(bool(torch.isfinite(t).all()) for t in model.values()), name
    return names


@pytest.mark.slow  # a trainer or script in a subprocess
@pytest.mark.parametrize(
    "flags, said",
    [
        (["--plugin", "nan_term.py", "--estimator", "nan-term"], "estimator nan-term: its step term returned"),
        (["--lr", "1e30"], "(estimator progpo-gigpo, lr 1e+30) stopped before saving"),
    ],
    ids=["nan-step-term", "huge-lr"],
)
def test_a_non_finite_update_stops_the_run_in_one_line_and_saves_nothing_non_finite(tmp_path, flags, said):
    (tmp_path / "nan_term.py").write_text(NAN_TERM)
    proc = train(tmp_path, BASE, "--iterations", "3", "--save-every", "1", *flags)
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and said in last and "non-finite" in last, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    names = _checkpoints_finite(tmp_path / "run")
    assert names == ["iter_000000.pt"]  # the state before the first update, never pruned for a NaN one
    assert latest_checkpoint(tmp_path / "run").name == "iter_000000.pt"


@pytest.fixture()
def shaped_term():
    """An estimator whose step term returns whatever the test puts in ``out[0]``."""
    out: list = [None]

    @register_estimator("shape-probe", help="returns out[0]", replace=True)
    def _probe(ctx):
        return out[0](ctx.traj.size)

    yield out
    unregister("shape-probe")


@pytest.mark.parametrize(
    "make, said",
    [
        (lambda n: np.zeros((n, 1)), "must return shape (4,) (one value per step), got (4, 1)"),
        (lambda n: 0.5, "must return shape (4,)"),
        (lambda n: [0.0] * (n - 1), "got (3,)"),
        (lambda n: ["a"] * n, "must return numbers"),
        (lambda n: np.full(n, np.inf), "returned 4 non-finite value(s) of 4"),
    ],
    ids=["column", "scalar", "short-list", "strings", "inf"],
)
def test_a_step_term_of_the_wrong_shape_or_not_finite_is_one_line_naming_the_estimator(shaped_term, make, said):
    shaped_term[0] = make
    with pytest.raises(TermError) as err:
        step_advantages(
            np.array([0.0, 1.0]),
            np.array([0, 0]),
            np.array([0, 0, 1, 1]),
            np.array([0, 1, 0, 1]),
            config=AdvantageConfig(estimator="shape-probe"),
        )
    text = str(err.value)
    assert text.startswith("estimator shape-probe: its step term") and said in text and "\n" not in text, text


def test_a_right_step_term_still_adds_to_the_episode_term(shaped_term):
    shaped_term[0] = lambda n: [0.25] * n  # a list of the right length is read as numbers
    out = step_advantages(
        np.array([0.0, 1.0]),
        np.array([0, 0]),
        np.array([0, 0, 1, 1]),
        np.array([0, 1, 0, 1]),
        config=AdvantageConfig(estimator="shape-probe"),
    )
    np.testing.assert_allclose(out.steps - out.episode[[0, 0, 1, 1]], 0.25)


# ---- a checkpoint's config names code: it never runs ------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tiny")
    proc = train(root, BASE, "--iterations", "1", "--eval-episodes", "4")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return root / "run"


def _crafted(run: Path, into: Path, **config) -> Path:
    """A copy of ``run``'s checkpoint whose embedded config is changed, its checksum fixed."""
    data = load_checkpoint(latest_checkpoint(run))
    data["config"] = {**data["config"], **config}
    (into / "checkpoints").mkdir(parents=True)
    ckpt = into / "checkpoints" / "iter_000001.pt"
    torch.save(data, ckpt)
    checksum_path(ckpt).write_text(hashlib.sha256(ckpt.read_bytes()).hexdigest() + "  " + ckpt.name + "\n")
    (into / "checkpoints" / "latest").write_text(ckpt.name + "\n")
    return ckpt


@pytest.mark.slow  # a trainer or script in a subprocess
@pytest.mark.parametrize(
    "tool, extra",
    [("evaluate", ["--episodes", "2"]), ("play", ["--task", "0"]), ("export", ["OUT"])],
)
def test_a_crafted_checkpoints_plugin_is_never_imported(tiny_run, tmp_path, tool, extra):
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').write('code from a checkpoint ran')\n")
    ckpt = _crafted(
        tiny_run, tmp_path / "crafted", plugins=[str(evil), "this"], estimator="evil-estimator", distill="evil-teacher"
    )
    args = [str(tmp_path / "out") if a == "OUT" else a for a in extra]
    proc = _command(tmp_path, f"trainers.{tool}", str(ckpt), *args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not marker.exists()
    assert "Zen of Python" not in proc.stdout and "Beautiful is better than ugly" not in proc.stdout
    if tool == "export":  # the card still names what the run trained with
        card = (tmp_path / "out" / "README.md").read_text()
        assert "`evil-estimator`" in card and "evil-teacher" in card


@pytest.mark.slow  # a trainer or script in a subprocess
def test_an_earlier_checkpoints_card_reports_its_own_evaluation_not_a_later_one(tiny_run, tmp_path):
    from trainers.cli.export import main as export

    into = tmp_path / "copied"
    _crafted(tiny_run, into)
    # another run's records where the copy lies: never read into its card
    (into / "metrics.jsonl").write_text(
        '{"kind": "eval", "iteration": 99, "eval/success": 0.999, "eval/split": "valid", "eval/episodes": 8}\n'
    )
    assert export([str(into), str(tmp_path / "out")]) == 0
    card = (tmp_path / "out" / "README.md").read_text()
    own = [r for r in load_checkpoint(latest_checkpoint(tiny_run))["history"] if r.get("kind") == "eval"][-1]
    assert "0.999" not in card and "iteration 99" not in card
    assert f"held-out success {own['eval/success']:.3f}" in card and f"at iteration {own['iteration']}" in card
    assert "code: commit `not recorded`" in card  # the dir's provenance is not the checkpoint's run


# ---- plug-in files: recorded, resolved, checked on resume ------------------------------------

TERM = """
import numpy as np
from trainers.advantages.registry import register_estimator

@register_estimator("recorded-term", help="a constant step term")
def _term(ctx):
    return np.full(ctx.traj.size, {value})
"""


@pytest.mark.slow  # a trainer or script in a subprocess
def test_a_changed_plugin_is_refused_on_resume_unless_accepted_and_then_recorded(tmp_path):
    plugin = tmp_path / "term.py"
    plugin.write_text(TERM.format(value=0.1))
    flags = ["--plugin", "term.py", "--estimator", "recorded-term", "--save-every", "1"]
    assert train(tmp_path, BASE, "--iterations", "1", *flags).returncode == 0
    first = [r for r in read_provenance(tmp_path / "run") if r["kind"] == "provenance"][0]
    assert first["plugins"] == [
        {"plugin": str(plugin), "path": str(plugin), "sha256": hashlib.sha256(plugin.read_bytes()).hexdigest()}
    ]
    plugin.write_text(TERM.format(value=0.2))
    refused = train(tmp_path, BASE, "--iterations", "2", *flags, "--resume")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "term.py changed (sha256" in refused.stderr and "--accept-plugin-change" in refused.stderr
    accepted = train(tmp_path, BASE, "--iterations", "2", *flags, "--resume", "--accept-plugin-change")
    assert accepted.returncode == 0, accepted.stderr[-2000:]
    records = read_provenance(tmp_path / "run")
    resumes = [r for r in records if r["kind"] == "resume"]
    assert (
        len(resumes) == 1
        and resumes[0]["iteration"] == 1
        and "term.py changed" in resumes[0]["plugin_changes_accepted"][0]
    )
    latest = [r for r in records if r["kind"] == "provenance"][-1]
    assert latest["plugins"][0]["sha256"] == hashlib.sha256(plugin.read_bytes()).hexdigest()


@pytest.mark.slow  # a trainer or script in a subprocess
def test_a_relative_plugin_in_a_config_is_read_beside_it_and_the_run_works_from_anywhere(tmp_path):
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "term.py").write_text(TERM.format(value=0.1))
    (configs / "run.yaml").write_text("plugins: [term.py]\nadvantage: {estimator: recorded-term}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert train(elsewhere, ["--config", str(configs / "run.yaml"), *BASE], "--iterations", "1").returncode == 0
    saved = load_checkpoint(latest_checkpoint(elsewhere / "run"))["config"]["plugins"]
    assert saved == [str(configs / "term.py")]
    other = tmp_path / "other"
    other.mkdir()
    resumed = _command(
        other,
        "trainers.progpo",
        *["--config", str(configs / "run.yaml"), *BASE, "--iterations", "2", "--output-dir", str(elsewhere / "run")],
        "--resume",
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]


# ---- plug-ins that cannot load, or load and do nothing: one line each ------------------------


@pytest.mark.slow  # a trainer or script in a subprocess
@pytest.mark.parametrize(
    "source, said",
    [
        ("x = (\n", "failed to load: SyntaxError: '(' was never closed ({file}:1)"),
        ("def f():\n    raise RuntimeError('boom')\n\nf()\n", "failed to load: RuntimeError: boom ({file}:2)"),
        ("import not_a_module_anywhere_xyz\n", "failed to load: ModuleNotFoundError"),
        ("import sys\nsys.exit(0)\n", "called sys.exit(0) while loading"),
        ("x = 1\n", "registered no estimator or teacher"),
    ],
    ids=["syntax", "raises", "missing-dependency", "exits", "registers-nothing"],
)
def test_a_plugin_that_cannot_load_or_registers_nothing_is_one_line_naming_it(tmp_path, source, said):
    (tmp_path / "bad.py").write_text(source)
    proc = train(tmp_path, BASE, "--iterations", "1", "--plugin", "bad.py")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("error: plugin ") and said.format(file=tmp_path / "bad.py") in line, line
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
    forget_plugin_files()


@pytest.mark.slow  # a trainer or script in a subprocess
@pytest.mark.parametrize(
    "flags, said",
    [
        (["--plugin", "./x"], "plugin ./x: not a module name (a.b.c) or a .py file"),
        (["--estimator", "hgpo", "--hgpo-depth", "2", "--estimator-option", "depth=3"], "set one option twice"),
        (["--teacher-option", "coef=1"], "no teacher is set (--distill)"),
        (["--distill", "hindsight", "--teacher-option", "tau=1"], "hindsight has no option 'tau'; it takes"),
        (["--distill", "hindsight", "--distill-lambda", "0.5", "--teacher-option", "coef=1"], "set one option twice"),
    ],
    ids=[
        "plugin-path",
        "two-spellings",
        "teacher-option-no-teacher",
        "teacher-option-unknown",
        "teacher-two-spellings",
    ],
)
def test_a_setting_that_would_be_ignored_or_disagrees_is_refused_in_one_line(tmp_path, flags, said):
    proc = train(tmp_path, BASE, "--iterations", "1", *flags)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert said in proc.stderr.strip().splitlines()[-1]


@pytest.mark.slow  # a trainer or script in a subprocess
def test_an_option_in_exponent_form_is_a_number_and_the_report_shows_the_value_used(tmp_path):
    proc = train(
        tmp_path, BASE, "--iterations", "1", "--estimator", "hgpo", "--estimator-option", "depth=3",
        "--estimator-option", "alpha=1e-3",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    config = load_checkpoint(latest_checkpoint(tmp_path / "run"))["config"]
    assert config["estimator_options"] == {"depth": 3, "alpha": 0.001}
    assert "(depths 1..3," in (tmp_path / "run" / "summary.md").read_text()
