"""agents.backends.static: the static-cache engine draws what the loop engine draws, in buckets;
the bf16 rollout copy follows the trained weights; the trainer picks the engine."""

from __future__ import annotations

import pytest
import torch

from agents.backends import SamplingConfig, StaticCacheBackend, TransformersBackend, make_backend
from agents.backends import static as static_module
from agents.backends.static import batch_bucket, length_bucket_of

PROMPTS = [
    "You arrive at cabinet 1. The cabinet 1 is closed.",
    "hi",
    "Your task is to: put a clean mug in drawer 2.",
    "go to the kitchen",
    "open drawer 1",
]


@pytest.fixture(scope="module")
def setup(tiny):
    model, tok = tiny
    return model, tok, [tok(p)["input_ids"] for p in PROMPTS]


def _same(a, b, tol=1e-5):
    assert [g.response_ids for g in a] == [g.response_ids for g in b]
    assert [g.finish_reason for g in a] == [g.finish_reason for g in b]
    assert [g.text for g in a] == [g.text for g in b]
    assert max((abs(x - y) for g, h in zip(a, b) for x, y in zip(g.logprobs, h.logprobs)), default=0.0) <= tol


@pytest.mark.parametrize(
    "cfg",
    [
        SamplingConfig(temperature=0, max_new_tokens=12, stop=()),
        SamplingConfig(temperature=1.0, max_new_tokens=12, n=2, stop=()),  # 10 rows: batches of 8 and 2
        SamplingConfig(temperature=0.8, top_p=0.9, max_new_tokens=12, stop=()),
    ],
    ids=["greedy", "n2", "top-p"],
)
@pytest.mark.parametrize("sync_every", [1, 5, 64])
def test_static_engine_draws_the_loop_engines_samples(setup, cfg, sync_every):
    model, tok, prompts = setup
    loop = TransformersBackend(model, tok, max_batch_size=8).generate(prompts, cfg, seed=7)
    static = StaticCacheBackend(
        model, tok, max_batch_size=8, compile=False, sync_every=sync_every, length_bucket=16
    ).generate(prompts, cfg, seed=7)
    _same(loop, static)


@pytest.mark.parametrize("sync_every", [1, 4, 64])
def test_a_stop_string_found_late_ends_the_answer_where_it_appeared(setup, sync_every):
    model, tok, prompts = setup
    cfg = SamplingConfig(temperature=0, max_new_tokens=16, stop=())
    full = TransformersBackend(model, tok).generate(prompts, cfg)
    stop = tok.decode(full[0].response_ids[5:7])
    assert stop.strip(), "need a non-blank stop string"
    stopped = cfg.with_(stop=(stop,), min_new_tokens=2)
    loop = TransformersBackend(model, tok).generate(prompts, stopped)
    static = StaticCacheBackend(model, tok, compile=False, sync_every=sync_every).generate(prompts, stopped)
    _same(loop, static)
    assert static[0].finish_reason == "stop" and len(static[0].response_ids) <= 7 and stop in static[0].text


def test_eos_ends_the_answer_and_min_new_tokens_holds_it_off(setup):
    model, tok, prompts = setup
    cfg = SamplingConfig(temperature=0, max_new_tokens=8, stop=())
    first = TransformersBackend(model, tok).generate(prompts[:1], cfg)[0].response_ids
    eos = {first[0], first[3]}
    for least in (0, 3):
        loop, static = TransformersBackend(model, tok), StaticCacheBackend(model, tok, compile=False, sync_every=64)
        loop.eos_ids = static.eos_ids = eos
        a, b = (
            loop.generate(prompts, cfg.with_(min_new_tokens=least)),
            static.generate(prompts, cfg.with_(min_new_tokens=least)),
        )
        _same(a, b)
        expected = next(j for j in range(max(least, 1) - 1, 8) if first[j] in eos) + 1
        assert b[0].finish_reason == "stop" and len(b[0].response_ids) == expected >= least


