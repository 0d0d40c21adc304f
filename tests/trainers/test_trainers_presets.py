"""The shipped configs build the settings their comments describe."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainers.config import ConfigError, TrainConfig, load_yaml

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _cfg(name: str) -> TrainConfig:
    cfg = TrainConfig.from_dict(load_yaml(CONFIGS / name))
    cfg.validate()
    return cfg


def test_trap_preset_keeps_the_trap():
    cfg = _cfg("alfworld_trap.yaml")
    assert (cfg.avoid_repeats, cfg.history_k, cfg.template, cfg.resolved_warm_start) == (
        False,
        2,
        "alfworld-task-notes",
        "bc",
    )
    assert cfg.bc_steps < _cfg("alfworld_cpu_demo.yaml").bc_steps  # a weaker clone than the demo's

    from agents.prompting import build_messages

    hist = [("You are in the middle of a room.", "go to desk 1")]
    msgs = build_messages(
        cfg.template,
        goal="put a mug in desk.",
        observation="On the desk 1, you see a mug 1.",
        admissible=["go to desk 1", "go to shelf 1", "take mug 1 from desk 1"],
        history=hist,
        step=1,
        k=cfg.history_k,
        fmt="action",
    )
    assert "visited" not in msgs[-1]["content"] and "seen: mug 1 at desk 1" in msgs[-1]["content"]


def test_webshop_demo_clones_the_shopper_with_the_notes_prompt():
    cfg = _cfg("webshop_cpu_demo.yaml")
    assert (cfg.env, cfg.template, cfg.resolved_warm_start, cfg.policy_mode) == (
        "webshop",
        "webshop-notes",
        "bc",
        "score",
    )
    assert cfg.bc_episodes > 0 and cfg.eval_episodes >= 200


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("*.yaml")))
def test_every_shipped_config_validates(name):
    _cfg(name)


def test_every_config_field_documents_itself_in_help() -> None:
    """TRL-style: each field carries one line of help and a --help section, and --help prints both."""

    from trainers.config import config_fields
    from trainers.config_flags import build_parser

    text = " ".join(build_parser().format_help().split())
    for f in config_fields():
        assert f.metadata.get("help") and f.metadata.get("group"), f.name
        if f.name != "notes":
            assert " ".join(f.metadata["help"].split()) in text, f.name
    sections = list(dict.fromkeys(f.metadata["group"] for f in config_fields()))
    assert sections == [
        "what to train",
        "policy",
        "warm start",
        "estimator",
        "rollout",
        "teacher",
        "budget",
        "PPO update",
        "outputs",
    ]
    help_text = build_parser().format_help()
    assert all(f"\n{s}" in help_text for s in sections)
    assert "estimator (in a YAML config: under advantage:):" in help_text  # where the group goes in a YAML file


def test_yaml_sections_read_as_their_fields_and_flat_keys_with_a_deprecation_line(tmp_path, capsys) -> None:
    from trainers.config import SECTIONS, TrainConfig
    from trainers.config_flags import parse_args

    sectioned = tmp_path / "sectioned.yaml"
    sectioned.write_text(
        "seed: 3\nrollout: tree\nadvantage: {estimator: progpo-hgpo, gamma: 0.9, hgpo_depth: 3}\n"
        "tree: {branches: 2, scorer: random}\ndistill: {mode: hindsight, tau: 0.1, lambda: 0.02}\n"
        "ppo: {lr: 1.0e-4, clip_eps: 0.3}\n"
    )
    cfg, _ = parse_args(["--config", str(sectioned), "--gamma", "0.8"])  # a flag overrides its section's key
    assert (
        cfg.seed,
        cfg.rollout,
        cfg.estimator,
        cfg.gamma,
        cfg.hgpo_depth,
        cfg.tree_branches,
        cfg.tree_scorer,
        cfg.distill,
        cfg.distill_tau,
        cfg.distill_lambda,
        cfg.lr,
        cfg.clip_eps,
    ) == (3, "tree", "progpo-hgpo", 0.8, 3, 2, "random", "hindsight", 0.1, 0.02, 1e-4, 0.3)
    assert capsys.readouterr().err == ""
    flat = tmp_path / "flat.yaml"
    flat.write_text("seed: 3\nestimator: progpo-hgpo\ntree_branches: 2\ndistill: hindsight\nlr: 1.0e-4\n")
    old, _ = parse_args(["--config", str(flat)])
    assert (old.estimator, old.tree_branches, old.distill, old.lr) == ("progpo-hgpo", 2, "hindsight", 1e-4)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 4 and all(ln.startswith("deprecated: ") for ln in err), err
    assert "tree_branches: at the top level is now tree: {branches: ...}" in err[1]
    assert "distill: at the top level is now distill: {mode: ...}" in err[2]
    # a run's own config.yaml and a checkpoint's config are flat by design: read without a line
    assert TrainConfig.from_dict({"estimator": "grpo", "lr": 0.1}, flat=True).lr == 0.1
    assert capsys.readouterr().err == ""
    assert set(SECTIONS) == {"advantage", "tree", "distill", "ppo"}


def test_closed_choices_come_from_the_field_types_and_the_flags_offer_exactly_them(capsys) -> None:
    import typing

    from trainers.config import closed_choices
    from trainers.config_flags import build_parser
    from trainers.config_sections import SETTINGS

    choices = closed_choices()
    hints = {name: hint for _, section in SETTINGS for name, hint in typing.get_type_hints(section).items()}
    assert set(choices) == {name for name, hint in hints.items() if typing.get_origin(hint) is typing.Literal}
    assert {"env", "hgpo_fusion", "warm_start", "group_norm", "answer_format", "loss_agg", "device"} <= set(choices)
    actions = {a.dest: a for a in build_parser()._actions}
    from trainers.advantages import estimator_names

    assert tuple(actions["estimator"].choices) == estimator_names()  # the registry's, plug-ins included
    for name, values in choices.items():
        assert tuple(actions[name].choices) == values, name
        default = getattr(TrainConfig(), name)
        assert default in values, name
    with pytest.raises(ConfigError, match=r"group_norm must be one of mean_std, mean, got 'zscore'"):
        TrainConfig(group_norm="zscore")


def test_renamed_fields_still_read_from_yaml_and_flags_with_one_line(tmp_path, capsys) -> None:
    from trainers.config import RENAMED
    from trainers.config_flags import parse_args

    old = tmp_path / "old.yaml"
    old.write_text("init: none\ninit_std: 0.05\nlam: 0.5\nnorm: mean\nextra: {why: test}\n")
    cfg, _ = parse_args(["--config", str(old), "--no-progress", "--fmt", "raw"])
    assert (
        cfg.warm_start,
        cfg.tiny_init_std,
        cfg.progress_lambda,
        cfg.group_norm,
        cfg.notes,
        cfg.progress_bars,
        cfg.answer_format,
    ) == ("none", 0.05, 0.5, "mean", {"why": "test"}, False, "raw")
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln]
    assert len(err) == 7 and all(ln.startswith("deprecated: ") for ln in err), err
    assert "init is now warm_start" in err[0] and any("--fmt is now --answer-format" in ln for ln in err)
    assert set(RENAMED.values()) <= set(cfg.to_dict())
    both = tmp_path / "both.yaml"
    both.write_text("init: none\nwarm_start: bc\n")
    with pytest.raises(ConfigError, match="both init and warm_start are set"):
        parse_args(["--config", str(both)])
    with pytest.raises(ConfigError, match="both --lam and --progress-lambda"):
        parse_args(["--lam", "0.5", "--progress-lambda", "0.4"])
    assert "--init " not in build_help() and "--warm-start" in build_help()  # old flags are not advertised


def build_help() -> str:
    from trainers.config_flags import build_parser

    return build_parser().format_help()


@pytest.mark.parametrize(
    "argv,said",
    [
        (["--estimater", "gigpo"], "did you mean --estimator?"),
        (["--estimator", "progpo-gipgo"], "did you mean progpo-gigpo?"),
        (["--no-tensorbord"], "did you mean --no-tensorboard?"),
    ],
)
def test_a_mistyped_flag_or_choice_is_a_short_usage_and_the_closest_one(argv, said, capsys):
    from trainers.config_flags import parse_args

    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith("usage: python -m trainers.progpo [options]")
    assert err[1].startswith("error:") and err[1].endswith(said)


def test_a_run_logged_to_a_file_prints_one_line_per_iteration_and_no_bar_fragments(tmp_path):
    """stderr not a terminal (nohup, CI, > run.log): no carriage-return bar fragments, one line an iteration."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    log = tmp_path / "run.log"
    with open(log, "w") as fh:
        proc = subprocess.run(
            [
                sys.executable,
                *(
                    "-m trainers.progpo --env rooms --model tiny --iterations 3 --num-groups 1 --group-size 2 "
                    "--max-steps 3 --eval-episodes 2 --warm-start none --no-baseline-random --torch-threads 1 "
                    "--no-tensorboard --output-dir"
                ).split(),
                str(tmp_path / "run"),
            ],
            cwd=root,
            stdout=fh,
            stderr=subprocess.STDOUT,
            timeout=600,
        )
    text = log.read_text()
    assert proc.returncode == 0, text[-2000:]
    assert "\r" not in text
    lines = [ln for ln in text.splitlines() if ln.startswith("iteration ")]
    assert [ln.split(":")[0] for ln in lines] == ["iteration 1/3", "iteration 2/3", "iteration 3/3"]


