"""The static-cache engine against the loop engine as the reference, under random inputs: prompt
lengths, batch sizes, ``n``, ``sync_every``, stop strings, EOS tokens and ``min_new_tokens``.
Tokens, log-probs, lengths and finish reasons must be equal, call after call and batch after
batch: a GPU run (static engine) and its CPU rerun (loop engine) draw the same samples."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.backends import SamplingConfig, StaticCacheBackend, TransformersBackend


def _same(a, b, tol=1e-5, nucleus_flips=0):
    """Equal tokens, lengths and finish reasons, and log-probs within ``tol``. ``nucleus_flips``:
    how many positions may differ by up to 1e-3 instead. Under top-p the two engines' logits,
    1e-6 apart (a padded static cache against a growing one), can put a token on either side of
    the nucleus's edge: the token drawn is the same, and its renormalised log-prob moves by that
    token's mass."""
    assert [g.response_ids for g in a] == [g.response_ids for g in b]
    assert [len(g.response_ids) for g in a] == [len(g.logprobs) for g in b]
    assert [g.finish_reason for g in a] == [g.finish_reason for g in b]
    gaps = sorted((abs(x - y) for g, h in zip(a, b) for x, y in zip(g.logprobs, h.logprobs)), reverse=True)
    assert all(gap <= 1e-3 for gap in gaps[:nucleus_flips]), gaps[:nucleus_flips]
    assert max(gaps[nucleus_flips:], default=0.0) <= tol, gaps[: nucleus_flips + 3]


@st.composite
def cases(draw, vocab: int):
    n_prompts = draw(st.integers(1, 6))
    prompts = [draw(st.lists(st.integers(3, vocab - 1), min_size=1, max_size=12)) for _ in range(n_prompts)]
    return {
        "prompts": prompts,
        "n": draw(st.integers(1, 3)),
        "max_batch_size": draw(st.integers(1, 8)),
        "sync_every": draw(st.integers(1, 9)),
        "max_new_tokens": draw(st.integers(1, 14)),
        "min_new_tokens": draw(st.integers(0, 4)),
        "temperature": draw(st.sampled_from([0.0, 0.7, 1.0, 1.5])),
        "top_p": draw(st.sampled_from([1.0, 0.9])),
        "eos": draw(st.sets(st.integers(3, vocab - 1), max_size=12)),
        "stop_at": draw(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 13), st.integers(1, 3)), max_size=2)),
        "common": draw(st.sets(st.sampled_from(["0", "1", "e", "a", "o"]), max_size=3)),  # whole batches end early
        "seed": draw(st.integers(0, 2**31)),
    }


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_static_engine_draws_the_loop_engines_samples_under_random_inputs(tiny, data):
    _check_random_case(tiny, data)


@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_static_engine_draws_the_loop_engines_samples_on_a_fixed_draw_of_cases(tiny, data):
    """The same property on 15 cases drawn the same way every run (fast; the slow test draws 60
    fresh ones)."""
    _check_random_case(tiny, data)


def _check_random_case(tiny, data) -> None:
    model, tok = tiny
    case = data.draw(cases(len(tok)))
    cfg = SamplingConfig(
        temperature=case["temperature"],
        top_p=case["top_p"],
        max_new_tokens=case["max_new_tokens"],
        min_new_tokens=min(case["min_new_tokens"], case["max_new_tokens"]),
        n=case["n"],
        stop=(),
    )
    loop = TransformersBackend(model, tok, max_batch_size=case["max_batch_size"])
    static = StaticCacheBackend(
        model, tok, max_batch_size=case["max_batch_size"], compile=False, sync_every=case["sync_every"], length_bucket=8
    )
    loop.eos_ids = static.eos_ids = set(case["eos"]) | set(loop.eos_ids)
    # stop strings cut from what the model answers, so that they are met at varied positions
    free = loop.generate(case["prompts"], cfg, seed=case["seed"])
    stops = []
    for row, start, width in case["stop_at"]:
        ids = free[row % len(free)].response_ids
        text = tok.decode(ids[start % max(len(ids), 1) : start % max(len(ids), 1) + width], skip_special_tokens=True)
        if text.strip():
            stops.append(text)
    cfg = cfg.with_(stop=tuple(stops) + tuple(sorted(case["common"])))
    for call in range(2):  # two calls on one engine: nothing carries over from the first
        _same(
            loop.generate(case["prompts"], cfg, seed=case["seed"] + call),
            static.generate(case["prompts"], cfg, seed=case["seed"] + call),
            nucleus_flips=1 if case["top_p"] < 1.0 and case["temperature"] > 0 else 0,
        )


