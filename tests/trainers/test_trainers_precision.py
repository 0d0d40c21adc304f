"""Bf16 keeps fp32 master weights (a 1e-6 step survives), lr sanity warnings, log-prob mismatch."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_config import config_for_tests

from trainers.config import TrainConfig, lr_warning
from trainers.loop.trainer import Trainer
from trainers.loop.updater import rollout_mismatch

ROOT = Path(__file__).resolve().parents[2]


def _probe_logits(model: torch.nn.Module) -> torch.Tensor:
    ids = torch.arange(3, 40).reshape(1, -1)
    with torch.no_grad(), torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        return model(input_ids=ids).logits.float()


def test_bf16_update_of_1e6_changes_weights_and_outputs(tmp_path):
    cfg = config_for_tests(output_dir=str(tmp_path), lr=1e-6, iterations=1, skip_zero_advantage=False)
    trainer = Trainer(cfg)
    trainer.updater.amp_dtype = torch.bfloat16  # what a GPU run with bf16 gets; here on CPU
    model = trainer.model
    assert all(p.dtype == torch.float32 for p in model.parameters())  # master weights stay fp32
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    logits = _probe_logits(model)
    rollout = trainer.rollout(1)
    adv = np.where(np.arange(len(rollout.steps)) % 2 == 0, 1.0, -1.0)  # a non-zero signal on every step
    with trainer.autocast():
        stats = trainer.update(rollout.steps, adv, 1)
    assert stats["update/optimizer_steps"] >= 1
    changed = sum(int((model.state_dict()[k] != v).sum()) for k, v in before.items())
    assert changed > 0.2 * sum(
        v.numel() for v in before.values()
    )  # the 1e-6 step landed (unused token rows get no grad)
    assert not torch.equal(_probe_logits(model), logits)  # and it shows in the bf16-computed outputs
    assert all(
        p.dtype == torch.float32
        for p in trainer.optimizer.state[next(iter(trainer.params))].values()
        if torch.is_tensor(p) and p.dim() > 0
    )
    trainer.close()
    # the defect this replaces: AdamW on bf16 weights rounds the same step away
    w = torch.nn.Parameter(torch.full((1000,), 0.02, dtype=torch.bfloat16))
    opt = torch.optim.AdamW([w], lr=1e-6, weight_decay=0.0)
    w.grad = torch.ones_like(w)
    opt.step()
    assert torch.all(w == torch.tensor(0.02, dtype=torch.bfloat16))


def test_lr_warnings_and_configs():
    assert "LoRA" in lr_warning(TrainConfig(model="Qwen/Qwen2.5-1.5B-Instruct", lora=True, lr=1e-6, warm_start="none"))
    assert "full fine-tune" in lr_warning(TrainConfig(model="smollm2", lora=False, lr=1e-3, warm_start="none"))
    assert lr_warning(TrainConfig()) is None  # the tiny CPU demo
    from trainers.config import load_yaml

    paper = TrainConfig.from_dict(load_yaml(ROOT / "configs/alfworld_gpu_paper.yaml"))
    assert (
        paper.lora,
        paper.lr,
        paper.kl_coef,
        paper.num_groups,
        paper.group_size,
        paper.max_steps,
        paper.answer_format,
    ) == (False, 1e-6, 0.01, 16, 8, 50, "think_action")
    assert lr_warning(paper) is None
    webshop = TrainConfig.from_dict(load_yaml(ROOT / "configs/webshop_gpu_lora.yaml"))
    assert webshop.lora and lr_warning(webshop) is None


def test_trainer_warns_on_implausible_lr(tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    from fake_policy import FakeScoringPolicy

    cfg = dataclasses.replace(config_for_tests(output_dir=str(tmp_path)), model="some/model", lora=False, lr=1e-3)
    with pytest.warns(UserWarning, match="full fine-tune"):
        Trainer(cfg, policy=FakeScoringPolicy()).close()


def test_rollout_mismatch_metric_names():
    m = rollout_mismatch(
        [torch.tensor([-1.0, -2.0]), torch.tensor([-0.5])], [torch.tensor([-1.0, -2.5]), torch.tensor([-0.25])]
    )
    assert m["rollout/logprob_mismatch_max"] == pytest.approx(0.5)
    assert m["rollout/logprob_mismatch_mean"] == pytest.approx(0.25)
