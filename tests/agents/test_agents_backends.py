"""agents.backends: sampling config, the transformers backend, the vLLM guard, one interface."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from agents.backends import GenerationBackend, SamplingConfig, TransformersBackend, make_backend
from agents.logprobs import processed_log_softmax, sequence_logprobs
from agents.models import load_model

PROMPTS = ["You arrive at cabinet 1. The cabinet 1 is closed.", "hi", "Your task is to: put a clean mug in drawer 2."]


@pytest.fixture(scope="module")
def setup(tiny):
    model, tok = tiny
    return model, tok, TransformersBackend(model, tok), [tok(p)["input_ids"] for p in PROMPTS]


@pytest.mark.parametrize(
    "kw,msg",
    [
        (dict(temperature=-1), "temperature"),
        (dict(temperature=float("nan")), "temperature"),
        (dict(top_p=0.0), "top_p"),
        (dict(top_p=1.5), "top_p"),
        (dict(max_new_tokens=0), "max_new_tokens"),
        (dict(n=0), "n must"),
        (dict(stop=("",)), "stop strings"),
    ],
)
def test_sampling_config_validation(kw, msg):
    with pytest.raises(ValueError, match=msg):
        SamplingConfig(**kw)


def test_sampling_config_stop_string_normalized():
    assert SamplingConfig(stop="</action>").stop == ("</action>",)
    assert SamplingConfig(stop=None).stop == ()


def test_backend_satisfies_protocol(setup):
    assert isinstance(setup[2], GenerationBackend)


def test_generate_shapes_order_and_seeding(setup):
    model, tok, be, prompts = setup
    cfg = SamplingConfig(max_new_tokens=8, n=2, stop=())
    gens = be.generate(prompts, cfg, seed=3)
    assert len(gens) == 6
    assert [g.prompt_ids for g in gens] == [p for p in prompts for _ in range(2)]  # prompt-major
    for g in gens:
        assert len(g.response_ids) == len(g.logprobs) == 8 and g.finish_reason == "length"
        assert all(lp <= 0 for lp in g.logprobs)
        assert g.text == tok.decode(g.response_ids, skip_special_tokens=True)
    again = be.generate(prompts, cfg, seed=3)
    assert [g.response_ids for g in gens] == [g.response_ids for g in again]
    other = be.generate(prompts, cfg, seed=4)
    assert [g.response_ids for g in gens] != [g.response_ids for g in other]


def test_left_padding_does_not_change_samples(setup):
    """A prompt decoded alone or next to a longer one gets the same greedy answer."""
    _, _, be, prompts = setup
    cfg = SamplingConfig(temperature=0, max_new_tokens=6, stop=())
    alone = be.generate([prompts[1]], cfg)[0]
    batched = be.generate(prompts, cfg)[1]
    assert alone.response_ids == batched.response_ids
    assert max(abs(a - b) for a, b in zip(alone.logprobs, batched.logprobs)) < 1e-4


def test_stop_string_ends_the_response(setup):
    _, tok, be, prompts = setup
    cfg = SamplingConfig(temperature=0, max_new_tokens=12, stop=())
    full = be.generate([prompts[0]], cfg)[0]
    stop = tok.decode(full.response_ids[4:6])
    assert stop.strip(), "need a non-blank stop string"
    cut = be.generate([prompts[0]], cfg.with_(stop=(stop,)))[0]
    assert cut.finish_reason == "stop" and stop in cut.text
    assert len(cut.response_ids) <= 6 and cut.response_ids == full.response_ids[: len(cut.response_ids)]


def test_eos_ends_the_response(setup):
    model, tok, _, prompts = setup
    cfg = SamplingConfig(temperature=0, max_new_tokens=5, stop=())
    be = TransformersBackend(model, tok)
    first = be.generate([prompts[0]], cfg)[0].response_ids[0]
    be.eos_ids = {first}
    g = be.generate([prompts[0]], cfg)[0]
    assert g.response_ids == [first] and g.finish_reason == "stop"


def _gap_to_recomputed(model, gens, pad_token_id, temperature, top_p, **kw) -> float:
    """The largest gap between the engine's log-probs and the trainer's fresh forward over them."""
    prompts, responses = [g.prompt_ids for g in gens], [g.response_ids for g in gens]
    with torch.no_grad():
        lps, _ = sequence_logprobs(
            model, prompts, responses, pad_token_id=pad_token_id, temperature=temperature, top_p=top_p, **kw
        )
    return max((lp.cpu() - torch.tensor(g.logprobs)).abs().max().item() for lp, g in zip(lps, gens))


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 1.0), (1.3, 0.9), (0.0, 1.0)])
def test_fresh_forward_reproduces_sampling_logprobs(setup, temperature, top_p):
    model, tok, be, prompts = setup
    cfg = SamplingConfig(temperature=temperature, top_p=top_p, max_new_tokens=16, n=2, stop=())
    gens = be.generate(prompts, cfg, seed=0)
    diff = _gap_to_recomputed(
        model, gens, be.pad_token_id, temperature, 1.0 if temperature == 0 else top_p, batch_size=4
    )
    assert diff < 1e-4


def test_top_p_restricts_samples_to_the_nucleus():
    logits = torch.tensor([[3.0, 2.0, 0.0, -1.0]])
    lp = processed_log_softmax(logits, 1.0, 0.8)
    p = torch.softmax(logits, -1)[0]
    assert p[0] < 0.8 <= p[0] + p[1]
    assert torch.isfinite(lp[0, :2]).all() and torch.isinf(lp[0, 2:]).all()
    assert torch.allclose(lp.exp().sum(), torch.tensor(1.0))
    forced = processed_log_softmax(logits, 1.0, 0.8, keep=torch.tensor([3]))
    assert torch.isfinite(forced[0, 3])


def test_sync_weights_copies_a_different_model(tiny):
    from agents.models import make_tiny_model

    model, tok = make_tiny_model(seed=5)
    other, _ = make_tiny_model(seed=6)
    be = TransformersBackend(model, tok)
    be.sync_weights(other)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), other.state_dict().values()))


def test_generate_restores_train_mode_and_rejects_empty_prompt(setup):
    model, tok, be, prompts = setup
    model.train()
    try:
        be.generate([prompts[1]], SamplingConfig(max_new_tokens=2), seed=0)
        assert model.training
    finally:
        model.eval()
    with pytest.raises(ValueError, match="empty"):
        be.generate([[]], SamplingConfig(max_new_tokens=2))


def test_make_backend_names(tiny):
    model, tok = tiny
    assert isinstance(make_backend("hf", model, tok, max_batch_size=4), TransformersBackend)
    with pytest.raises(ValueError, match="unknown backend"):
        make_backend("tgi", model, tok)


def test_vllm_config_validation():
    from agents.backends.vllm_backend import VLLMConfig

    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        VLLMConfig(model="tiny", gpu_memory_utilization=1.5)
    with pytest.raises(ValueError, match="dtype"):
        VLLMConfig(model="tiny", dtype="int8")
    with pytest.raises(ValueError, match="processed_logprobs"):
        VLLMConfig(model="tiny", llm_kwargs={"logprobs_mode": "raw_logprobs"})
    with pytest.raises(ValueError, match="device"):
        VLLMConfig(model="tiny", device="tpu")
    assert VLLMConfig(model="tiny").enable_sleep_mode and VLLMConfig(model="tiny").in_process


def test_vllm_never_substitutes_a_model(tiny):
    """Defect 2: an empty checkpoint name used to become SmolLM2; now it is an error, before vLLM loads."""
    from agents.backends.vllm_backend import VLLMBackend, VLLMConfig

    with pytest.raises(ValueError, match="model is empty"):
        VLLMConfig()
    with pytest.raises(ValueError, match="model is empty"):
        VLLMBackend("")
    model, tok = tiny
    saved = model.config.name_or_path
    try:
        model.config.name_or_path = ""
        with pytest.raises(ValueError, match="no name_or_path"):
            make_backend("vllm", model, tok)
    finally:
        model.config.name_or_path = saved


def test_vllm_refuses_a_checkpoint_of_another_architecture(tiny, tmp_path, monkeypatch):
    """The engine's checkpoint is compared with the trained model before vLLM is even imported."""
    from agents.backends.vllm_backend import ModelMismatchError, compare_architectures

    monkeypatch.setenv("PROGPO_CACHE_DIR", str(tmp_path))
    model, tok = tiny
    with pytest.raises(ModelMismatchError, match="hidden_size: engine 128 != model 64"):
        make_backend("vllm", model, tok, model_path="tiny-128x2")
    assert compare_architectures(model.config, model.config.to_dict()) == []
    other, _ = load_model("tiny-llama")
    assert "model_type: engine 'llama' != model 'qwen2'" in compare_architectures(other.config, model.config)


