"""Packed (batched) decisions give the per-decision log-probs, on real ALFWorld prompts.

The decisions come from members playing embedded ALFWorld games with the credit-trap template:
prompts of 100-300 tokens whose prefixes are shared within a group, ~10 candidates each.
"""

from __future__ import annotations

import pytest
import torch

from agents.logprobs import candidate_logprobs, packed_candidate_logprobs
from agents.policy import make_policy
from agents.tree_attention import TokenTrie, tree_attention_error, tree_candidate_logprobs

TOL = 1e-5


@pytest.fixture(scope="module")
def model_tok():
    from agents.models import load_model

    torch.manual_seed(0)
    model, tok = load_model("tiny-128x2", init_std=0.08)  # the trap preset's model at a scale that ranks
    return model.eval(), tok


@pytest.fixture(scope="module")
def alfworld_steps(model_tok):
    """Step outputs of 2 groups x 3 members over 5 vector steps of real ALFWorld games."""
    from trainers.envs import make_env_fn
    from trainers.rollouts.rollout import collect_rollout
    from wrappers import GroupVectorEnv

    model, tok = model_tok
    policy = make_policy(
        "score", model, tok, env_name="alfworld-task-notes", history_k=2, avoid_repeats=False, batch_decisions=False
    )
    envs = GroupVectorEnv(make_env_fn("alfworld", "easy-train", 5, "canonical"), num_groups=2, group_size=3, seed=0)
    try:
        rollout = collect_rollout(envs, policy, task_seeds=[1, 2], seed=0)
    finally:
        envs.close()
    return [s.output for s in rollout.steps]


def _worst(a, b) -> float:
    return max(float((x - y).abs().max()) for da, db in zip(a, b) for x, y in zip(da, db))


def _values_and_grads(model, fn):
    """The log-probs ``fn()`` returns, and the gradient of their sum on every parameter."""
    model.zero_grad(set_to_none=True)
    out = fn()
    torch.cat([x.reshape(-1) for d in out for x in d]).sum().backward()
    return [x.detach() for d in out for x in d], [p.grad.detach().clone() for p in model.parameters()]


def test_real_prompts_share_prefixes_and_differ_in_length(alfworld_steps):
    lengths = [len(s.prompt_ids) for s in alfworld_steps]
    assert len(alfworld_steps) >= 20 and max(lengths) > 1.3 * min(lengths)
    assert len({tuple(s.prompt_ids) for s in alfworld_steps}) < len(alfworld_steps)  # members share decisions


@pytest.mark.parametrize("row_tokens,max_tokens", [(512, 8192), (64, 256), (10**6, 10**6)])
def test_packed_equals_per_decision_without_grad(model_tok, alfworld_steps, row_tokens, max_tokens):
    model, _ = model_tok
    decisions = [(s.prompt_ids, s.candidate_ids) for s in alfworld_steps]
    with torch.no_grad():
        ref = [candidate_logprobs(model, p, c, pad_token_id=0) for p, c in decisions]
        got = packed_candidate_logprobs(model, decisions, pad_token_id=0, row_tokens=row_tokens, max_tokens=max_tokens)
    assert [len(g) for g in got] == [len(c) for _, c in decisions]
    assert [[x.shape for x in g] for g in got] == [[x.shape for x in r] for r in ref]
    assert _worst(ref, got) < TOL


def test_packed_equals_per_decision_with_grad(model_tok, alfworld_steps):
    """Values and gradients: rows of very different lengths (a short synthetic prompt beside the
    real ones) and a row holding one decision."""
    model, _ = model_tok
    decisions = [(s.prompt_ids, s.candidate_ids) for s in alfworld_steps[:12]] + [([5, 6], [[7], [8, 9]])]

    ref_v, ref_g = _values_and_grads(
        model, lambda: [candidate_logprobs(model, p, c, pad_token_id=0) for p, c in decisions]
    )
    got_v, got_g = _values_and_grads(
        model, lambda: packed_candidate_logprobs(model, decisions, pad_token_id=0, row_tokens=300)
    )
    model.zero_grad(set_to_none=True)
    assert max(float((a - b).abs().max()) for a, b in zip(ref_v, got_v)) < TOL
    rel = max(float((a - b).abs().max() / a.abs().max().clamp_min(1e-12)) for a, b in zip(ref_g, got_g))
    assert rel < 1e-4, rel


@pytest.mark.parametrize("scorer", [packed_candidate_logprobs, tree_candidate_logprobs], ids=["packed", "tree"])
def test_a_single_decision_and_an_empty_batch(model_tok, alfworld_steps, scorer):
    model, _ = model_tok
    s = alfworld_steps[0]
    with torch.no_grad():
        ref = candidate_logprobs(model, s.prompt_ids, s.candidate_ids, pad_token_id=0)
        [got] = scorer(model, [(s.prompt_ids, s.candidate_ids)], pad_token_id=0)
    assert _worst([ref], [got]) < TOL
    assert scorer(model, [], pad_token_id=0) == []
    assert scorer(model, [(s.prompt_ids, [])], pad_token_id=0) == [[]]
    with pytest.raises(ValueError, match="at least one token"):
        scorer(model, [([], [[1]])], pad_token_id=0)


