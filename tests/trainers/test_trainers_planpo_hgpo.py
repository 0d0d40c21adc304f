"""PlanPO and HGPO (and ProGPO over them): hand-computed cases for every formula, the trainer's
schedule and metrics, and 2-iteration runs of each estimator on the rooms env."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from trainers.advantages import (
    ESTIMATORS,
    AdvantageConfig,
    episode_advantages,
    hgpo_history_advantages,
    planpo_alpha,
    planpo_episode_advantages,
    planpo_turn_advantages,
    potential_credit,
    step_advantages,
)
from trainers.advantages.hgpo import history_clusters
from trainers.config import ConfigError, TrainConfig
from trainers.loop.sections import credit_section

EPS = 1e-6


def z(values, eps=EPS):
    """Population z-score of a list, written out by hand."""
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return [(v - mean) / (std + eps) for v in values]


# ----------------------------------------------------------------------------- PlanPO: trajectory term
def test_planpo_all_failed_group_gets_zero():
    assert planpo_episode_advantages(np.zeros(4), np.array([3, 5, 7, 9])).tolist() == [0.0] * 4


def test_planpo_all_succeeded_equal_lengths_gets_zero():
    # R^E constant: exactly zero (not a rounding residue over eps)
    assert planpo_episode_advantages(np.ones(3), np.array([3, 3, 3])).tolist() == [0.0] * 3
    assert planpo_episode_advantages(np.ones(3) / 3, np.array([7, 7, 7]), success_threshold=0.3).tolist() == [0.0] * 3


def test_planpo_shorter_success_ranks_higher():
    # R^E = [1/2, 1/4]: mean 3/8, std 1/8
    got = planpo_episode_advantages(np.array([1.0, 1.0]), np.array([2, 4]))
    np.testing.assert_allclose(got, [0.125 / (0.125 + EPS), -0.125 / (0.125 + EPS)], rtol=1e-12)
    # a failure sits at R^E = 0, below every success
    got = planpo_episode_advantages(np.array([1.0, 1.0, 0.0]), np.array([2, 4, 3]))
    np.testing.assert_allclose(got, z([0.5, 0.25, 0.0]), rtol=1e-12)
    assert got[0] > got[1] > got[2]


def test_planpo_single_member_gets_zero():
    assert planpo_episode_advantages(np.array([1.0]), np.array([4])).tolist() == [0.0]


def test_planpo_partial_webshop_scores_against_the_threshold():
    r, t = np.array([0.8, 1.0, 0.5]), np.array([2, 3, 2])
    # threshold 1.0: only the full score is a success; R^E = [0, 1/3, 0]
    np.testing.assert_allclose(planpo_episode_advantages(r, t), z([0.0, 1 / 3, 0.0]), rtol=1e-12)
    # threshold 0.75: 0.8 / 2 = 0.4 beats 1.0 / 3 (efficiency, not score)
    got = planpo_episode_advantages(r, t, success_threshold=0.75)
    np.testing.assert_allclose(got, z([0.4, 1 / 3, 0.0]), rtol=1e-12)
    assert got[0] > got[1]
    # no member reaches the threshold: zero, although the scores differ
    assert planpo_episode_advantages(np.array([0.8, 0.5]), np.array([2, 2])).tolist() == [0.0, 0.0]


def test_planpo_ragged_groups_and_errors():
    r = np.array([1.0, 1.0, 1.0, 0.0, 1.0])
    gid = np.array([7, 7, 7, 3, 3])
    t = np.array([1, 2, 4, 6, 6])
    got = episode_advantages(r, gid, estimator="planpo", turns=t)
    np.testing.assert_allclose(got[:3], z([1.0, 0.5, 0.25]), rtol=1e-12)
    np.testing.assert_allclose(got[3:], z([0.0, 1 / 6]), rtol=1e-12)
    with pytest.raises(ValueError, match="turns"):
        episode_advantages(r, gid, estimator="planpo")
    with pytest.raises(ValueError, match="at least one turn"):
        planpo_episode_advantages(np.array([1.0, 1.0]), np.array([0, 2]))
    with pytest.raises(ValueError, match="1-D"):
        planpo_episode_advantages(np.ones((2, 2)), np.ones((2, 2)))


# ----------------------------------------------------------------------------- PlanPO: turn term, alpha
def test_planpo_turn_term_groups_by_turn_index():
    # group 0: trajectories 0 (success), 1 (success), 2 (failure); group 1: trajectory 3 (success)
    r = np.array([1.0, 1.0, 0.0, 1.0])
    group = np.array([0, 0, 0, 1])
    step_traj = np.array([0, 0, 1, 2, 2, 3])
    step_t = np.array([0, 1, 0, 0, 1, 0])
    lengths = np.array([10, 5, 20, 8, 8, 4])
    got = planpo_turn_advantages(r, group, step_traj, step_t, lengths)
    t0 = z([1 / 10, 1 / 20, 0.0])  # turn 0 of group 0: trajectories 0, 1, 2 (failure at 0)
    t1 = z([1 / 5, 0.0])  # turn 1 of group 0: trajectories 0 and 2 (trajectory 1 ended)
    np.testing.assert_allclose(got, [t0[0], t1[0], t0[1], t0[2], t1[1], 0.0], rtol=1e-12)
    assert got[5] == 0.0  # alone at its turn index in its group


def test_planpo_alpha_schedule():
    assert planpo_alpha(1, 11) == pytest.approx(0.1)
    assert planpo_alpha(6, 11) == pytest.approx(0.075)
    assert planpo_alpha(11, 11) == pytest.approx(0.05)
    assert planpo_alpha(2, 3, start=0.2, end=0.0) == pytest.approx(0.1)
    with pytest.raises(ValueError):
        planpo_alpha(0, 3)


def test_planpo_step_advantages_add_alpha_times_the_turn_term():
    r = np.array([1.0, 1.0, 0.0])
    step_traj, step_t = np.array([0, 1, 1, 2, 2, 2]), np.array([0, 0, 1, 0, 1, 2])
    lengths = np.array([4.0, 8.0, 2.0, 5.0, 5.0, 5.0])
    cfg = AdvantageConfig(estimator="planpo", planpo_alpha=0.1)
    out = step_advantages(r, np.zeros(3, int), step_traj, step_t, config=cfg, response_lengths=lengths)
    a_e = z([1.0, 0.5, 0.0])  # T = 1, 2, 3
    a_s = planpo_turn_advantages(r, np.zeros(3, int), step_traj, step_t, lengths)
    np.testing.assert_allclose(out.steps, np.array(a_e)[step_traj] + 0.1 * a_s, rtol=1e-12)
    assert out.acted == {"planpo_groups": 1.0, "planpo_turn_alpha": 0.1}
    # without response lengths (score mode) the turn term is off and says so
    out = step_advantages(r, np.zeros(3, int), step_traj, step_t, config=cfg)
    np.testing.assert_allclose(out.steps, np.array(a_e)[step_traj], rtol=1e-12)
    assert out.acted["planpo_turn_alpha"] == 0.0


def test_progpo_planpo_covers_the_groups_planpo_leaves():
    r = np.array([0.0, 0.0, 1.0, 1.0, 0.5, 0.2])  # group 0 all failed, 1 all succeeded, 2 partial scores
    group = np.array([0, 0, 1, 1, 2, 2])
    step_traj = np.repeat(np.arange(6), [2, 2, 1, 3, 2, 2])
    step_t = np.concatenate([np.arange(n) for n in [2, 2, 1, 3, 2, 2]])
    fv = np.array([1, 1, 1, 0, 1, 1, 0, 0, 1, 0, 1, 1], dtype=bool)
    out = step_advantages(
        r, group, step_traj, step_t, first_visit=fv, config=AdvantageConfig(estimator="progpo-planpo")
    )
    np.testing.assert_allclose(out.episode[:2], z([1.0, 0.5]), rtol=1e-12)  # coverage rates 2/2, 1/2
    np.testing.assert_allclose(out.episode[2:4], z([1.0, 1 / 3]), rtol=1e-12)  # PlanPO: T = 1, 3
    # partial scores, no success: not all-failed (ProGPO leaves it) and no success (PlanPO too)
    assert out.episode[4:].tolist() == [0.0, 0.0]
    assert out.all_failed.tolist() == [True, False, False]
    assert out.acted["planpo_groups"] == 1.0


# ----------------------------------------------------------------------------- HGPO
def _depth_example():
    """Three trajectories of one group: 0 and 1 share the history (s0, s1), 2 reaches s1 from s5."""
    step_traj = np.array([0, 0, 1, 1, 2, 2])
    step_t = np.array([0, 1, 0, 1, 0, 1])
    states = np.array([0, 1, 0, 1, 5, 1])
    returns = np.array([0.95, 1.0, 0.0, 0.0, 0.475, 0.5])
    return np.zeros(6, dtype=int), step_traj, step_t, states, returns


def test_hgpo_power_fusion_with_an_empty_depth():
    group, traj, t, s, ret = _depth_example()
    got = hgpo_history_advantages(ret, group, traj, t, s, depth=2)
    # t = 1: depth 0 cluster {all three at s1}: z of [1, 0, 0.5]; depth 1 {0, 1} (history s0, s1): z of [1, 0];
    # depth 2: empty (t = 1 has one earlier state); weights (0 + 1)^1 = 1 and (1 + 1)^1 = 2
    d0, d1 = z([1.0, 0.0, 0.5]), z([1.0, 0.0])
    np.testing.assert_allclose(got[[1, 3, 5]], [(d0[0] + 2 * d1[0]) / 3, (d0[1] + 2 * d1[1]) / 3, d0[2]], rtol=1e-12)
    # t = 0: {0, 1} at s0 share depth 0; trajectory 2 starts alone at s5
    np.testing.assert_allclose(got[[0, 2, 4]], [*z([0.95, 0.0]), 0.0], rtol=1e-12)
    # alpha 0: the depths weigh the same
    flat = hgpo_history_advantages(ret, group, traj, t, s, depth=2, alpha=0.0)
    assert flat[1] == pytest.approx((d0[0] + d1[0]) / 2)


def test_hgpo_inverse_variance_fusion():
    group, traj, t, s, ret = _depth_example()
    got = hgpo_history_advantages(ret, group, traj, t, s, depth=1, fusion="inverse-variance")
    # weights n_k / (s_k^2 + eps): depth 0: 3 / (1/6); depth 1: 2 / (1/4)
    w0, w1 = 3 / (1 / 6 + EPS), 2 / (1 / 4 + EPS)
    d0, d1 = z([1.0, 0.0, 0.5]), z([1.0, 0.0])
    np.testing.assert_allclose(got[1], (w0 * d0[0] + w1 * d1[0]) / (w0 + w1), rtol=1e-12)
    np.testing.assert_allclose(got[5], d0[2], atol=1e-15)
    with pytest.raises(ValueError, match="fusion"):
        hgpo_history_advantages(ret, group, traj, t, s, fusion="mean")  # type: ignore[arg-type]  # a wrong value on purpose: it must be refused


def test_hgpo_depth_zero_is_gigpo():
    rng = np.random.default_rng(0)
    n_traj = 12
    lengths = rng.integers(1, 7, n_traj)
    step_traj = np.repeat(np.arange(n_traj), lengths)
    step_t = np.concatenate([np.arange(k) for k in lengths])
    states = rng.integers(0, 4, step_traj.size)
    r = (rng.random(n_traj) < 0.4).astype(float)
    group = np.repeat(np.arange(3), 4)
    fv = rng.random(step_traj.size) < 0.5
    for base in ("gigpo", "progpo-gigpo"):
        want = step_advantages(r, group, step_traj, step_t, states, fv, config=AdvantageConfig(estimator=base))
        got = step_advantages(
            r,
            group,
            step_traj,
            step_t,
            states,
            fv,
            config=AdvantageConfig(estimator=base.replace("gigpo", "hgpo"), hgpo_depth=0),
        )
        np.testing.assert_array_equal(got.steps, want.steps)
    deeper = step_advantages(r, group, step_traj, step_t, states, fv, config=AdvantageConfig(estimator="hgpo"))
    assert not np.array_equal(deeper.steps, want.steps)  # depths 1..2 change something on this batch
    assert 0 < deeper.acted["hgpo_deep_steps"] <= deeper.acted["hgpo_peer_steps"] <= step_traj.size


def test_history_clusters_need_the_whole_history():
    # (s0, s1) vs (s5, s1): same state, different history; a trajectory that starts at t = 0 has no depth 1
    c = history_clusters(np.zeros(4, int), np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), np.array([0, 1, 5, 1]), 2)
    assert c.ids[0, 1] == c.ids[0, 3] and c.ids[1, 1] != c.ids[1, 3]
    assert c.ids[1, 0] == -1 and c.ids[2].tolist() == [-1, -1, -1, -1]
    # different groups never share a cluster
    c = history_clusters(np.array([0, 1]), np.array([0, 1]), np.array([0, 0]), np.array([3, 3]), 0)
    assert c.count[0].tolist() == [1.0, 1.0]


def test_potential_credit_reconstruction():
    traj, t = np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])
    states = np.array([0, 1, 0, 2])
    rew = np.array([0.0, 1.0, 0.0, 0.0])
    ret = np.array([0.95, 1.0, 0.0, 0.0])
    c = history_clusters(np.zeros(4, int), traj, t, states, 1)
    got = potential_credit(ret, rew, traj, t, c, gamma=0.95)
    # Phi(s0) = mean(0.95, 0) = 0.475 (two visits); s1, s2 alone: their own returns 1 and 0
    np.testing.assert_allclose(got, [0.95 * 1.0 - 0.475, 1.0 + 0.0 - 1.0, 0.95 * 0.0 - 0.475, 0.0], atol=1e-12)
    cfg = AdvantageConfig(estimator="hgpo", potential_credit=True, hgpo_depth=1)
    out = step_advantages(np.array([1.0, 0.0]), np.array([0, 0]), traj, t, states, config=cfg)
    plain = step_advantages(
        np.array([1.0, 0.0]), np.array([0, 0]), traj, t, states, config=AdvantageConfig(estimator="hgpo", hgpo_depth=1)
    )
    np.testing.assert_allclose(out.steps - plain.steps, got, atol=1e-12)
    with pytest.raises(ValueError, match="potential_credit"):
        AdvantageConfig(estimator="gigpo", potential_credit=True)


def test_progpo_hgpo_uses_first_visits_in_all_failed_groups():
    group, traj, t, s, _ = _depth_example()
    fv = np.array([True, True, True, False, True, False])
    out = step_advantages(
        np.zeros(3), np.zeros(3, int), traj, t, s, fv, config=AdvantageConfig(estimator="progpo-hgpo", hgpo_depth=1)
    )
    ret = np.array([1 + 0.95, 1.0, 1.0, 0.0, 1.0, 0.0])  # first-visit returns, gamma 0.95
    step = hgpo_history_advantages(ret, group, traj, t, s, depth=1)
    np.testing.assert_allclose(out.steps, out.episode[traj] + step, rtol=1e-12)
    np.testing.assert_allclose(out.episode, z([1.0, 0.5, 0.5]), rtol=1e-12)  # coverage rates
    # with the potential credit, the rewards of an all-failed group are its first visits too
    credit = step_advantages(
        np.zeros(3),
        np.zeros(3, int),
        traj,
        t,
        s,
        fv,
        config=AdvantageConfig(estimator="progpo-hgpo", hgpo_depth=1, potential_credit=True),
    )
    want = potential_credit(ret, fv.astype(float), traj, t, history_clusters(group, traj, t, s, 1), gamma=0.95)
    np.testing.assert_allclose(credit.steps - out.steps, want, atol=1e-12)


# ----------------------------------------------------------------------------- config, trainer
def test_config_fields_and_errors():
    assert {"planpo", "hgpo", "progpo-planpo", "progpo-hgpo"} <= set(ESTIMATORS)
    cfg = TrainConfig(estimator="progpo-hgpo", hgpo_depth=3, hgpo_fusion="inverse-variance", potential_credit=True)
    adv = cfg.advantage_config()
    opts = adv.base_options
    assert (opts.depth, opts.fusion, opts.potential_credit) == (3, "inverse-variance", True)
    for bad, match in [
        (dict(hgpo_fusion="mean"), "hgpo_fusion"),
        (dict(hgpo_depth=-1), "hgpo_depth"),
        (dict(estimator="gigpo", potential_credit=True), "potential_credit"),
        (dict(success_threshold=-0.5), "success_threshold"),
    ]:
        with pytest.raises(ConfigError, match=match):
            TrainConfig(**bad)


def test_trainer_turn_weight_is_the_schedule_in_generate_mode_only():
    from trainers.loop.credit import CreditAssigner

    gen = CreditAssigner(
        credit_section(TrainConfig(estimator="planpo", policy_mode="generate", iterations=3, warm_start="none"))
    )
    assert [gen.config_at(i).base_options.alpha for i in (1, 2, 3)] == pytest.approx([0.1, 0.075, 0.05])
    score = CreditAssigner(credit_section(TrainConfig(estimator="progpo-planpo", policy_mode="score", iterations=3)))
    assert [score.config_at(i).base_options.alpha for i in (1, 2, 3)] == [0.0, 0.0, 0.0]


@pytest.mark.slow
@pytest.mark.parametrize(
    "estimator,extra",
    [
        ("planpo", []),
        ("progpo-planpo", []),
        ("planpo", ["--policy-mode", "generate", "--max-new-tokens", "8"]),
        ("hgpo", []),
        ("progpo-hgpo", []),
        ("hgpo", ["--hgpo-fusion", "inverse-variance", "--potential-credit"]),
    ],
)
def test_two_iterations_on_rooms(tmp_path, estimator, extra):
    from trainers.cli.train import main

    out = tmp_path / "run"
    assert (
        main(
            [
                *"--env rooms --model tiny --estimator".split(),
                estimator,
                *"--iterations 2 --num-groups 2 --group-size 4 --max-steps 8 --eval-episodes 4 --output-dir".split(),
                str(out),
                *"--no-progress-bars --no-tensorboard --no-baseline-random".split(),
                *extra,
            ]
        )
        == 0
    )
    train = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in train if r.get("kind") == "train"]
    assert [r["iteration"] for r in train] == [1, 2]
    assert all("update/steps" in r and np.isfinite(r["adv/abs_mean"]) for r in train)
    summary = (out / "summary.md").read_text()
    if "planpo" in estimator:
        alphas = [r["adv/planpo_turn_alpha"] for r in train]
        assert alphas == ([0.1, 0.05] if "generate" in extra else [0.0, 0.0])
        assert "## Where PlanPO acted" in summary
        assert ("turn term was off" in summary) == ("generate" not in extra)
    else:
        assert all(0.0 <= r["adv/hgpo_deep_step_frac"] <= r["adv/hgpo_peer_step_frac"] <= 1.0 for r in train)
        assert "## Where HGPO acted" in summary
        assert ("reconstructed potential credit" in summary) == ("--potential-credit" in extra)
    if estimator.startswith("progpo-"):
        assert "## Where ProGPO acted" in summary


@pytest.mark.parametrize("seed", range(6))
def test_history_clusters_are_the_partition_by_group_state_and_last_states(seed):
    """Against a brute-force reference on random batches (steps in any order, several groups,
    ragged trajectories): at depth k two steps share a cluster exactly when they have the same
    group, the same o_t and the same k states before it, all of which exist; a step without k
    earlier states has no cluster (-1); count is its cluster's size."""
    rng = np.random.default_rng(seed)
    n_traj, depth = int(rng.integers(2, 7)), int(rng.integers(0, 4))
    lengths = rng.integers(1, 7, size=n_traj)
    group_of_traj = rng.integers(0, 3, size=n_traj)
    traj = np.concatenate([np.full(n, j) for j, n in enumerate(lengths)])
    t = np.concatenate([np.arange(n) for n in lengths])
    states = rng.integers(0, 3, size=traj.size) * 7 + 100  # sparse, non-dense state ids
    perm = rng.permutation(traj.size)
    traj, t, states = traj[perm], t[perm], states[perm]
    grp = group_of_traj[traj]
    c = history_clusters(grp, traj, t, states, depth)
    assert c.ids.shape == c.count.shape == (depth + 1, traj.size)
    at = {(int(j), int(k)): int(s) for j, k, s in zip(traj, t, states)}
    for k in range(depth + 1):
        keys = []
        for i in range(traj.size):
            past = [at.get((int(traj[i]), int(t[i]) - d)) for d in range(k + 1)]
            keys.append(None if None in past else (int(grp[i]), *past))
        for i in range(traj.size):
            if keys[i] is None:
                assert c.ids[k, i] == -1 and c.count[k, i] == 0
                continue
            same = [j for j in range(traj.size) if keys[j] == keys[i]]
            assert c.count[k, i] == len(same)
            assert {int(c.ids[k, j]) for j in same} == {int(c.ids[k, i])} and c.ids[k, i] >= 0
            others = {int(c.ids[k, j]) for j in range(traj.size) if keys[j] is not None and keys[j] != keys[i]}
            assert int(c.ids[k, i]) not in others
        valid = c.ids[k][c.ids[k] >= 0]
        assert valid.size == 0 or set(valid.tolist()) == set(range(int(valid.max()) + 1))  # dense ids


