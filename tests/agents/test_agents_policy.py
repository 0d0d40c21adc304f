"""agents.policy: the score and generate policies on a small text env; PPO ratios start at exactly 1."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from agents.backends import Generation, SamplingConfig, TransformersBackend
from agents.policy import GeneratePolicy, PolicyOptions, ScorePolicy, StepOutput, make_policy


class ScriptedBackend:
    """Returns fixed answers (to test the parse -> action -> penalty path deterministically)."""

    def __init__(self, tok, answers):
        self.tok, self.answers = tok, answers

    def generate(self, prompt_ids, cfg, *, seed=None):
        out = []
        for p, text in zip(prompt_ids, self.answers):
            ids = self.tok(text, add_special_tokens=False)["input_ids"]
            out.append(Generation(list(p), ids, [-1.0] * len(ids), text, "stop"))
        return out

    def sync_weights(self, model):
        self.synced = model


def _policy(tiny, mode="generate", **kw):
    model, tok = tiny
    kw.setdefault("sampling", SamplingConfig(temperature=1.0, max_new_tokens=12))
    kw.setdefault("fmt", "think_action")
    kw.setdefault("history_k", 2)
    kw.setdefault("avoid_repeats", False)
    return make_policy(mode, model, tok, TransformersBackend(model, tok), "alfworld", **kw)


def _play(policy, env, seed=0):
    obs, info = env.reset()
    history, outs = [], []
    for t in range(env.max_steps):
        [out] = policy.act([obs], [info], [history[-policy.history_k :]], seed=seed + t)
        outs.append(out)
        history.append((obs, out.action))
        obs, _, term, trunc, info = env.step(out.action)
        if term or trunc:
            break
    return outs


def test_generate_mode_episode_and_logprob_consistency(tiny, corridor):
    policy = _policy(tiny, sampling=SamplingConfig(temperature=0.8, top_p=0.95, max_new_tokens=12))
    outs = _play(policy, corridor(max_steps=3))
    assert len(outs) == 3
    for out in outs:
        assert isinstance(out, StepOutput) and isinstance(out.action, str)
        assert len(out.response_ids) == len(out.old_logprobs) > 0
        assert out.penalty == (0.0 if out.valid else 0.1)
        assert out.candidates is None
    new = policy.compute_logprobs(outs)
    for lp, out in zip(new, outs):
        assert lp.shape == (len(out.response_ids),) and lp.requires_grad
        assert (lp.detach() - torch.tensor(out.old_logprobs)).abs().max().item() < 1e-4
    # the ratio is exactly 1 at the start and gradients reach the weights
    ratio = torch.cat([(lp - torch.tensor(o.old_logprobs)).exp() for lp, o in zip(new, outs)])
    assert torch.allclose(ratio, torch.ones_like(ratio), atol=1e-4)
    policy.model.zero_grad()
    torch.cat(new).sum().backward()
    grads = [p.grad for p in policy.model.parameters() if p.grad is not None]
    assert grads and any(g.abs().sum() > 0 for g in grads)
    policy.model.zero_grad()


def test_generate_mode_is_seeded_and_batched(tiny, corridor):
    policy = _policy(tiny)
    env = corridor()
    obs, info = env.reset()
    a = policy.act([obs, obs], [info, info], [[], []], seed=11)
    b = policy.act([obs, obs], [info, info], [[], []], seed=11)
    assert [o.response_ids for o in a] == [o.response_ids for o in b]
    assert a[0].prompt_ids == a[1].prompt_ids


def test_invalid_answers_send_or_noop(tiny, corridor):
    model, tok = tiny
    obs, info = corridor().reset()
    answers = ["<think>east</think><action>go east</action>", "I will go east", "<think>x</think><action>go ea"]
    send = GeneratePolicy(model, tok, ScriptedBackend(tok, answers), "alfworld", fmt="think_action")
    outs = send.act([obs] * 3, [info] * 3, [[]] * 3)
    assert [o.valid for o in outs] == [True, False, False]
    assert [o.penalty for o in outs] == [0.0, 0.1, 0.1]
    assert [o.action for o in outs] == ["go east", "I will go east", "go ea"]
    assert outs[1].reason == "missing <think> tag" and outs[2].reason == "unclosed <action> tag"
    noop = GeneratePolicy(
        model,
        tok,
        ScriptedBackend(tok, answers),
        "alfworld",
        fmt="think_action",
        invalid_handling="noop",
        invalid_penalty=0.5,
    )
    outs = noop.act([obs] * 3, [info] * 3, [[]] * 3)
    assert [o.action for o in outs] == ["go east", "look", "look"] and outs[1].penalty == 0.5
    ws = GeneratePolicy(
        model, tok, ScriptedBackend(tok, answers), "webshop", fmt="think_action", invalid_handling="noop"
    )
    assert ws.act([obs] * 3, [info] * 3, [[]] * 3)[1].action == ""


def test_prompt_contains_step_history_and_admissible(tiny, corridor):
    model, tok = tiny
    policy = _policy(tiny)
    env = corridor()
    obs, info = env.reset()
    obs2, _, _, _, info2 = env.step("go east")
    text = tok.decode(policy.prompt_ids(obs2, info2, [(obs, "go east")]))
    assert "reach room 3." in text and "Action 1: 'go east'" in text and "at step 2" in text
    assert "'go west'" in text and text.endswith("<|im_start|>assistant\n")


def test_score_mode_distribution_and_consistency(tiny, corridor):
    policy = _policy(tiny, mode="score", sampling=SamplingConfig(temperature=0.9))
    outs = _play(policy, corridor(max_steps=4), seed=5)
    for out in outs:
        assert out.valid and out.action in ("go east", "go west", "look")
        assert out.candidates == ["go east", "go west", "look"]
        assert out.candidates[out.chosen_index] == out.action
        assert out.response_ids == out.candidate_ids[out.chosen_index]
        assert out.text == f"<action>{out.action}</action>"
        assert len(out.old_logprobs) == len(out.response_ids)
        assert out.old_action_logprob <= 0
    new = policy.compute_logprobs(outs)
    for lp, out in zip(new, outs):
        assert lp.shape == (1,) and lp.requires_grad
        assert abs(lp.item() - out.old_action_logprob) < 1e-4
    ent = policy.compute_entropy(outs)
    assert all(0 <= e.item() <= torch.log(torch.tensor(3.0)).item() + 1e-5 for e in ent)


def test_score_mode_probabilities_sum_to_one_and_greedy_is_argmax(tiny, corridor):
    model, tok = tiny
    obs, info = corridor().reset()
    policy = _policy(tiny, mode="score", sampling=SamplingConfig(temperature=1.0))
    [out] = policy.act([obs], [info], [[]], seed=0)
    from agents.logprobs import sequence_logprobs

    with torch.no_grad():
        lps, _ = sequence_logprobs(model, [out.prompt_ids] * 3, out.candidate_ids, pad_token_id=tok.pad_token_id)
    totals = torch.stack([x.sum() for x in lps])
    assert abs(torch.log_softmax(totals, 0)[out.chosen_index].item() - out.old_action_logprob) < 1e-4
    assert (torch.tensor(out.old_logprobs) - lps[out.chosen_index]).abs().max() < 1e-4
    greedy = _policy(tiny, mode="score", sampling=SamplingConfig(temperature=0))
    [g] = greedy.act([obs], [info], [[]], seed=123)
    assert g.chosen_index == int(totals.argmax())


def test_score_mode_fills_placeholders_and_handles_no_candidates(tiny):
    policy = _policy(tiny, mode="score")
    info = {"goal": {"instruction_text": "I need Red Shoes"}, "admissible_commands": ["search[<query>]"]}
    assert policy.candidates(info) == ["search[i need red shoes]"]
    assert policy.candidates({"admissible_commands": ["look", "look", " go  east "]}) == ["look", "go east"]
    [out] = policy.act(["obs"], [{"admissible_commands": []}], [[]])
    assert not out.valid and out.penalty == 0.1 and out.action == "look"
    [lp] = policy.compute_logprobs([out])
    assert lp.item() == 0.0


def test_bad_policy_arguments(tiny):
    for kw, msg in [
        (dict(mode="beam"), "mode"),
        (dict(fmt="json"), "fmt"),
        (dict(invalid_handling="drop"), "invalid"),
        (dict(sampling=SamplingConfig(n=2)), "n=1"),
        (dict(history_k=-1), "history_k"),
        (dict(score_norm="max"), "score_norm"),
    ]:
        with pytest.raises(ValueError, match=msg):
            _policy(tiny, **kw)


def test_mixed_steps_rejected(tiny, corridor):
    obs, info = corridor().reset()
    gen = _policy(tiny).act([obs], [info], [[]], seed=0)
    score = _policy(tiny, mode="score").act([obs], [info], [[]], seed=0)
    with pytest.raises(ValueError, match="score-mode step"):
        _policy(tiny).compute_logprobs(gen + score)
    with pytest.raises(ValueError, match="generate-mode step"):
        _policy(tiny, mode="score").compute_logprobs(score + gen)


def test_entropy_of_generated_tokens(tiny, corridor):
    policy = _policy(tiny, sampling=SamplingConfig(temperature=1.0, max_new_tokens=6))
    obs, info = corridor().reset()
    outs = policy.act([obs], [info], [[]], seed=0)
    lps, ents = policy.compute_logprobs_and_entropy(outs)
    assert ents[0].shape == lps[0].shape and (ents[0] >= 0).all()
    assert (ents[0] <= torch.log(torch.tensor(float(len(policy.tokenizer)))) + 1e-4).all()


def test_numpy_infos_from_a_vector_env(tiny):
    import numpy as np

    policy = _policy(tiny, mode="score")
    info = {
        "goal": "reach room 3.",
        "admissible_commands": np.array(["go east", "look"], dtype=object),
        "step": np.int64(2),
    }
    [out] = policy.act(["You are in room 2."], [info], [[("o", "go east")]], seed=0)
    assert out.action in ("go east", "look")
    assert "at step 3" in policy.tokenizer.decode(out.prompt_ids)


def test_score_mode_group_members_share_work_and_gradients(tiny, corridor):
    policy = _policy(tiny, mode="score", sampling=SamplingConfig(temperature=1.0))
    obs, info = corridor().reset()
    outs = policy.act([obs] * 4, [info] * 4, [[]] * 4, seed=3)
    assert len({o.old_action_logprob for o in outs if o.chosen_index == outs[0].chosen_index}) == 1
    new = policy.compute_logprobs(outs)
    for lp, o in zip(new, outs):
        assert abs(lp.item() - o.old_action_logprob) < 1e-4
    policy.model.zero_grad()
    torch.cat(new).sum().backward()
    assert policy.model.get_input_embeddings().weight.grad.abs().sum() > 0
    policy.model.zero_grad()


def test_score_mode_avoid_repeats_drops_commands_taken_from_the_same_observation(tiny, corridor):
    env = corridor(max_steps=6)
    obs, info = env.reset()
    history = [(obs, "look"), ("somewhere else", "go west")]
    plain = _policy(tiny, mode="score")
    [p] = plain.act([obs], [info], [history], seed=0)
    assert p.candidates == ["go east", "go west", "look"]
    policy = _policy(tiny, mode="score", avoid_repeats=True)
    for seed in range(5):
        [out] = policy.act([obs], [info], [history], seed=seed)
        # "look" was taken from this very observation: a loop; "go west" was taken elsewhere
        assert out.candidates == ["go east", "go west"] and out.action != "look"
        [lp] = policy.compute_logprobs([out])  # re-scored over the same reduced candidate set
        assert abs(lp.item() - out.old_action_logprob) < 1e-4
    # when every command was tried here, none is dropped (the policy always has a choice)
    every = [(obs, c) for c in ("go east", "go west", "look")]
    [out] = policy.act([obs], [info], [every], seed=0)
    assert out.candidates == ["go east", "go west", "look"]


def test_score_mode_notes_template_writes_each_commands_note_before_it(tiny):
    model, tok = tiny
    policy = ScorePolicy(
        model, tok, None, "alfworld-notes", sampling=SamplingConfig(temperature=1.0), avoid_repeats=False
    )
    info = {
        "goal": "put a clean mug in coffeemachine.",
        "admissible_commands": ["go to drawer 1", "go to shelf 1", "take mug 1 from drawer 1", "look"],
    }
    obs = "You arrive at drawer 1. The drawer 1 is open. In it, you see a mug 1."
    history = [("You are in the middle of a room.", "go to drawer 1")]
    [out] = policy.act([obs], [info], [history], seed=0)
    texts = [tok.decode(ids) for ids in out.candidate_ids]
    assert texts == [
        "seen target: go to drawer 1<|im_end|>",
        "new: go to shelf 1<|im_end|>",
        "target: take mug 1 from drawer 1<|im_end|>",
        "look<|im_end|>",
    ]
    [lp] = policy.compute_logprobs([out])  # re-scored with the stored (noted) candidates
    assert abs(lp.item() - out.old_action_logprob) < 1e-4
    # teacher forcing (behaviour cloning) builds the same candidates as acting
    forced = policy.forced_step(obs, info, history, "take mug 1 from drawer 1")
    assert forced.candidate_ids == out.candidate_ids and forced.text == texts[2]
    # alfworld-memory scores the bare command after the same prompt
    plain = ScorePolicy(
        model, tok, None, "alfworld-memory", sampling=SamplingConfig(temperature=1.0), avoid_repeats=False
    )
    [p] = plain.act([obs], [info], [history], seed=0)
    assert tok.decode(p.candidate_ids[0]) == "go to drawer 1<|im_end|>"
    assert p.prompt_ids == out.prompt_ids  # same prompt: the notes are on the commands only


def test_behaviour_logprobs_match_the_live_ones_in_both_modes(tiny, corridor):
    """The trainer's old log-probs come from the policy, shaped like its live log-probs, in either mode."""
    obs, info = corridor().reset()
    for mode in ("generate", "score"):
        policy = _policy(tiny, mode=mode)
        outs = policy.act([obs, obs], [info, info], [[], []], seed=4)
        for live, out in zip(policy.compute_logprobs(outs), outs):
            old = policy.behaviour_logprobs(out)
            assert old.dtype == torch.float32 and old.shape == live.shape
            assert (old - live.detach()).abs().max() < 1e-4


def test_sync_pushes_weights_to_the_sampler_only_in_generate_mode(tiny, corridor):
    model, tok = tiny
    backend = ScriptedBackend(tok, ["<action>go east</action>"])
    GeneratePolicy(model, tok, backend, "alfworld", fmt="action").sync()
    assert backend.synced is model
    ScorePolicy(model, tok, None, "alfworld").sync()  # acting runs the live model: nothing to push
    with pytest.raises(ValueError, match="needs a backend"):
        GeneratePolicy(model, tok, None, "alfworld")


def test_policy_defaults_are_the_trainers_defaults(tiny):
    """One place for the defaults: a policy built without options acts as the trainer's default config."""
    from trainers.config import TrainConfig

    model, tok = tiny
    policy = ScorePolicy(model, tok)
    cfg = TrainConfig()
    assert policy.options == PolicyOptions() == dataclasses.replace(cfg.policy_options(), sampling=SamplingConfig())
    assert (policy.options.fmt, policy.history_k, policy.options.avoid_repeats) == (
        cfg.answer_format,
        cfg.history_k,
        cfg.avoid_repeats,
    )