def test_buckets_and_the_cache_reused(setup):
    model, tok, prompts = setup
    assert [batch_bucket(b, 32) for b in (1, 2, 3, 5, 17, 32)] == [1, 2, 4, 8, 32, 32]
    assert length_bucket_of(257, 256) == 512
    with pytest.raises(ValueError, match="outside"):
        batch_bucket(33, 32)
    be = StaticCacheBackend(model, tok, compile=False, length_bucket=64)
    cfg = SamplingConfig(temperature=0, max_new_tokens=4, stop=())
    first = be.generate(prompts[:3], cfg)
    assert set(be._caches) == {(4, 64)}
    again = be.generate(prompts[:3], cfg)  # the bucket's cache is zeroed and reused, not stale
    _same(first, again, tol=0.0)
    assert be.stats["compiles"] == 0 and be.stats["decode_steps"] == 8
    be.generate(prompts[:1], cfg)
    be.generate(prompts[:2], cfg)  # a third bucket: the least recently used cache goes
    assert list(be._caches) == [(1, 64), (2, 64)]
    be.release()
    assert not be._caches
    _same(first, be.generate(prompts[:3], cfg), tol=0.0)


def test_a_bf16_rollout_copy_follows_the_trained_weights(tiny):
    from agents.models import make_tiny_model

    model, tok = make_tiny_model(seed=5)
    be = make_backend("transformers", model, tok, decode="static", rollout_dtype="bf16", compile=False)
    assert isinstance(be, StaticCacheBackend) and be.model is not model
    assert next(be.model.parameters()).dtype == torch.bfloat16 and next(model.parameters()).dtype == torch.float32
    prompt = [tok(PROMPTS[0])["input_ids"]]
    cfg = SamplingConfig(temperature=0, max_new_tokens=6, stop=())
    before = be.generate(prompt, cfg)[0]
    fp32 = TransformersBackend(model, tok).generate(prompt, cfg)[0]
    assert max(abs(a - b) for a, b in zip(before.logprobs, fp32.logprobs)) < 0.1  # bf16 rounding, same policy
    copy = be.model
    with torch.no_grad():  # an optimizer step
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    be.sync_weights(model)
    assert be.model is copy  # synced in place
    for (name, p), q in zip(model.named_parameters(), be.model.parameters()):
        assert torch.equal(q, p.to(torch.bfloat16)), name
    synced = be.generate(prompt, cfg)[0].logprobs
    assert synced != before.logprobs
    model.load_state_dict(make_tiny_model(seed=5)[0].state_dict())  # weights written without a sync
    assert be.generate(prompt, cfg)[0].logprobs == before.logprobs  # the copy followed by itself
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    assert be.generate(prompt, cfg)[0].logprobs not in (before.logprobs, synced)
    with pytest.raises(ValueError, match="rollout_dtype"):
        TransformersBackend(model, tok, rollout_dtype="int8")
    with pytest.raises(ValueError, match="decode"):
        make_backend("transformers", model, tok, decode="fast")