def test_history_clusters_of_no_step_and_a_negative_depth():
    empty = history_clusters(np.zeros(0, int), np.zeros(0, int), np.zeros(0, int), np.zeros(0, int), 2)
    assert empty.ids.shape == (3, 0) and empty.count.shape == (3, 0)
    with pytest.raises(ValueError, match="depth must be >= 0, got -1"):
        history_clusters(np.zeros(1, int), np.zeros(1, int), np.zeros(1, int), np.zeros(1, int), -1)


@pytest.mark.parametrize("seed", range(4))
def test_potential_credit_against_its_formula_on_random_batches(seed):
    """r_t + gamma * Phi(s_{t+1}) - Phi(s_t), Phi the inverse-variance-weighted fusion over depths of
    each step's cluster mean return (a cluster of one weighs 0), a step without peers keeping its
    own return as Phi, and Phi after the last step 0; steps in any order."""
    from trainers.advantages.segments import discounted_returns

    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 5, size=4)
    traj = np.concatenate([np.full(n, j) for j, n in enumerate(lengths)])
    t = np.concatenate([np.arange(n) for n in lengths])
    states = rng.integers(0, 2, size=traj.size)
    rew = np.round(rng.random(traj.size), 2)
    gamma, eps, depth = 0.9, 1e-6, int(rng.integers(0, 3))
    ret = discounted_returns(rew, traj, t, gamma)
    perm = rng.permutation(traj.size)
    traj, t, states, rew, ret = traj[perm], t[perm], states[perm], rew[perm], ret[perm]
    c = history_clusters(np.zeros(traj.size, int), traj, t, states, depth)
    got = potential_credit(ret, rew, traj, t, c, gamma=gamma, eps=eps)
    phi = np.empty(traj.size)
    for i in range(traj.size):
        num = den = 0.0
        for k in range(depth + 1):
            members = [j for j in range(traj.size) if c.ids[k, i] >= 0 and c.ids[k, j] == c.ids[k, i]]
            if len(members) > 1:
                values = ret[members]
                w = len(members) / (values.var() + eps)
                num, den = num + w * values.mean(), den + w
        phi[i] = num / den if den > 0 else ret[i]
    at = {(int(a), int(b)): phi[i] for i, (a, b) in enumerate(zip(traj, t))}
    want = [rew[i] + gamma * at.get((int(traj[i]), int(t[i]) + 1), 0.0) - phi[i] for i in range(traj.size)]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_planpo_turn_term_z_scores_each_group_and_turn_index_apart():
    from trainers.advantages.planpo import planpo_alpha, planpo_turn_advantages

    r = np.array([1.0, 1.0, 0.0, 0.6, 0.6])
    traj_group = np.array([0, 0, 0, 1, 1])
    traj = np.array([0, 1, 2, 0, 3, 4, 3, 4])
    t = np.array([0, 0, 0, 1, 0, 0, 1, 1])
    length = np.array([10.0, 40.0, 5.0, 4.0, 0.0, 3.0, 2.0, 6.0])
    got = planpo_turn_advantages(r, traj_group, traj, t, length, success_threshold=0.5)
    np.testing.assert_allclose(got[[0, 1, 2]], _z([0.1, 0.025, 0.0]), rtol=1e-9)  # group 0, turn 0
    assert got[3] == 0.0  # group 0, turn 1: one step
    np.testing.assert_allclose(got[[4, 5]], _z([0.6, 0.2]), rtol=1e-9)  # group 1, turn 0 (length 0 read as 1)
    np.testing.assert_allclose(got[[6, 7]], _z([0.3, 0.1]), rtol=1e-9)  # group 1, turn 1
    strict = planpo_turn_advantages(r, traj_group, traj, t, length)  # threshold 1: group 1 has no success
    assert np.all(strict[4:] == 0.0)
    np.testing.assert_allclose(
        planpo_turn_advantages(r, traj_group, traj, t, length, success_threshold=0.5, norm="mean")[[4, 5]],
        [0.2, -0.2],
        rtol=1e-9,
    )
    assert planpo_turn_advantages(r, traj_group, traj[:0], t[:0], length[:0]).shape == (0,)
    with pytest.raises(ValueError, match="need one entry per step"):
        planpo_turn_advantages(r, traj_group, traj, t, length[:3])
    assert planpo_alpha(2, 3, start=1.0, end=0.0) == 0.5 and planpo_alpha(3, 3, start=1.0, end=0.0) == 0.0
    for bad in ((0, 3), (4, 3), (1, 0)):
        with pytest.raises(ValueError, match="iteration must be in"):
            planpo_alpha(*bad)


def _z(x, eps=1e-6):
    x = np.asarray(x, dtype=float)
    return (x - x.mean()) / (x.std() + eps)