def test_logprob_mismatch_metric():
    from agents.logprobs import logprob_mismatch

    m = logprob_mismatch([[-1.0, -2.0], [-0.5], []], [torch.tensor([-1.1, -2.0]), torch.tensor([-0.2]), torch.zeros(0)])
    assert m["logprob_mismatch_tokens"] == 3
    assert m["logprob_mismatch_max"] == pytest.approx(0.3) and m["logprob_mismatch_mean"] == pytest.approx(0.4 / 3)
    assert logprob_mismatch([], []) == {
        "logprob_mismatch_max": 0.0,
        "logprob_mismatch_mean": 0.0,
        "logprob_mismatch_tokens": 0.0,
    }
    assert logprob_mismatch([[-1.0]], [[float("-inf")]])["logprob_mismatch_max"] == float("inf")
    with pytest.raises(ValueError, match="step 0"):
        logprob_mismatch([[-1.0, -2.0]], [[-1.0]])
    with pytest.raises(ValueError, match="sequences"):
        logprob_mismatch([[-1.0]], [])


def test_backends_accept_any_integer_seed(setup):
    from agents.backends.vllm_backend import _fold_seed

    model, tok, be, prompts = setup
    big = 2**64 + 12345  # torch.Generator.manual_seed alone rejects >= 2**64
    a = be.generate(prompts[:1], SamplingConfig(max_new_tokens=3), seed=big)
    b = be.generate(prompts[:1], SamplingConfig(max_new_tokens=3), seed=big)
    assert a[0].response_ids == b[0].response_ids
    assert 0 <= _fold_seed(big) < 2**63 and _fold_seed(5) == 5