def test_a_config_may_be_written_in_the_configs_own_sections(capsys) -> None:
    """``task:``, ``budget:``, ``outputs:`` ... hold their fields by name, beside the older
    ``advantage:`` / ``tree:`` / ``distill:`` / ``ppo:`` sections; a key in the wrong section says
    where it goes."""
    from trainers.config import ConfigError, TrainConfig
    from trainers.config_sections import SETTINGS

    data = {
        "task": {"env": "rooms", "max_steps": 4},
        "budget": {"iterations": 2, "num_groups": 2},
        "outputs": {"eval_every": 1},
        "advantage": {"estimator": "grpo"},
        "tree": {"branches": 2},
    }
    cfg = TrainConfig.from_dict(data)
    assert (cfg.env, cfg.task.max_steps, cfg.iterations, cfg.eval_every, cfg.estimator, cfg.tree_branches) == (
        "rooms", 4, 2, 1, "grpo", 2,
    )  # fmt: skip
    assert capsys.readouterr().err == ""
    with pytest.raises(ConfigError, match=r"budget: has no key 'lr'; lr goes under ppo: \{lr: \.\.\.\}"):
        TrainConfig.from_dict({"budget": {"lr": 0.1}})
    with pytest.raises(ConfigError, match="env is set twice"):
        TrainConfig.from_dict({"task": {"env": "rooms"}, "env": "alfworld"})
    assert {name for name, _ in SETTINGS} >= {"task", "policy", "warm", "collection", "teacher", "budget", "outputs"}