def test_the_trainer_samples_from_a_bf16_copy_and_recomputes_the_old_logprobs(tmp_path):
    import json

    from trainers.build import generation_engine
    from trainers.cli.train import main
    from trainers.config import ConfigError, TrainConfig

    assert generation_engine(TrainConfig(), torch.device("cpu")) == {"decode": "loop", "rollout_dtype": None}
    assert generation_engine(TrainConfig(), torch.device("cuda")) == {"decode": "static", "rollout_dtype": "bf16"}
    assert generation_engine(TrainConfig(bf16=False, decode="loop", policy_mode="generate"), torch.device("cuda")) == {
        "decode": "loop",
        "rollout_dtype": None,
    }
    assert generation_engine(TrainConfig(dist_strategy="fsdp2"), torch.device("cuda")) == {
        "decode": "loop",
        "rollout_dtype": None,
    }
    with pytest.raises(ConfigError, match="fsdp2 samples with the loop"):
        TrainConfig(dist_strategy="fsdp2", rollout_dtype="bf16")
    with pytest.raises(ConfigError, match="vLLM has its own"):
        TrainConfig(backend="vllm", policy_mode="generate", decode="static")
    out = tmp_path / "run"
    main(
        [
            *(
                "--model tiny --env rooms --policy-mode generate --num-groups 2 --group-size 2 --max-steps 3 "
                "--iterations 1 --eval-episodes 0 --no-progress-bars --no-tensorboard --warm-start none "
                "--max-new-tokens 8 --decode static --rollout-dtype bf16 --output-dir"
            ).split(),
            str(out),
        ]
    )
    rec = [json.loads(line) for line in open(out / "metrics.jsonl") if '"train"' in line][-1]
    assert rec["rollout/logprob_mismatch_max"] > 0  # recomputed by the trainer, against the bf16 sampler's
    assert rec["gen/compiles"] == 0.0 and rec["time/compile_s"] == 0.0
    phases = sum(
        rec[k] for k in ("time/generate_s", "time/env_s", "time/reset_s", "time/rollout_other_s", "time/credit_s")
    )
    assert phases == pytest.approx(rec["time/rollout_s"], rel=1e-6, abs=1e-6)


@pytest.mark.slow
def test_the_compiled_decode_step_draws_the_same_samples_and_compiles_once_per_bucket(setup, caplog):
    model, tok, prompts = setup
    cfg = SamplingConfig(temperature=1.0, max_new_tokens=6, stop=())
    be = StaticCacheBackend(model, tok, compile=True, max_batch_size=8, length_bucket=64)
    loop = TransformersBackend(model, tok, max_batch_size=8)
    _same(loop.generate(prompts, cfg, seed=1), be.generate(prompts, cfg, seed=1))
    assert be.stats["compiles"] == 1 and be.stats["compile_s"] > 0
    import logging

    with caplog.at_level(logging.INFO, logger="agents.backends.static"):
        be.generate(prompts[:4], cfg, seed=2)  # 4 rows: a new batch bucket, compiled mid-run
        be.generate(prompts[1:], cfg, seed=3)  # 4 rows again: compiled already
    assert be.stats["compiles"] == 2
    [warned] = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "agents.backends.static"]
    assert "compiled for batch 4 x cache 64" in warned.getMessage() and "mid-run" in warned.getMessage()


def test_gradient_checkpointing_gives_the_same_update(tmp_path):
    """The same run with and without --gradient-checkpointing: the same records (update statistics
    included) up to float rounding, and the option reaches the model."""
    import json

    from trainers.cli.train import main
    from trainers.config import ConfigError, TrainConfig
    from trainers.loop.updater import enable_gradient_checkpointing

    with pytest.raises(ConfigError, match="prompt trie"):
        TrainConfig(gradient_checkpointing=True, batch_decisions="tree")
    recs = []
    for flag in ([], ["--gradient-checkpointing"]):
        out = tmp_path / ("gc" if flag else "plain")
        main(
            [
                *(
                    "--model tiny --env rooms --num-groups 2 --group-size 2 --max-steps 3 --iterations 1 "
                    "--eval-episodes 0 --no-progress-bars --no-tensorboard --warm-start none "
                    "--no-skip-zero-advantage --batch-decisions on --output-dir"
                ).split(),
                str(out),
                *flag,
            ]
        )
        recs.append([json.loads(line) for line in open(out / "metrics.jsonl") if '"train"' in line][-1])
    for key in ("update/pg_loss", "update/grad_norm", "update/tokens", "success"):
        assert recs[1][key] == pytest.approx(recs[0][key], rel=1e-5, abs=1e-7), key
    from agents.models import make_tiny_model

    model, _ = make_tiny_model()
    enable_gradient_checkpointing(model)
    assert model.model.gradient_checkpointing


