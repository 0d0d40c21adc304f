"""Trainer: losses, rollout records, config / CLI errors, checkpoints and bit-for-bit resume."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from fake_policy import FakeScoringPolicy
from tiny_config import config_for_tests

from trainers.cli.train import main
from trainers.config import ConfigError, TrainConfig
from trainers.config_flags import build_parser, parse_args
from trainers.envs import make_env_fn
from trainers.loop.losses import low_var_kl, ppo_clip_loss
from trainers.loop.trainer import Trainer
from trainers.rollouts.rollout import collect_rollout
from trainers.runs.checkpoint import CheckpointError, load_checkpoint
from trainers.runs.metrics import TIMING_KEYS, read_metrics


# ----------------------------------------------------------------------------- losses
def test_ppo_clip_hand_computed():
    old = torch.log(torch.tensor([0.5, 0.5, 0.5]))
    new = torch.log(torch.tensor([0.75, 0.55, 0.25]))  # ratios 1.5, 1.1, 0.5
    adv = torch.tensor([1.0, 1.0, -1.0])
    out = ppo_clip_loss(new, old, adv, clip_eps=0.2)
    # per token: -min(1.5, 1.2) = -1.2; -min(1.1, 1.1) = -1.1; -min(-0.5, -0.8) = 0.8
    assert float(out.pg_loss) == pytest.approx((-1.2 - 1.1 + 0.8) / 3, rel=1e-6)
    assert float(out.clip_fraction) == pytest.approx(2 / 3)
    new.requires_grad_(True)
    out = ppo_clip_loss(new, old, adv, clip_eps=0.2, weight=0.5)
    out.loss.backward()
    # clipped tokens get no gradient; token 1: d/dlogp (-ratio * A) / 3 * weight = -1.1 / 3 * 0.5
    np.testing.assert_allclose(new.grad.numpy(), [0.0, -1.1 / 6, 0.0], rtol=1e-5)


def test_low_var_kl_and_kl_term():
    lp, ref = torch.tensor([-1.0, -2.0]), torch.tensor([-1.5, -1.0])
    r = ref - lp
    np.testing.assert_allclose(low_var_kl(lp, ref).numpy(), (torch.exp(r) - r - 1).numpy(), rtol=1e-6)
    base = ppo_clip_loss(lp, lp, torch.zeros(2))
    with_kl = ppo_clip_loss(lp, lp, torch.zeros(2), ref_logprobs=ref, kl_coef=0.5)
    assert float(with_kl.loss) == pytest.approx(float(base.loss) + 0.5 * float(low_var_kl(lp, ref).mean()))
    with pytest.raises(ValueError, match="shape"):
        ppo_clip_loss(lp, lp, torch.zeros(3))


# ----------------------------------------------------------------------------- rollout
def test_rollout_records_one_episode_per_member():
    from wrappers import GroupVectorEnv

    envs = GroupVectorEnv(make_env_fn("rooms", "train", max_steps=5), num_groups=3, group_size=2, seed=0)
    try:
        rollout = collect_rollout(envs, FakeScoringPolicy(), task_seeds=[4, 5, 6], seed=1)
    finally:
        envs.close()
    assert len(rollout.trajectories) == 6
    for i, tr in enumerate(rollout.trajectories):
        steps = [s for s in rollout.steps if s.traj == i]
        assert [s.t for s in steps] == list(range(tr.length)) and 1 <= tr.length <= 5
        assert tr.outcome == (1.0 if tr.won else 0.0)
        assert steps[-1].reward == tr.outcome
        for a, b in zip(steps, steps[1:]):
            assert a.next_state == b.state  # o_{t+1} of step t is o_t of step t+1
    # members of a group share the task
    assert rollout.trajectories[0].task_id == rollout.trajectories[1].task_id
    arrays = rollout.advantage_inputs()
    assert arrays["step_traj"].size == len(rollout.steps) and arrays["outcomes"].size == 6


def _update_after(steps, adv, **cfg_over):
    """Parameters of a fresh fake policy (seed 0) after one ``Trainer.update`` on ``steps``."""
    cfg = config_for_tests(num_minibatches=1, ppo_epochs=1, lr=1e-2, skip_zero_advantage=False, **cfg_over)
    policy = FakeScoringPolicy(seed=0)
    stats = Trainer(cfg, policy=policy).update(steps, np.asarray(adv, dtype=np.float64), iteration=1)
    return torch.cat([p.detach().reshape(-1) for p in policy.model.parameters()]), stats


def test_traj_mean_loss_weighs_each_trajectory_the_same_whatever_its_length():
    from dataclasses import replace

    from wrappers import GroupVectorEnv

    envs = GroupVectorEnv(make_env_fn("rooms", "train", max_steps=5), num_groups=2, group_size=2, seed=0)
    try:
        rollout = collect_rollout(envs, FakeScoringPolicy(seed=0), task_seeds=[4, 5], seed=1)
    finally:
        envs.close()
    adv = np.random.default_rng(0).standard_normal(len(rollout.steps))
    # trajectory 0 played twice as long: every one of its steps repeated (same advantage)
    longer = list(rollout.steps) + [replace(s) for s in rollout.steps if s.traj == 0]
    adv_longer = np.concatenate([adv, adv[[i for i, s in enumerate(rollout.steps) if s.traj == 0]]])
    base, _ = _update_after(rollout.steps, adv, loss_agg="traj-mean")
    same, _ = _update_after(longer, adv_longer, loss_agg="traj-mean")
    assert torch.allclose(base, same, atol=1e-6)  # its weight did not double
    tok_base, _ = _update_after(rollout.steps, adv, loss_agg="token-mean")
    tok_longer, _ = _update_after(longer, adv_longer, loss_agg="token-mean")
    assert not torch.allclose(tok_base, tok_longer, atol=1e-4)  # under the token mean it did


def test_lr_warmup_scales_the_first_iterations():
    from trainers.loop.updater import warmup_factor

    cfg = config_for_tests(lr=1e-3, lr_warmup_iterations=3)
    trainer = Trainer(cfg, policy=FakeScoringPolicy(seed=0))
    rollout = trainer.rollout(1)
    adv = np.ones(len(rollout.steps))
    lrs = [trainer.update(rollout.steps, adv, iteration=i)["update/lr"] for i in (1, 2, 3, 4, 9)]
    np.testing.assert_allclose(lrs, [2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3])
    assert [warmup_factor(i, 0) for i in (1, 5)] == [1.0, 1.0]
    trainer.close()
    with pytest.raises(ConfigError, match="loss_agg"):
        TrainConfig(loss_agg="sum")


def test_a_frozen_kl_reference_copy_exists_only_where_the_kl_term_needs_one(tmp_path):
    """A full fine-tune with a KL term keeps a frozen copy of the initial weights; without the term,
    or under LoRA (whose reference is the model with its adapter off), no second model is held."""
    full = Trainer(config_for_tests(output_dir=str(tmp_path / "full"), kl_coef=0.1)).updater
    ref = full.ref_model
    assert ref is not None and not ref.training and not any(p.requires_grad for p in ref.parameters())
    assert all(torch.equal(a, b) for a, b in zip(ref.state_dict().values(), full.model.state_dict().values()))
    assert Trainer(config_for_tests(output_dir=str(tmp_path / "nokl"), kl_coef=0.0)).updater.ref_model is None
    lora = config_for_tests(output_dir=str(tmp_path / "lora"), kl_coef=0.1, lora=True)
    assert Trainer(lora).updater.ref_model is None


def test_eval_streams_is_refused_where_the_policy_does_not_act_with_the_model():
    with pytest.raises(ConfigError, match="eval_streams 2: .*score mode"):
        TrainConfig(policy_mode="generate", eval_streams=2)
    with pytest.raises(ConfigError, match="eval_streams must be an integer >= 1"):
        TrainConfig(eval_streams=0)
    assert TrainConfig(eval_streams=2).eval_streams == 2


# ----------------------------------------------------------------------------- config / CLI
@pytest.mark.parametrize(
    "kwargs, said",
    [
        ({"env": "webshop", "warm_start": "bc", "bc_episodes": 0}, "warm_start bc on WebShop needs bc_episodes >= 1"),
        (
            {"dist_strategy": "fsdp2", "decode": "static", "policy_mode": "generate", "warm_start": "none"},
            "dist_strategy fsdp2 samples with the loop over the sharded weights",
        ),
        (
            {"dist_strategy": "fsdp2", "rollout_dtype": "bf16", "policy_mode": "generate", "warm_start": "none"},
            "dist_strategy fsdp2 samples with the loop over the sharded weights",
        ),
        ({"backend": "vllm"}, "backend vllm samples free-text answers: use it with --policy-mode generate"),
    ],
)
def test_engine_and_warm_start_combinations_that_cannot_run_are_refused(kwargs, said):
    from trainers.config import ConfigError, TrainConfig

    with pytest.raises(ConfigError, match=said):
        TrainConfig(**kwargs)
    fixed = (
        {"bc_episodes": 300}
        if "bc_episodes" in kwargs
        else {"decode": "auto", "rollout_dtype": "auto"}
        if ("dist_strategy" in kwargs)
        else {"policy_mode": "generate", "warm_start": "none"}
    )
    TrainConfig(**{**kwargs, **fixed})  # the combination the message points to is taken


def test_every_config_field_has_a_flag():
    flags = {a.dest for a in build_parser()._actions}
    assert {f for f in TrainConfig().to_dict() if f != "notes"} <= flags


def test_yaml_then_cli_precedence(tmp_path):
    p = tmp_path / "run.yaml"
    p.write_text("lora: true\nadvantage: {estimator: grpo}\nppo: {lr: 0.001}\n")
    cfg, _ = parse_args(["--config", str(p), "--lr", "0.5", "--no-lora"])
    assert (cfg.estimator, cfg.lr, cfg.lora) == ("grpo", 0.5, False)


@pytest.mark.parametrize(
    "text, match",
    [
        ("estimator: [unclosed", "not valid YAML"),
        ("- a\n- b\n", "mapping"),
        ("bogus_field: 1\n", "unknown field"),
        ("ppo: {lr: fast}\n", "lr must be a number"),
        ("group_size: 0\n", "group_size must be an integer >= 1"),
        ("group_size: 1\nadvantage: {estimator: grpo}\n", "group_size 1: grpo compares each trajectory"),
        ("seed: 100000000000000000000000\n", "seed must be an integer in 0..4294967295"),
    ],
)
def test_bad_config_is_one_line_error(tmp_path, capsys, text, match):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    assert main(["--config", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and match in err and "\n" not in err


@pytest.mark.parametrize(
    "text, value", [("lr: 1e-6\n", 1e-6), ("lr: 3E+2\n", 300.0), ("lr: 1.0e-6\n", 1e-6), ("lr: .5e-3\n", 5e-4)]
)
def test_yaml11_exponent_floats_are_numbers(tmp_path, text, value):
    p = tmp_path / "run.yaml"
    p.write_text(text)
    assert parse_args(["--config", str(p)])[0].lr == value


def test_config_that_is_not_a_regular_file_is_refused_unread(tmp_path, capsys):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # opening it for reading would block until a writer comes: forever
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * 2**20 + "\n")
    for path, match in ((fifo, "not a regular file"), ("/dev/zero", "not a regular file"), (big, "over 1 MiB")):
        assert main(["--config", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error:") and match in err and "\n" not in err


def test_missing_config_and_binary_config(tmp_path, capsys):
    assert main(["--config", str(tmp_path / "nope.yaml")]) == 2
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00garbage")
    assert main(["--config", str(tmp_path / "bin.yaml")]) == 2
    errs = capsys.readouterr().err.strip().splitlines()
    assert len(errs) == 2 and all(e.startswith("error:") for e in errs)


# ----------------------------------------------------------------------------- training + resume
def _train(tmp: Path, iterations: int, resume: str | None = None, **kw) -> Trainer:
    flags = "--group-size 3 --max-steps 5 --lr 0.05 --estimator progpo-gigpo --eval-every 2"
    cfg = config_for_tests(flags, output_dir=str(tmp), iterations=iterations, **kw)
    tr = Trainer(cfg, policy=FakeScoringPolicy(seed=0, invalid_every=5))
    tr.train(resume=resume)
    return tr


def _comparable(path: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in read_metrics(path)]


def test_resume_is_bit_for_bit(tmp_path):
    straight = _train(tmp_path / "a", 4)
    _train(tmp_path / "b", 2)
    resumed = _train(tmp_path / "b", 4, resume="latest")
    a, b = _comparable(tmp_path / "a" / "metrics.jsonl"), _comparable(tmp_path / "b" / "metrics.jsonl")
    assert [r["iteration"] for r in a] == [
        0,
        1,
        2,
        2,
        3,
        4,
        4,
    ]  # eval at 0 (before RL), train records, evals at 2 and 4
    assert a == b
    for (n1, p1), (n2, p2) in zip(straight.model.state_dict().items(), resumed.model.state_dict().items()):
        assert n1 == n2 and torch.equal(p1, p2)
    # the update did something and the report exists
    assert any(r.get("update/optimizer_steps", 0) > 0 for r in a)
    summary = (tmp_path / "b" / "summary.md").read_text()
    assert "| 4 |" in summary and (tmp_path / "b" / "curves.png").stat().st_size > 1000


def test_corrupt_checkpoint_and_config_mismatch(tmp_path, capsys):
    _train(tmp_path, 1)
    ckpt = tmp_path / "checkpoints" / "iter_000001.pt"
    data = load_checkpoint(ckpt)
    assert data["iteration"] == 1 and set(data) >= {"model", "optimizer", "rng", "env_schedule", "config"}
    with pytest.raises(CheckpointError, match="different config"):
        _train(tmp_path, 2, resume="latest", gamma=0.5)
    ckpt.write_bytes(ckpt.read_bytes()[:100])  # truncated
    with pytest.raises(CheckpointError, match="corrupt"):
        _train(tmp_path, 2, resume="latest")
    # through the CLI: one line, exit 2, checked before any model is loaded
    for target in (str(tmp_path / "missing.pt"), None):
        extra = ["--resume", target] if target else ["--resume"]
        assert (
            main(
                [
                    *"--env rooms --model tiny --output-dir".split(),
                    str(tmp_path / "none"),
                    *extra,
                    "--no-progress-bars",
                    "--no-tensorboard",
                ]
            )
            == 2
        )
        err = capsys.readouterr().err.strip()
        assert err.startswith("error:") and "\n" not in err and ("does not exist" in err or "no checkpoint" in err)


def test_a_runs_config_yaml_is_in_sections_and_reads_back_as_the_same_config(tmp_path, capsys):
    """The config.yaml a run writes is a valid --config: in sections, read back silently, equal."""
    import yaml

    cfg = config_for_tests(
        output_dir=str(tmp_path / "run"), iterations=1, estimator="progpo-grpo", gamma=0.9, eval_episodes=0
    )
    tr = Trainer(cfg, policy=FakeScoringPolicy(seed=0))
    tr.train()
    written = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert written["advantage"]["estimator"] == "progpo-grpo" and "estimator" not in written
    assert written["tree"]["branches"] == cfg.tree_branches and written["distill"]["mode"] == "none"
    capsys.readouterr()
    again, _ = parse_args(["--config", str(tmp_path / "run" / "config.yaml")])
    assert again == cfg and capsys.readouterr().err == ""