def test_a_config_is_its_sections_and_each_field_is_still_read_set_and_given_by_its_name() -> None:
    import copy
    import dataclasses
    import pickle

    from trainers.config import TrainConfig, config_fields
    from trainers.config_sections import SETTINGS, PPOSettings

    cfg = TrainConfig(estimator="grpo", lr=1e-4, max_steps=8)
    assert [f.name for f in dataclasses.fields(TrainConfig)] == ["plugins", *(name for name, _ in SETTINGS)]
    assert (cfg.ppo.lr, cfg.lr, cfg.advantage.estimator, cfg.task.max_steps) == (1e-4, 1e-4, "grpo", 8)
    moved = dataclasses.replace(cfg, lr=2e-4)
    assert (moved.lr, cfg.lr, moved.estimator) == (2e-4, 1e-4, "grpo")  # the copy's section is a new one
    assert dataclasses.replace(cfg, ppo=PPOSettings(lr=0.5), max_steps=3).ppo.lr == 0.5
    cfg.lr = 3e-4  # a field set by its name replaces its (frozen) section
    assert cfg.ppo.lr == 3e-4 and moved.ppo.lr == 2e-4
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.ppo.lr = 1.0  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(cfg)) == cfg == copy.deepcopy(cfg)
    assert list(cfg.to_dict()) == [f.name for f in config_fields()] and cfg.to_dict()["lr"] == 3e-4
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        TrainConfig(lrr=0.1)
    with pytest.raises(AttributeError):
        cfg.no_such_field