def test_a_token_at_the_nucleus_edge_moves_at_most_one_log_prob_and_nothing_else(tiny):
    """A case a random draw found: at one position the engines' logits, 1e-6 apart, can put a
    token on either side of top-p's edge (whether they do depends on the CPU's arithmetic). Same
    tokens either way; at most one log-prob differs by more than 1e-5, and by under 1e-3; without
    top-p, all of them agree within 1e-5."""
    model, tok = tiny
    prompts = [[3], [3], [3, 3], [3, 3, 3]]
    cfg = SamplingConfig(temperature=0.7, top_p=0.9, max_new_tokens=10, n=3, stop=())
    loop = TransformersBackend(model, tok, max_batch_size=5)
    static = StaticCacheBackend(model, tok, max_batch_size=5, compile=False, sync_every=1, length_bucket=8)
    a, b = loop.generate(prompts, cfg, seed=2**31 + 1), static.generate(prompts, cfg, seed=2**31 + 1)
    assert sum(len(g.response_ids) for g in a) == 120  # every answer runs to max_new_tokens: 120 positions
    _same(a, b, nucleus_flips=1)
    full = cfg.with_(top_p=1.0)
    _same(loop.generate(prompts, full, seed=2**31 + 1), static.generate(prompts, full, seed=2**31 + 1))


@pytest.mark.parametrize("sync_every", [1, 3, 16])
def test_stops_in_several_batches_leave_the_next_batch_s_draws_as_the_loop_engine_s(tiny, sync_every):
    """A batch whose rows all end early on a stop string: the static engine went on drawing until
    its next host look, and the next batch then drew other samples (the trainer's 64 answers a step
    span two batches of 32, and every answer may close its ``</action>`` tag early)."""
    model, tok = tiny
    prompts = [tok(p)["input_ids"] for p in ("open drawer 1", "go to cabinet 2", "take mug 1", "look")]
    cfg = SamplingConfig(temperature=1.0, max_new_tokens=20, n=3, stop=("0", "e", "a"))
    loop = TransformersBackend(model, tok, max_batch_size=4).generate(prompts, cfg, seed=11)
    ends = [max(len(g.response_ids) for g in loop[i : i + 4]) for i in (0, 4, 8)]
    assert len(loop) == 12 and ends[0] < 16 and max(ends) < 20  # whole batches end early, before a look at 16
    static = StaticCacheBackend(
        model, tok, max_batch_size=4, compile=False, sync_every=sync_every, length_bucket=8
    ).generate(prompts, cfg, seed=11)
    _same(loop, static)