def test_each_new_bucket_s_first_step_is_timed_and_counted_as_its_compilation(setup, caplog, monkeypatch):
    """The compiled path's bookkeeping, without compiling (the plain step stands in for the
    compiled one): each new (batch, cache) bucket's first step is counted and timed once; the
    first call's buckets are logged at INFO, a bucket first met mid-run as a WARNING; decode steps
    add up; the samples stay the loop engine's."""
    import logging

    model, tok, prompts = setup
    cfg = SamplingConfig(temperature=1.0, max_new_tokens=6, stop=())
    be = StaticCacheBackend(model, tok, compile=False, max_batch_size=8, length_bucket=64)
    be.compile = True  # the compiled path's bookkeeping around the plain step
    loop = TransformersBackend(model, tok, max_batch_size=8)
    with caplog.at_level(logging.INFO, logger="agents.backends.static"):
        _same(loop.generate(prompts, cfg, seed=1), be.generate(prompts, cfg, seed=1))
        first = dict(be.stats)
        assert first["compile_s"] < 60  # a step's time, not a clock reading
        _same(loop.generate(prompts[:4], cfg, seed=2), be.generate(prompts[:4], cfg, seed=2))  # batch bucket 4: new
        _same(loop.generate(prompts[1:], cfg, seed=3), be.generate(prompts[1:], cfg, seed=3))  # bucket 4 again
    assert first["compiles"] == 1 and first["compile_s"] > 0 and first["decode_steps"] == 6
    assert be.stats["compiles"] == 2 and be.stats["compile_s"] > first["compile_s"]
    assert be.stats["decode_steps"] == 18
    logged = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "agents.backends.static"]
    assert [level for level, _ in logged] == [logging.INFO, logging.WARNING]
    assert logged[0][1].startswith("decode step compiled for batch 8 x cache 64 in ") and "mid-run" not in logged[0][1]
    assert logged[1][1].startswith("decode step compiled for batch 4 x cache 64 in ") and logged[1][1].endswith(
        " (mid-run: a shape bucket not seen before)"
    )


def test_a_bucket_met_after_a_single_decode_step_is_still_mid_run(setup, caplog):
    import logging

    model, tok, prompts = setup
    be = StaticCacheBackend(model, tok, compile=False, max_batch_size=8, length_bucket=64)
    be.compile = True
    with caplog.at_level(logging.INFO, logger="agents.backends.static"):
        # one token comes from the prompt's pass: one decode step counted, none run
        be.generate(prompts, SamplingConfig(temperature=1.0, max_new_tokens=1, stop=()), seed=1)
        be.generate(prompts[:2], SamplingConfig(temperature=1.0, max_new_tokens=2, stop=()), seed=1)
    assert be.stats["decode_steps"] == 3 and be.stats["compiles"] == 1
    assert [r.levelno for r in caplog.records if r.name == "agents.backends.static"] == [logging.WARNING]


def test_compile_defaults_to_the_gpu_and_raises_dynamos_recompile_limit(setup):
    import torch._dynamo

    model, tok, _ = setup
    plain = StaticCacheBackend(model, tok)
    assert plain.compile is False  # the CPU: no compilation unless asked
    assert (plain.length_bucket, plain.sync_every, plain.max_caches) == (256, 16, 2)
    gpu = StaticCacheBackend(model, tok, device="cuda")  # built lazily: no GPU needed to construct it
    assert gpu.device.type == "cuda" and gpu.compile is True
    assert getattr(gpu._step, "_torchdynamo_orig_callable", None) is static_module._decode_step
    assert StaticCacheBackend(model, tok, device="meta").device.type == "meta"  # the device given, not the model's
    be = StaticCacheBackend(model, tok, compile=True)
    limit = "recompile_limit" if hasattr(torch._dynamo.config, "recompile_limit") else "cache_size_limit"
    assert be.compile is True and getattr(torch._dynamo.config, limit) >= 64  # one graph per bucket, 8 is too few
    assert getattr(be._step, "_torchdynamo_orig_callable", None) is static_module._decode_step
    for bad in ({"length_bucket": 0}, {"sync_every": 0}, {"max_caches": 0}):
        with pytest.raises(ValueError, match="length_bucket, sync_every and max_caches must be >= 1"):
            StaticCacheBackend(model, tok, **bad)