@pytest.mark.parametrize("packing", ["rows", "tree"])
def test_score_policy_batched_paths_choose_and_rescore_like_the_per_decision_path(model_tok, alfworld_steps, packing):
    """The same steps through a batched path (packed rows, or one prompt trie per pass) and the
    per-decision path: the same recorded log-probs, and the same differentiable re-scores and entropies."""
    model, tok = model_tok
    kw = dict(env_name="alfworld-task-notes", history_k=2, avoid_repeats=False)
    on = make_policy("score", model, tok, batch_decisions=True, packing=packing, **kw)
    off = make_policy("score", model, tok, batch_decisions=False, **kw)
    lp_on, ent_on = on.compute_logprobs_and_entropy(alfworld_steps)
    lp_off, ent_off = off.compute_logprobs_and_entropy(alfworld_steps)
    assert max(float((a - b).detach().abs().max()) for a, b in zip(lp_on, lp_off)) < TOL
    assert max(float((a - b).detach().abs().max()) for a, b in zip(ent_on, ent_off)) < TOL
    recorded = torch.tensor([s.old_action_logprob for s in alfworld_steps])
    assert float((torch.cat(lp_on).detach() - recorded).abs().max()) < TOL


# ---------------------------------------------------------------- one prompt trie per pass (tree)


@pytest.mark.parametrize("chunk,max_tokens", [(128, 8192), (4, 300), (1000, 10**6)])
def test_tree_equals_per_decision_without_grad(model_tok, alfworld_steps, chunk, max_tokens):
    """Chunks of 4 tokens cut every prompt into many chunks whose keys are their paths; 300 trie
    tokens a pass cuts the batch into many passes; one chunk holds a whole pass."""
    model, _ = model_tok
    decisions = [(s.prompt_ids, s.candidate_ids) for s in alfworld_steps]
    with torch.no_grad():
        ref = [candidate_logprobs(model, p, c, pad_token_id=0) for p, c in decisions]
        got = tree_candidate_logprobs(model, decisions, pad_token_id=0, chunk=chunk, max_tokens=max_tokens)
    assert [[x.shape for x in g] for g in got] == [[x.shape for x in r] for r in ref]
    assert _worst(ref, got) < TOL


@pytest.mark.parametrize("last_layer_rows", [True, False])
def test_tree_equals_per_decision_with_grad(model_tok, alfworld_steps, last_layer_rows):
    """Values and gradients, with a short synthetic prompt beside the real ones, with the last
    layer computed at the predicting rows only and in full."""
    model, _ = model_tok
    decisions = [(s.prompt_ids, s.candidate_ids) for s in alfworld_steps[:12]] + [([5, 6], [[7], [8, 9]])]

    ref_v, ref_g = _values_and_grads(
        model, lambda: [candidate_logprobs(model, p, c, pad_token_id=0) for p, c in decisions]
    )
    got_v, got_g = _values_and_grads(
        model,
        lambda: tree_candidate_logprobs(model, decisions, pad_token_id=0, chunk=64, last_layer_rows=last_layer_rows),
    )
    model.zero_grad(set_to_none=True)
    assert max(float((a - b).abs().max()) for a, b in zip(ref_v, got_v)) < TOL
    rel = max(float((a - b).abs().max() / a.abs().max().clamp_min(1e-12)) for a, b in zip(ref_g, got_g))
    assert rel < 1e-4, rel


def test_the_trie_encodes_a_shared_prefix_once(alfworld_steps):
    decisions = [(s.prompt_ids, s.candidate_ids) for s in alfworld_steps]
    trie = TokenTrie.build(decisions)
    flat = sum(len(p) + sum(len(c) for c in cs) for p, cs in decisions)
    assert len(trie.tokens) < 0.7 * flat  # group members share prompts; commands share words
    for (i, j), nodes in trie.predictors.items():  # each predictor's path spells the sequence
        p, c = decisions[i][0], decisions[i][1][j]
        path, x = [], nodes[-1]
        while x >= 0:
            path.append(trie.tokens[x])
            x = trie.parents[x]
        assert path[::-1] + [c[-1]] == list(p) + list(c)
        assert [trie.depth[n] for n in nodes] == list(range(len(p) - 1, len(p) + len(c) - 1))


def test_a_model_outside_transformers_gets_one_line_not_a_wrong_answer(model_tok, alfworld_steps):
    """A model whose attention does not go through transformers' interface cannot take the tree
    path: the policy says so and names the other paths."""
    model, tok = model_tok

    class Plain(torch.nn.Module):  # a causal LM with the same forward, but no transformers config
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, **kw):
            return self.inner(**kw)

    plain = Plain(model)
    assert "not a transformers model" in tree_attention_error(plain)
    assert tree_attention_error(model) is None
    policy = make_policy(
        "score",
        plain,
        tok,
        batch_decisions=True,
        packing="tree",
        env_name="alfworld-task-notes",
        history_k=2,
        avoid_repeats=False,
    )
    with pytest.raises(
        ValueError, match=r"batch_decisions tree cannot score with this model: .*use batch_decisions on"
    ):
        policy.compute_logprobs_and_entropy(alfworld_steps[:2])