def test_vllm_cpu_head_size_is_checked_with_a_clear_message(tmp_path):
    from agents.backends.vllm_backend import _check_cpu_head_size

    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 64, "num_attention_heads": 4}))
    with pytest.raises(ValueError, match="head size 16.*tiny-128x2"):
        _check_cpu_head_size(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 128, "num_attention_heads": 4}))
    _check_cpu_head_size(tmp_path)


def test_vllm_sampling_params_mapping():
    from agents.backends.vllm_backend import VLLMBackend

    class FakeVLLM:
        @staticmethod
        def SamplingParams(**kw):  # mimics vllm.SamplingParams
            return kw

    p = VLLMBackend.sampling_params(FakeVLLM, SamplingConfig(temperature=0.7, top_p=0.9, max_new_tokens=5, n=3), 7)
    assert p == dict(
        n=3,
        temperature=0.7,
        top_p=0.9,
        max_tokens=5,
        min_tokens=0,
        stop=["</action>"],
        include_stop_str_in_output=True,
        logprobs=0,
        seed=7,
    )


def test_min_new_tokens_gives_fixed_length_answers(tiny):
    """EOS and stop strings end an answer only from min_new_tokens on: min = max fixes the length."""
    model, tok = tiny
    backend = TransformersBackend(model, tok)
    prompt = [tok("Observation: a room.")["input_ids"]] * 6
    free = backend.generate(prompt, SamplingConfig(max_new_tokens=24, stop=("a",), temperature=1.0), seed=3)
    assert any(len(g.response_ids) < 24 for g in free)  # the stop string "a" ends some early
    fixed = backend.generate(prompt, SamplingConfig(max_new_tokens=24, min_new_tokens=24, stop=("a",)), seed=3)
    assert [len(g.response_ids) for g in fixed] == [24] * 6 and {g.finish_reason for g in fixed} == {"length"}
    with pytest.raises(ValueError, match="min_new_tokens"):
        SamplingConfig(max_new_tokens=4, min_new_tokens=5)


