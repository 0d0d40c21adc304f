"""A new estimator is one file outside the package: registered by a decorator (or an entry point),
it trains through ``python -m trainers.progpo``, becomes a method of the lab and a verl estimator,
with its options checked against their bounds, and nothing of the package changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from trainers.advantages import AdvantageConfig, option, registry, step_advantages

sys.path.insert(0, str(Path(__file__).parent))
from plugin_runs import ROOT, TINY_RUN, forget_plugin_files, train

EXAMPLE = ROOT / "examples" / "custom_estimator.py"
TINY = f"{TINY_RUN} --iterations 1 --num-groups 2 --group-size 3 --max-steps 4 --baseline-random".split()


@pytest.fixture
def novelty():
    """The example's estimator, registered for one test and removed after it."""
    registry.load_plugin(str(EXAMPLE))
    yield registry.estimator("novelty")
    registry.unregister("novelty")
    forget_plugin_files()


def _train(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    return train(tmp_path, TINY, *flags)


def test_the_decorator_registers_a_base_and_its_progpo_variant(novelty) -> None:
    assert "novelty" in registry.base_names() and "progpo-novelty" in registry.estimator_names()
    assert novelty.needs_states and novelty.options.__name__ == "NoveltyOptions"
    cfg = AdvantageConfig(estimator="novelty", options={"weight": 2})
    assert cfg.base_options.weight == 2.0  # an int read as the float it is
    out = step_advantages(
        np.array([0.0, 0.0]),
        np.array([0, 0]),
        np.array([0, 0, 1, 1]),
        np.array([0, 1, 0, 1]),
        state_ids=np.array([1, 2, 1, 1]),
        config=cfg,
    )
    # all failed: GRPO's term is 0; the two new states of trajectory 0 and the first of 1 get the weight
    assert out.steps.tolist() == [2.0, 2.0, 0.0, 0.0]
    assert out.acted == {"novel_steps": 2.0}


def test_options_are_checked_against_their_bounds_and_names(novelty) -> None:
    with pytest.raises(ValueError, match="novelty option weight must be >= 0.0, got -1"):
        AdvantageConfig(estimator="novelty", options={"weight": -1})
    with pytest.raises(ValueError, match="novelty has no option 'wieght'; it takes weight"):
        AdvantageConfig(estimator="progpo-novelty", options={"wieght": 1.0})
    with pytest.raises(ValueError, match="must be a finite number"):
        AdvantageConfig(estimator="novelty", options={"weight": "much"})


def test_a_taken_name_or_a_reserved_one_is_refused() -> None:
    @dataclass(frozen=True)
    class Opts:
        k: int = option(1, "k")

    with pytest.raises(ValueError, match="'gigpo' is registered already"):
        registry.register_estimator("gigpo")(lambda ctx: None)
    with pytest.raises(ValueError, match="does not start with 'progpo-'"):
        registry.register_estimator("progpo-x")(lambda ctx: None)
    with pytest.raises(ValueError, match="needs takes states, turns, response_lengths"):
        registry.register_estimator("x-needs", needs=("stats",))(lambda ctx: None)
    with pytest.raises(ValueError, match="'grpo' is built in"):
        registry.unregister("grpo")
    assert "x-needs" not in registry.base_names()


@pytest.mark.slow  # a trainer or interpreter in a subprocess
def test_trainer_trains_with_the_plugin_file_and_writes_its_metrics(tmp_path) -> None:
    done = _train(
        tmp_path, "--plugin", str(EXAMPLE), "--estimator", "progpo-novelty", "--estimator-option", "weight=0.5"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r.get("kind") == "train"]
    assert train and all("adv/novel_step_frac" in r for r in train)
    config = (tmp_path / "run" / "config.yaml").read_text()
    assert str(EXAMPLE) in config and "weight: 0.5" in config


@pytest.mark.slow  # a trainer or interpreter in a subprocess
def test_yaml_names_the_plugin_and_its_options_and_a_bad_option_is_one_line(tmp_path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(f"plugins: [{EXAMPLE}]\nadvantage: {{estimator: novelty, options: {{weight: 0.3}}}}\n")
    done = _train(tmp_path, "--config", str(good))
    assert done.returncode == 0, done.stderr[-2000:]
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"plugins: [{EXAMPLE}]\nadvantage: {{estimator: novelty, options: {{weight: -3}}}}\n")
    done = _train(tmp_path, "--config", str(bad), "--overwrite")
    assert done.returncode != 0
    assert "novelty option weight must be >= 0.0, got -3" in done.stderr and "Traceback" not in done.stderr
    done = _train(tmp_path, "--estimator", "novelty")  # the plug-in not loaded: the known ones are listed
    assert done.returncode == 2 and "invalid choice: 'novelty'" in done.stderr


def test_lab_takes_the_plugin_estimator_as_a_method_and_passes_the_plugin_on(novelty, tmp_path) -> None:
    from trainers.lab.cli import parse
    from trainers.lab.methods import axes_of, is_method
    from trainers.lab.runs import trainer_args

    args = parse(["--plugin", str(EXAMPLE), "--methods", "novelty", "progpo-novelty+tree", "--out", str(tmp_path)])
    assert args.methods == ["novelty", "progpo-novelty+tree"]
    assert axes_of("progpo-novelty+tree")["estimator"] == "progpo-novelty" and is_method("novelty+hindsight")
    cmd = trainer_args(args, "progpo-novelty+tree", 3, 1, tmp_path / "r")
    assert cmd[cmd.index("--estimator") + 1] == "progpo-novelty" and cmd[cmd.index("--rollout") + 1] == "tree"
    assert cmd[cmd.index("--plugin") + 1] == str(EXAMPLE)
    from trainers.lab.methods import _acted

    assert _acted()[0]["novel steps"] == "adv/novel_step_frac"


def test_verl_offers_the_plugin_estimator_with_the_columns_its_needs_name(novelty) -> None:
    import torch

    from trainers.integrations import verl

    assert verl.required_columns("novelty") == ("traj_uid", "anchor_obs", "progpo_outcome", "progpo_step")
    assert verl.required_columns("progpo_novelty")[-2:] == ("progpo_first_visit", "progpo_step")
    fn = verl.estimators()["novelty"]
    ntb = {
        "traj_uid": np.array(["a", "a", "b", "b"]),
        "anchor_obs": np.array(["x", "y", "x", "x"]),
        "progpo_outcome": np.zeros(4),
        "progpo_step": np.array([0, 1, 0, 1]),
    }
    adv, _ = fn(
        torch.zeros(4, 2), torch.ones(4, 2), np.array(["g"] * 4), config={"novelty_weight": 2.0}, non_tensor_batch=ntb
    )
    assert adv[:, 0].tolist() == [2.0, 2.0, 0.0, 0.0]
    with pytest.raises(verl.MissingColumnsError, match="novelty: non_tensor_batch lacks anchor_obs"):
        fn(
            torch.zeros(4, 2),
            torch.ones(4, 2),
            np.array(["g"] * 4),
            non_tensor_batch={k: v for k, v in ntb.items() if k != "anchor_obs"},
        )


def test_verl_agent_branches_for_the_plugin_estimator_with_its_options(novelty) -> None:
    """verl-agent's compute_advantage branch reads the registry: the plug-in's estimator runs there
    (no line of the integration names it), its options come from ``algorithm.progpo``, and
    verl-agent's trainer set-up is its step-level one (the estimator reads states)."""
    from types import SimpleNamespace

    import torch

    from trainers.integrations.verl_agent import compute_advantage_branch, progpo_estimators

    assert progpo_estimators()["novelty"] == progpo_estimators()["progpo_novelty"] == "gigpo"
    passed_on = []
    ntb = {
        "traj_uid": np.array(["a", "a", "b", "b"]),
        "anchor_obs": np.array(["x", "y", "x", "x"]),
        "progpo_outcome": np.zeros(4),
        "progpo_step": np.array([0, 1, 0, 1]),
        "uid": np.array(["g"] * 4),
    }
    for options, want in (({}, [0.25, 0.25, 0.0, 0.0]), ({"novelty_weight": 2.0}, [2.0, 2.0, 0.0, 0.0])):
        branch = compute_advantage_branch(lambda data, est, *a, **k: passed_on.append(est) or data, options)
        data = SimpleNamespace(batch={"response_mask": torch.ones(4, 2)}, non_tensor_batch=dict(ntb))
        out = branch(data, "novelty", gamma=0.95)
        assert out.batch["advantages"][:, 0].tolist() == want
    assert passed_on == []


def test_a_dashed_plugin_name_reaches_verl_and_verl_agent_under_one_option_key(novelty) -> None:
    """A base named with a dash is ``two_word`` to verl: its options are ``two_word_<option>`` in
    verl's config and in verl-agent's ``algorithm.progpo``, read the same way by both."""
    import dataclasses
    from types import SimpleNamespace

    import torch

    from trainers.integrations import verl
    from trainers.integrations.verl_agent import compute_advantage_branch

    registry.register(dataclasses.replace(novelty, name="two-word"))
    try:
        assert verl.option_key("two-word", "weight") == "two_word_weight"
        ntb = {
            "traj_uid": np.array(["a", "a", "b", "b"]),
            "anchor_obs": np.array(["x", "y", "x", "x"]),
            "progpo_outcome": np.zeros(4),
            "progpo_step": np.array([0, 1, 0, 1]),
        }
        adv, _ = verl.estimators()["two_word"](
            torch.zeros(4, 2),
            torch.ones(4, 2),
            np.array(["g"] * 4),
            config={"two_word_weight": 2.0},
            non_tensor_batch=ntb,
        )
        assert adv[:, 0].tolist() == [2.0, 2.0, 0.0, 0.0]
        branch = compute_advantage_branch(lambda data, *a, **k: data, {"two_word_weight": 2.0})
        data = SimpleNamespace(
            batch={"response_mask": torch.ones(4, 2)}, non_tensor_batch={**ntb, "uid": np.array(["g"] * 4)}
        )
        assert branch(data, "two_word", gamma=0.95).batch["advantages"][:, 0].tolist() == [2.0, 2.0, 0.0, 0.0]
    finally:
        registry.unregister("two-word")


@pytest.mark.slow  # a trainer or interpreter in a subprocess
def test_an_installed_distribution_registers_through_its_entry_point(tmp_path) -> None:
    """A distribution's ``progpo.estimators`` entry point is loaded at the first lookup of a name."""
    (tmp_path / "my_novelty.py").write_text(EXAMPLE.read_text())
    dist = tmp_path / "my_novelty-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-novelty\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[progpo.estimators]\nnovelty = my_novelty\n")
    code = textwrap.dedent("""
        from trainers.config import TrainConfig
        cfg = TrainConfig(estimator="progpo-novelty", estimator_options={"weight": 0.7})
        print(cfg.advantage_config().base_options.weight)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "0.7"
