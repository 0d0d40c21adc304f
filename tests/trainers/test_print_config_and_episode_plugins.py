"""``--print-config`` shows the config a run would write, every shipped config resolves through
it unchanged, and an estimator that changes only the episode term registers and trains."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from plugin_runs import ROOT, TINY_RUN, train

from trainers.cli.train import main
from trainers.config import TrainConfig, flatten_sections, load_yaml

CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))


@pytest.mark.parametrize("config", CONFIGS, ids=[c.name for c in CONFIGS])
def test_every_shipped_config_resolves_through_print_config_to_the_same_values(config, capsys, tmp_path):
    assert main(["--config", str(config), "--print-config"]) == 0
    printed = capsys.readouterr().out
    direct = TrainConfig.from_dict(load_yaml(config), str(config)).to_dict()
    (tmp_path / "printed.yaml").write_text(printed)
    again = TrainConfig.from_dict(load_yaml(tmp_path / "printed.yaml"), "printed").to_dict()
    assert again == direct  # the printed YAML is the config: --config takes it back as it is
    assert flatten_sections(yaml.safe_load(printed), "printed", warn=False) == direct


def test_print_config_runs_nothing_and_shows_the_flags_over_the_file(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["--print-config", "--estimator", "grpo", "--lr", "1e-4", "--output-dir", str(out)]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["advantage"]["estimator"] == "grpo" and printed["ppo"]["lr"] == 1e-4
    assert not out.exists()


@pytest.mark.slow  # a trainer or script in a subprocess
def test_an_unknown_estimator_says_to_load_its_plugin():
    proc = subprocess.run(
        [sys.executable, "-m", "trainers.progpo", "--estimator", "novelty"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2 and "pass --plugin MODULE_OR_FILE" in proc.stderr.strip().splitlines()[-1]


EPISODE_ONLY = """
import numpy as np
from trainers.advantages.registry import register_episode_estimator

@register_episode_estimator("group-max", help="the outcome minus its group's best")
def group_max(r, gid, n, *, eps, norm, turns, options):
    best = np.full(n, -np.inf)
    np.maximum.at(best, gid, r)
    return r - best[gid]
"""


@pytest.mark.slow  # a trainer or script in a subprocess
def test_an_episode_only_estimator_registers_without_a_step_term_and_trains(tmp_path):
    (tmp_path / "group_max.py").write_text(EPISODE_ONLY)
    proc = train(
        tmp_path, TINY_RUN.split(), "--iterations", "2", "--plugin", "group_max.py", "--estimator", "group-max"
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    recs = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    train_recs = [r for r in recs if r["kind"] == "train"]
    assert len(train_recs) == 2 and all(r["update/steps"] > 0 for r in train_recs)
    assert Path(tmp_path / "run" / "summary.md").exists()


def test_an_episode_only_estimators_advantage_is_its_episode_term_on_every_step(tmp_path):
    import numpy as np
    from plugin_runs import forget_plugin_files

    from trainers.advantages import AdvantageConfig, step_advantages
    from trainers.advantages.registry import estimator, load_plugin, unregister

    (tmp_path / "group_max.py").write_text(EPISODE_ONLY)
    load_plugin(str(tmp_path / "group_max.py"))
    try:
        assert estimator("group-max").step is None
        out = step_advantages(
            np.array([1.0, 0.0, 0.0, 0.0]),  # group 0 mixed, group 1 all failed
            np.array([0, 0, 1, 1]),
            np.array([0, 0, 1, 2, 3]),
            np.array([0, 1, 0, 0, 0]),
            config=AdvantageConfig(estimator="group-max"),
        )
        assert out.steps.tolist() == [0.0, 0.0, -1.0, 0.0, 0.0] and out.step_term is None
    finally:
        unregister("group-max")
        forget_plugin_files()