def test_a_finished_row_s_answer_and_length_never_change_after_it_ends(tiny):
    """After a row ends (EOS or a stop string) the batch decodes on; nothing it draws then, EOS
    included, moves that row's end or adds to its answer."""
    model, tok = tiny
    prompts = [tok(p)["input_ids"] for p in ("a", "open the fridge and look inside", "b c")]
    cfg = SamplingConfig(temperature=1.0, max_new_tokens=16, stop=())
    free = TransformersBackend(model, tok).generate(prompts, cfg, seed=3)
    vocab_seen = sorted({t for g in free for t in g.response_ids})
    eos = set(vocab_seen[: max(1, len(vocab_seen) // 3)])  # often drawn: rows end, then draw EOS again
    for sync_every in (1, 4, 16):
        loop, static = (
            TransformersBackend(model, tok),
            StaticCacheBackend(model, tok, compile=False, sync_every=sync_every),
        )
        loop.eos_ids = static.eos_ids = eos
        a, b = loop.generate(prompts, cfg, seed=3), static.generate(prompts, cfg, seed=3)
        _same(a, b)
        for g in b:
            kept = [t for t in g.response_ids if t in eos]
            assert g.finish_reason == "length" or (kept and g.response_ids[-1] in eos and len(kept) == 1)


@pytest.mark.parametrize("sync_every", [2, 3, 4, 5])
def test_a_stop_string_ending_exactly_at_a_host_look_is_cut_there(tiny, sync_every):
    model, tok = tiny
    prompts = [tok("put a clean mug in drawer 2")["input_ids"]]
    cfg = SamplingConfig(temperature=1.0, max_new_tokens=12, stop=())
    at = sync_every  # the stop string's last token is the look's last position
    for seed in range(200):  # an answer whose token there is text not met before it
        ids = TransformersBackend(model, tok).generate(prompts, cfg, seed=seed)[0].response_ids
        stop = tok.decode(ids[at - 1 : at], skip_special_tokens=True)
        if (
            stop.strip()
            and stop not in tok.decode(ids[: at - 1] + ids[at - 1 : at], skip_special_tokens=True)[: -len(stop)]
        ):
            break
    else:
        pytest.fail("no seed gives a fresh token at the look")
    got = StaticCacheBackend(model, tok, compile=False, sync_every=sync_every).generate(
        prompts, cfg.with_(stop=(stop,)), seed=seed
    )[0]
    assert got.finish_reason == "stop" and got.response_ids == ids[:at]
    _same(TransformersBackend(model, tok).generate(prompts, cfg.with_(stop=(stop,)), seed=seed), [got])


def test_without_eos_tokens_no_token_ends_an_answer(tiny):
    """A tokenizer with no EOS: the engines run every row to its length (or a stop string); no
    token id stands in for the missing EOS."""
    model, tok = tiny
    prompts = [tok(p)["input_ids"] for p in ("open drawer 1", "go to cabinet 2", "take mug 1", "look around")]
    cfg = SamplingConfig(temperature=1.5, max_new_tokens=14, n=16, stop=())
    for seed in range(60):  # a draw of id 1, which a sentinel could be mistaken for
        loop = TransformersBackend(model, tok)
        loop.eos_ids = set()
        free = loop.generate(prompts, cfg, seed=seed)
        if any(t == 1 for g in free for t in g.response_ids):
            break
    else:
        pytest.skip("no small token id drawn")
    static = StaticCacheBackend(model, tok, compile=False, sync_every=4)
    static.eos_ids = set()
    got = static.generate(prompts, cfg, seed=seed)
    _same(free, got)
    assert all(g.finish_reason == "length" and len(g.response_ids) == 14 for g in got)


def test_a_stop_string_just_before_an_eos_found_in_the_same_look_ends_the_answer_there(tiny):
    """A stop string whose last token comes right before an EOS, both met between two host looks:
    the answer ends at the stop string, as the loop engine (which checks every token) ends it."""
    model, tok = tiny
    prompts = [tok("put a clean mug in drawer 2")["input_ids"]]
    cfg = SamplingConfig(temperature=1.0, max_new_tokens=12, stop=())
    for seed in range(300):
        ids = TransformersBackend(model, tok).generate(prompts, cfg, seed=seed)[0].response_ids
        p = 4  # the stop string's token; the EOS right after it, both before the look at 16
        stop = tok.decode(ids[p : p + 1], skip_special_tokens=True)
        fresh = stop.strip() and stop not in tok.decode(ids[:p], skip_special_tokens=True)
        if fresh and ids[p + 1] not in ids[: p + 1]:
            break
    else:
        pytest.fail("no seed gives such an answer")
    stopped = cfg.with_(stop=(stop,))
    loop, static = TransformersBackend(model, tok), StaticCacheBackend(model, tok, compile=False, sync_every=16)
    loop.eos_ids = static.eos_ids = {ids[p + 1]}
    want, got = loop.generate(prompts, stopped, seed=seed), static.generate(prompts, stopped, seed=seed)
    _same(want, got)
    assert got[0].finish_reason == "stop" and got[0].response_ids == ids[: p + 1]
