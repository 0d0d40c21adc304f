"""Generate mode's update path: log-probs over the vocabulary in chunks, passes ordered by length.

The chunked head must give the whole pass's log-probs, entropies and gradients (float rounding
aside) and never hold more than one chunk of logits; a model whose logits are more than its head
applied to its last hidden state is refused. Token passes in generate mode go longest first with
their padding counted.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from agents.logprobs import chunked_head_logprobs, sequence_logprobs
from agents.models import make_tiny_model
from trainers.config import ConfigError, TrainConfig
from trainers.loop.ppo import PPOConfig, micro_batches

pytest.importorskip("transformers", reason="training extra [train] not installed")


def _pairs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(3, 1000, (n,), generator=g).tolist() for n in (7, 12, 3, 9, 5)]
    responses = [torch.randint(3, 1000, (n,), generator=g).tolist() for n in (5, 1, 8, 6, 3)]
    return prompts, responses


def _run(model, chunk: int, *, top_p: float, with_entropy: bool):
    prompts, responses = _pairs()
    model.zero_grad(set_to_none=True)
    lps, ents = sequence_logprobs(
        model,
        prompts,
        responses,
        pad_token_id=0,
        temperature=0.7,
        top_p=top_p,
        with_entropy=with_entropy,
        batch_size=3,
        logit_chunk=chunk,
    )
    loss = sum((lp * (i + 1)).sum() for i, lp in enumerate(lps))
    if with_entropy:
        loss = loss + sum(0.1 * e.sum() for e in ents)
    loss.backward()
    return lps, ents, {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("top_p", [1.0, 0.9])
@pytest.mark.parametrize("chunk", [1, 5, 4096])
def test_chunked_head_gives_the_whole_pass_values_and_gradients(chunk, top_p):
    model, _ = make_tiny_model(seed=1)
    lp_a, ent_a, grad_a = _run(model, 0, top_p=top_p, with_entropy=True)
    lp_b, ent_b, grad_b = _run(model, chunk, top_p=top_p, with_entropy=True)
    assert [x.shape for x in lp_a] == [x.shape for x in lp_b] == [torch.Size([n]) for n in (5, 1, 8, 6, 3)]
    for a, b in zip(lp_a + ent_a, lp_b + ent_b):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
    for name, g in grad_a.items():
        assert torch.isfinite(grad_b[name]).all(), name
        assert float((g - grad_b[name]).norm() / g.norm().clamp(min=1e-12)) < 1e-5, name


def test_entropy_gradient_is_finite_with_a_nucleus():
    """Tokens outside the top-p nucleus have log-prob -inf; the entropy bonus's gradient must stay
    finite (a where() over p * log p gives nan there) and follow the entropy inside the nucleus."""
    model, _ = make_tiny_model(seed=2)
    _, ents, grads = _run(model, 0, top_p=0.5, with_entropy=True)
    assert all(torch.isfinite(e).all() for e in ents)
    assert all(torch.isfinite(g).all() for g in grads.values())
    assert max(float(g.abs().max()) for g in grads.values()) > 0


def test_a_chunk_of_logits_at_a_time():
    """The head never runs on more than ``chunk`` positions, forward or backward (recomputed)."""
    head = torch.nn.Linear(8, 50, bias=False)
    sizes: list[int] = []
    head.register_forward_hook(lambda mod, inp, out: sizes.append(int(inp[0].shape[0])))
    hidden = torch.randn(3, 7, 8, requires_grad=True)
    targets = torch.randint(0, 50, (3, 7))
    lp, ent = chunked_head_logprobs(hidden, head, targets, chunk=4, with_entropy=True)
    assert ent is not None and lp.shape == ent.shape == (3, 7)
    forward = list(sizes)
    (lp.sum() + ent.sum()).backward()
    assert forward == [4, 4, 4, 4, 4, 1] and sizes[len(forward) :] and max(sizes) == 4  # 21 positions, recomputed
    whole = torch.log_softmax(head(hidden), -1).gather(-1, targets[..., None])[..., 0]
    torch.testing.assert_close(lp, whole)
    with pytest.raises(ValueError, match="chunk must be >= 1"):
        chunked_head_logprobs(hidden, head, targets, chunk=0)


def test_a_model_whose_logits_are_more_than_its_head_is_refused():
    model, _ = make_tiny_model(seed=3)
    forward = model.forward

    def capped(*args, **kwargs):  # soft-capping, as Gemma 2 does
        out = forward(*args, **kwargs)
        out.logits = 3.0 * torch.tanh(out.logits / 3.0)
        return out

    model.forward = capped
    prompts, responses = _pairs()
    with pytest.raises(ValueError, match="not its output head applied to its last hidden state"):
        sequence_logprobs(model, prompts, responses, pad_token_id=0, logit_chunk=4)
    sequence_logprobs(model, prompts, responses, pad_token_id=0)  # the whole pass takes the model's own logits


def test_generate_policy_reads_logit_chunk_from_its_options():
    from agents.backends.base import SamplingConfig
    from agents.backends.hf import TransformersBackend
    from agents.generate_policy import GeneratePolicy

    model, tok = make_tiny_model(seed=4)
    seen: list[int] = []
    head = model.get_output_embeddings()
    head.register_forward_hook(lambda mod, inp, out: seen.append(int(inp[0].reshape(-1, inp[0].shape[-1]).shape[0])))
    policies = [
        GeneratePolicy(
            model,
            tok,
            TransformersBackend(model, tok),
            "alfworld",
            fmt="action",
            logit_chunk=c,
            sampling=SamplingConfig(max_new_tokens=6, min_new_tokens=6),
        )
        for c in (0, 2)
    ]
    info = {"goal": "put a mug in desk.", "admissible_commands": ["look", "go to desk 1"], "step": 0}
    outs = policies[0].act(["You are in a room.", "You see a desk."], [info, info], [[], []], seed=0)
    seen.clear()
    whole = policies[0].compute_logprobs(outs)
    assert max(seen) == 2 * 7  # two rows x (6 response positions + the one the model keeps)
    seen.clear()
    chunked = policies[1].compute_logprobs(outs)
    assert sorted(set(seen)) == [2]  # the model's own kept row per sequence, then chunks of 2
    for a, b in zip(whole, chunked):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


def test_logit_chunk_tokens_is_refused_where_it_cannot_work():
    base = dataclasses.replace(TrainConfig(), env="rooms", model="tiny", device="cpu")
    dataclasses.replace(base, policy_mode="generate", logit_chunk_tokens=512).validate()
    with pytest.raises(ConfigError, match="logit_chunk_tokens chunks the output head of generate mode"):
        dataclasses.replace(base, policy_mode="score", logit_chunk_tokens=512).validate()
    with pytest.raises(ConfigError, match="logit_chunk must be >= 0"):
        dataclasses.replace(base, policy_mode="generate", logit_chunk_tokens=-1).validate()
    assert dataclasses.replace(base, policy_mode="generate", logit_chunk_tokens=64).policy_options().logit_chunk == 64


def test_generate_mode_passes_go_longest_first_with_padding_counted():
    g = torch.Generator().manual_seed(0)
    cost = torch.randint(20, 120, (60,), generator=g).tolist()
    keys = [(i % 7, i) for i in range(60)]  # prompt order: unrelated to length
    keys[5] = keys[9]  # one decision drawn twice
    cost[5] = cost[9]
    cfg = dataclasses.replace(
        PPOConfig.from_config(dataclasses.replace(TrainConfig(), policy_mode="generate")), micro_batch_tokens=400
    )
    assert cfg.by_length and not PPOConfig.from_config(TrainConfig()).by_length  # score mode keeps prefix order
    passes = micro_batches(range(60), cost, cfg, keys)
    assert sorted(j for p in passes for j in p) == list(range(60))
    order = [j for p in passes for j in p]
    assert [cost[j] for j in order] == sorted(cost, reverse=True)
    assert abs(order.index(5) - order.index(9)) == 1
    for p in passes:
        assert len(p) * max(cost[j] for j in p) <= 400 or len(p) == 1
    padded = sum(len(p) * max(cost[j] for j in p) for p in passes)
    prefix_order = micro_batches(range(60), cost, dataclasses.replace(cfg, by_length=False), keys)
    padded_prefix = sum(len(p) * max(cost[j] for j in p) for p in prefix_order)
    assert padded / sum(cost) < 1.1 < padded_prefix / sum(cost)


def test_chunked_head_under_lora_and_with_the_adapter_disabled():
    """LoRA trains through the chunks; the KL reference (the adapter disabled) scores through them."""
    peft = pytest.importorskip("peft", reason="LoRA extra (peft) not installed")
    model, _ = make_tiny_model(seed=5)
    model = peft.get_peft_model(
        model, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    prompts, responses = _pairs(1)
    grads = []
    for chunk in (0, 3):
        model.zero_grad(set_to_none=True)
        lps, _ = sequence_logprobs(model, prompts, responses, pad_token_id=0, logit_chunk=chunk)
        sum(lp.sum() for lp in lps).backward()
        grads.append([p.grad.clone() for p in model.parameters() if p.requires_grad])
    assert len(grads[1]) == 8 and all(g.abs().max() > 0 for g in grads[1])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    with torch.no_grad(), model.disable_adapter():
        ref_chunked, _ = sequence_logprobs(model, prompts, responses, pad_token_id=0, logit_chunk=3)
        ref_whole, _ = sequence_logprobs(model, prompts, responses, pad_token_id=0)
    for a, b in zip(ref_whole, ref_chunked):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