def test_vllm_weights_include_tied_lm_head(tiny):
    from agents.backends.vllm_backend import VLLMBackend

    model, _ = tiny
    names = [n for n, _ in VLLMBackend.weights_of(model)]
    assert "lm_head.weight" in names and "lm_head.weight" not in dict(model.named_parameters())


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_vllm_missing_gives_install_hint(tiny):
    from agents.backends.vllm_backend import VLLMBackend

    with pytest.raises(ImportError, match=r"progpo\[vllm\].*torch==2.14.0"):
        VLLMBackend("tiny")
    with pytest.raises(ValueError, match="gpu_memory_utilization"):  # config checked before import
        VLLMBackend("tiny", gpu_memory_utilization=0)
    with pytest.raises(ImportError, match="vLLM"):
        make_backend("vllm", *tiny)


@pytest.mark.gpu
@pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None or not torch.cuda.is_available(),
    reason="needs vLLM (extra [vllm]) and a GPU",
)
def test_vllm_logprobs_match_transformers_after_sync():
    from agents.backends.vllm_backend import VLLMBackend
    from agents.models import load_model

    model, tok = load_model("smollm2", device="cuda")
    be = VLLMBackend("smollm2", tokenizer=tok, dtype="float32", gpu_memory_utilization=0.3)
    be.sync_weights(model)
    prompts = [tok(p)["input_ids"] for p in PROMPTS]
    cfg = SamplingConfig(temperature=0.8, top_p=0.95, max_new_tokens=24, n=2)
    gens = be.generate(prompts, cfg, seed=0)
    diff = _gap_to_recomputed(model, gens, tok.pad_token_id, 0.8, 0.95)
    assert diff < 1e-3
    be.sleep()
    be.wake_up()
    assert len(be.generate(prompts[:1], cfg, seed=1)) == 2


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_prefix_shared_candidate_scoring_matches_full_sequences(arch):
    from agents.logprobs import candidate_logprobs
    from agents.models import make_tiny_model

    model, tok = make_tiny_model(arch=arch, seed=2)
    prompt = tok("You arrive at cabinet 1. Your task is to: find a mug.")["input_ids"]
    cands = [
        tok(c)["input_ids"]
        for c in [
            "<action>go to desk 1</action>",
            "<action>look</action>",
            "x",
            "<action>take mug 1 from cabinet 1</action>",
        ]
    ]
    with torch.no_grad():
        ref, _ = sequence_logprobs(model, [prompt] * 4, cands, pad_token_id=tok.pad_token_id, temperature=0.7)
        fast = candidate_logprobs(model, prompt, cands, pad_token_id=tok.pad_token_id, temperature=0.7, batch_size=3)
    assert [len(f) for f in fast] == [len(c) for c in cands]
    assert max((a - b).abs().max().item() for a, b in zip(ref, fast)) < 1e-5
    grad = candidate_logprobs(model, prompt, cands, pad_token_id=tok.pad_token_id)
    torch.stack([g.sum() for g in grad]).logsumexp(0).backward()
    assert model.get_input_embeddings().weight.grad.abs().sum() > 0
    assert candidate_logprobs(model, prompt, [], pad_token_id=0) == []


def test_duplicate_prompts_share_prefill_and_match_single_decoding(setup):
    model, tok, be, prompts = setup
    cfg = SamplingConfig(temperature=0, max_new_tokens=6, stop=())
    batch = [prompts[0], prompts[2], prompts[0], prompts[0]]
    gens = be.generate(batch, cfg)
    alone = be.generate([prompts[0]], cfg)[0]
    for g in (gens[0], gens[2], gens[3]):
        assert g.response_ids == alone.response_ids
        assert max(abs(a - b) for a, b in zip(g.logprobs, alone.logprobs)) < 1e-4
    assert gens[1].response_ids == be.generate([prompts[2]], cfg)[0].response_ids
    sampled = be.generate([prompts[0]] * 4, SamplingConfig(max_new_tokens=8, stop=()), seed=0)
    assert len({tuple(g.response_ids) for g in sampled}) > 1  # shared prefill, independent samples