def test_a_last_layer_of_another_shape_is_computed_in_full():
    """The tree path computes the last layer at the predicting rows only by the usual pre-norm
    formula; a layer of another shape (here its attention counts twice) fails the model's check
    in that mode, and the path computes that layer in full: same log-probs as per decision."""
    from agents.models import load_model
    from agents.tree_attention import _LAST_LAYER_ROWS

    torch.manual_seed(0)
    model, _ = load_model("tiny", init_std=0.05)
    layer = model.model.layers[-1]

    def doubled(hidden_states, **kw):
        out = layer.self_attn(hidden_states=layer.input_layernorm(hidden_states), **kw)[0]
        hidden = hidden_states + 2 * out
        return hidden + layer.mlp(layer.post_attention_layernorm(hidden))

    layer.forward = doubled
    assert tree_attention_error(model) is None and _LAST_LAYER_ROWS[model] is False
    decisions = [([1, 2, 3, 4, 5], [[6, 7], [6, 8, 9]]), ([1, 2, 9], [[4], [5, 6]])]
    with torch.no_grad():
        ref = [candidate_logprobs(model, p, c, pad_token_id=0) for p, c in decisions]
        got = tree_candidate_logprobs(model, decisions, pad_token_id=0, chunk=4)
        pruned = tree_candidate_logprobs(model, decisions, pad_token_id=0, chunk=4, last_layer_rows=True)
    assert _worst(ref, got) < TOL
    assert _worst(ref, pruned) > 1e-3  # what the check caught
    assert layer.forward is doubled  # the layer's own forward is back after each pass


def test_tree_passes_in_two_threads_at_once_give_the_per_decision_log_probs(model_tok, alfworld_steps):
    """Two threads scoring their own decisions with one model at the same time, each pass pruned
    or in full, get what one thread gets; afterwards the model is as it was (its attention
    implementation, its last layer's forward and hooks)."""
    import threading

    model, _ = model_tok
    decisions = [(s.prompt_ids, s.candidate_ids) for s in alfworld_steps]
    halves = [decisions[0::2], decisions[1::2]]
    with torch.no_grad():
        refs = [[candidate_logprobs(model, p, c, pad_token_id=0) for p, c in h] for h in halves]
    layer = model.model.layers[-1]
    before = (
        model.config._attn_implementation,
        dict(layer.self_attn.o_proj._forward_pre_hooks),
        "forward" in vars(layer),
    )
    start = threading.Barrier(2)
    worst = [0.0, 0.0]
    errors: list[BaseException] = []

    def score(k: int) -> None:
        try:
            start.wait()
            with torch.no_grad():
                for rep in range(6):  # the two threads' passes overlap, some pruned while others are not
                    for i in range(0, len(halves[k]), 3):
                        got = tree_candidate_logprobs(
                            model, halves[k][i : i + 3], pad_token_id=0, chunk=32, last_layer_rows=(rep + k) % 2 == 0
                        )
                        worst[k] = max(worst[k], _worst(refs[k][i : i + 3], got))
        except BaseException as exc:  # re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=score, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert max(worst) < TOL
    assert (
        model.config._attn_implementation,
        dict(layer.self_attn.o_proj._forward_pre_hooks),
        "forward" in vars(layer),
    ) == before


def test_the_last_layer_attends_from_the_predicting_rows_only(model_tok, alfworld_steps, monkeypatch):
    """The last layer's attention computes its queries at the rows that predict a candidate token
    (every one of them once, padding aside), not at every trie token: on real ALFWorld decisions
    under half of them; the log-probs are the per-decision ones."""
    import agents.tree_attention as ta

    model, _ = model_tok
    decisions = [(s.prompt_ids, s.candidate_ids) for s in alfworld_steps]
    seen: list[tuple[int, int, int]] = []  # (trie tokens, rows kept, queries computed) per pass
    keep = ta._ChunkLayout.keep_rows

    def spy(layout, rows, module, device):
        keep(layout, rows, module, device)
        seen.append((layout.n, len(rows), sum(q.numel() for q, _, _ in layout.row_groups)))

    monkeypatch.setattr(ta._ChunkLayout, "keep_rows", spy)
    with torch.no_grad():
        ref = [candidate_logprobs(model, p, c, pad_token_id=0) for p, c in decisions]
        got = tree_candidate_logprobs(model, decisions, pad_token_id=0, chunk=32, last_layer_rows=True)
    assert _worst(ref, got) < TOL
    assert seen and all(kept <= queries < 0.5 * n for n, kept, queries in seen), seen
