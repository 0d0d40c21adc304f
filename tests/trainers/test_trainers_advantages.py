"""Advantage estimators: hand-computed examples for every estimator / option, and properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainers.advantages import (
    ESTIMATORS,
    AdvantageConfig,
    anchor_advantages,
    discounted_returns,
    episode_advantages,
    factorize,
    group_scope_first_visit,
    grpo_advantages,
    progpo_episode_advantages,
    progpo_episode_advantages_batched,
    rloo_advantages,
    step_advantages,
)

EPS = 1e-6


# ----------------------------------------------------------------------------- hand-computed
def test_grpo_hand_computed():
    # mean 0.25, population std sqrt(0.1875) = 0.4330127
    a = grpo_advantages(np.array([1.0, 0.0, 0.0, 0.0]))
    np.testing.assert_allclose(
        a,
        [0.75 / (0.4330127 + EPS), -0.25 / (0.4330127 + EPS), -0.25 / (0.4330127 + EPS), -0.25 / (0.4330127 + EPS)],
        rtol=1e-6,
    )
    np.testing.assert_allclose(
        grpo_advantages(np.array([1.0, 0.0, 0.0, 0.0]), norm="mean"), [0.75, -0.25, -0.25, -0.25]
    )
    assert np.all(grpo_advantages(np.zeros(5)) == 0.0)


def test_rloo_hand_computed():
    np.testing.assert_allclose(rloo_advantages(np.array([1.0, 0.0, 0.0, 0.0])), [1.0, -1 / 3, -1 / 3, -1 / 3])
    np.testing.assert_allclose(rloo_advantages(np.array([0.5, 1.0])), [-0.5, 0.5])
    assert rloo_advantages(np.array([0.7])).tolist() == [0.0]


def test_progpo_all_failed_uses_progress():
    # P = [0.2, 0.4, 0.6]: mean 0.4, std sqrt(0.08 / 3) = 0.1632993
    a = progpo_episode_advantages(np.zeros(3), np.array([0.2, 0.4, 0.6]))
    np.testing.assert_allclose(a, [-0.2 / 0.1632993, 0.0, 0.2 / 0.1632993], rtol=1e-5, atol=1e-12)
    a2 = progpo_episode_advantages(np.zeros(3), np.array([0.2, 0.4, 0.6]), lam=2.0)
    np.testing.assert_allclose(a2, 2 * a)


def test_progpo_success_group_is_base():
    r, p = np.array([1.0, 0.0, 0.0]), np.array([0.1, 0.9, 0.5])
    np.testing.assert_array_equal(progpo_episode_advantages(r, p, base="grpo"), grpo_advantages(r))
    np.testing.assert_array_equal(progpo_episode_advantages(r, p, base="gigpo"), grpo_advantages(r))
    np.testing.assert_array_equal(progpo_episode_advantages(r, p, base="rloo"), rloo_advantages(r))


def test_progpo_thresholds():
    p = np.array([0.1, 0.5])
    # tau_R: max outcome 5e-4 < 1e-3 -> all failed -> progress; 2e-3 -> GRPO on outcomes
    np.testing.assert_allclose(progpo_episode_advantages(np.array([5e-4, 0.0]), p), [-1.0, 1.0], rtol=1e-4)
    np.testing.assert_allclose(progpo_episode_advantages(np.array([2e-3, 0.0]), p), [1.0, -1.0], rtol=1e-3)
    # tau_P: std P = 5e-5 < 1e-4 -> zeros; std 2e-4 -> used
    assert np.all(progpo_episode_advantages(np.zeros(2), np.array([0.3, 0.3001])) == 0.0)
    np.testing.assert_allclose(progpo_episode_advantages(np.zeros(2), np.array([0.3, 0.3004])), [-1, 1], rtol=1e-2)


def test_progpo_rejects_bad_input():
    with pytest.raises(ValueError, match="base"):
        progpo_episode_advantages(np.zeros(2), np.zeros(2), base="ppo")
    with pytest.raises(ValueError, match="1-D"):
        progpo_episode_advantages(np.zeros(2), np.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        progpo_episode_advantages(np.array([np.nan, 0.0]), np.zeros(2))
    with pytest.raises(ValueError, match="estimator"):
        AdvantageConfig(estimator="ppo")


def _gigpo_example():
    # traj 0: states a, b; success at t=1. traj 1: states a, c, b; failure.
    return dict(
        outcomes=np.array([1.0, 0.0]),
        traj_group=np.array([0, 0]),
        step_traj=np.array([0, 0, 1, 1, 1]),
        step_index=np.array([0, 1, 0, 1, 2]),
        state_ids=factorize(["a", "b", "a", "c", "b"]),
    )


def test_gigpo_hand_computed():
    # returns (gamma .95): traj0 [.95, 1], traj1 [0, 0, 0]. anchors a: {.95, 0} -> +-1,
    # b: {1, 0} -> +-1, c alone -> 0. episode A^E = [+1, -1].
    out = step_advantages(**_gigpo_example(), config=AdvantageConfig(estimator="gigpo"))
    np.testing.assert_allclose(out.steps, [2, 2, -2, -1, -2], rtol=1e-5)
    half = step_advantages(**_gigpo_example(), config=AdvantageConfig(estimator="gigpo", omega=0.5))
    np.testing.assert_allclose(half.steps, [1.5, 1.5, -1.5, -1, -1.5], rtol=1e-5)
    mean = step_advantages(**_gigpo_example(), config=AdvantageConfig(estimator="gigpo", norm="mean"))
    np.testing.assert_allclose(mean.steps, [0.975, 1.0, -0.975, -0.5, -1.0], rtol=1e-9)
    # gamma = 0.5: anchor a returns {0.5, 0} -> still +-1 with mean_std; check with norm="mean"
    g5 = step_advantages(**_gigpo_example(), config=AdvantageConfig(estimator="gigpo", norm="mean", gamma=0.5))
    np.testing.assert_allclose(g5.steps, [0.75, 1.0, -0.75, -0.5, -1.0], rtol=1e-9)


def _two_failed() -> dict:
    """One group of two failed trajectories of two steps each."""
    return dict(
        outcomes=np.zeros(2),
        traj_group=np.array([0, 0]),
        step_traj=np.array([0, 0, 1, 1]),
        step_index=np.array([0, 1, 0, 1]),
    )


def test_progpo_gigpo_step_level_hand_computed():
    # all failed. traj0: a -> b -> new (fv T, T). traj1: a -> a -> a ("look" twice, fv F, F).
    # P = [1, 0] -> A^E = [+1, -1]. fv returns: traj0 [1.95, 1], traj1 [0, 0].
    # anchor a = {1.95, 0, 0}: mean .65, std .9192388 -> [1.4142, -.7071, -.7071]; b alone -> 0.
    kw = dict(
        **_two_failed(), state_ids=factorize(["a", "b", "a", "a"]), first_visit=np.array([True, True, False, False])
    )
    out = step_advantages(**kw, config=AdvantageConfig(estimator="progpo-gigpo"))
    np.testing.assert_allclose(
        out.steps, [1 + 1.3 / 0.9192388, 1.0, -1 - 0.65 / 0.9192388, -1 - 0.65 / 0.9192388], rtol=1e-5
    )
    np.testing.assert_allclose(out.coverage, [1.0, 0.0])
    assert out.all_failed.tolist() == [True]
    # the same steps under plain GiGPO: everything is 0 (the credit trap)
    assert np.all(step_advantages(**kw, config=AdvantageConfig(estimator="gigpo")).steps == 0.0)


def test_progpo_gigpo_success_group_equals_gigpo():
    ex = _gigpo_example()
    fv = np.array([True, False, True, True, False])
    a = step_advantages(**ex, first_visit=fv, config=AdvantageConfig(estimator="progpo-gigpo"))
    b = step_advantages(**ex, config=AdvantageConfig(estimator="gigpo"))
    np.testing.assert_array_equal(a.steps, b.steps)


def test_coverage_rate_vs_count():
    # traj0: 4 steps, 3 first visits (rate .75, count 3); traj1: 2 steps, 1 (.5, 1); traj2: 1 step, 1 (1, 1)
    kw = dict(
        outcomes=np.zeros(3),
        traj_group=np.zeros(3, int),
        step_traj=np.array([0, 0, 0, 0, 1, 1, 2]),
        step_index=np.array([0, 1, 2, 3, 0, 1, 0]),
        first_visit=np.array([1, 1, 0, 1, 1, 0, 1], bool),
    )
    rate = step_advantages(**kw, config=AdvantageConfig(estimator="progpo-grpo", coverage="rate"))
    np.testing.assert_allclose(rate.coverage, [0.75, 0.5, 1.0])
    np.testing.assert_allclose(rate.episode, [0.0, -1.2247449, 1.2247449], rtol=1e-5, atol=1e-9)
    count = step_advantages(**kw, config=AdvantageConfig(estimator="progpo-grpo", coverage="count"))
    np.testing.assert_allclose(count.coverage, [3, 1, 1])
    np.testing.assert_allclose(count.episode, [1.4142136, -0.7071068, -0.7071068], rtol=1e-5)
    np.testing.assert_allclose(count.steps, count.episode[kw["step_traj"]])


def test_scope_group_hand_computed():
    # both start in s0. traj0: s0 -> s1 -> s2; traj1: s0 -> s2 -> s3 (all new in their episodes).
    # group scope: s2 first reached by traj1 at t=1, so traj0's s2 (t=2) does not count:
    # P = [0.5, 1.0] -> [-1, +1]. episode scope: P = [1, 1] -> 0.
    kw = dict(
        **_two_failed(), state_ids=np.array([0, 1, 0, 2]), next_ids=np.array([1, 2, 2, 3]), first_visit=np.ones(4, bool)
    )
    grp = step_advantages(**kw, config=AdvantageConfig(estimator="progpo-grpo", scope="group"))
    np.testing.assert_allclose(grp.coverage, [0.5, 1.0])
    np.testing.assert_allclose(grp.episode, [-1, 1], rtol=1e-5)
    epi = step_advantages(**kw, config=AdvantageConfig(estimator="progpo-grpo", scope="episode"))
    assert np.all(epi.steps == 0.0)
    # returning to the reset state never counts, even if the episode flag says so
    fv = group_scope_first_visit(
        np.ones(1, bool), np.array([0]), np.array([0]), np.array([0]), np.array([5]), np.array([5])
    )
    assert fv.tolist() == [False]


def test_discounted_returns_and_anchor_helpers():
    # steps given out of order: traj 1 = [1, 0, 2], traj 0 = [0, 1]
    r = discounted_returns(
        np.array([2.0, 1.0, 1.0, 0.0, 0.0]), np.array([1, 0, 1, 0, 1]), np.array([2, 1, 0, 0, 1]), gamma=0.5
    )
    np.testing.assert_allclose(r, [2.0, 1.0, 1.5, 0.5, 1.0])
    with pytest.raises(ValueError, match="share"):
        discounted_returns(np.ones(2), np.array([0, 0]), np.array([1, 1]))
    np.testing.assert_allclose(
        anchor_advantages(np.array([3.0, 1.0, 5.0]), np.array([0, 0, 1]), norm="mean"), [1, -1, 0]
    )


def test_step_advantages_errors():
    with pytest.raises(ValueError, match="state_ids"):
        step_advantages(
            np.zeros(1), np.zeros(1), np.zeros(1, int), np.zeros(1, int), config=AdvantageConfig(estimator="gigpo")
        )
    with pytest.raises(ValueError, match="first_visit"):
        step_advantages(
            np.zeros(1),
            np.zeros(1),
            np.zeros(1, int),
            np.zeros(1, int),
            config=AdvantageConfig(estimator="progpo-grpo"),
        )
    with pytest.raises(ValueError, match="step_traj"):
        step_advantages(
            np.zeros(1), np.zeros(1), np.array([3]), np.zeros(1, int), config=AdvantageConfig(estimator="grpo")
        )


# ----------------------------------------------------------------------------- properties
BASES = ["grpo", "rloo", "gigpo"]
floats01 = st.floats(0.0, 1.0, allow_nan=False)


@st.composite
def group(draw, min_g=2, max_g=8):
    g = draw(st.integers(min_g, max_g))
    r = np.array(draw(st.lists(floats01, min_size=g, max_size=g)))
    p = np.array(draw(st.lists(floats01, min_size=g, max_size=g)))
    return r, p


@settings(max_examples=150, deadline=None)
@given(group(), st.sampled_from(BASES), st.integers(0, 7))
def test_prop_success_groups_untouched(gp, base, k):
    r, p = gp
    r[k % r.size] = max(r[k % r.size], 1e-3)  # at least one success
    base_adv = rloo_advantages(r) if base == "rloo" else grpo_advantages(r)
    np.testing.assert_array_equal(progpo_episode_advantages(r, p, base=base), base_adv)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 8), floats01, st.sampled_from(BASES), st.floats(0.0, 9.99e-4))
def test_prop_all_failed_equal_coverage_is_zero(g, cov, base, fail):
    r = np.full(g, fail)
    assert np.all(progpo_episode_advantages(r, np.full(g, cov), base=base) == 0.0)


@settings(max_examples=150, deadline=None)
@given(group(), st.sampled_from(BASES), st.randoms(use_true_random=False))
def test_prop_order_invariance(gp, base, rnd):
    r, p = gp
    if rnd.random() < 0.5:
        r = np.zeros_like(r)  # exercise the all-failed branch half of the time
    perm = np.array(rnd.sample(range(r.size), r.size))
    a = progpo_episode_advantages(r, p, base=base)
    np.testing.assert_allclose(progpo_episode_advantages(r[perm], p[perm], base=base), a[perm], atol=1e-9)


@settings(max_examples=100, deadline=None)
@given(st.lists(group(2, 6), min_size=1, max_size=6), st.sampled_from(BASES))
def test_prop_batched_equals_per_group(groups, base):
    ref = [progpo_episode_advantages(r, p, base=base) for r, p in groups]
    flat_r = np.concatenate([r for r, _ in groups])
    flat_p = np.concatenate([p for _, p in groups])
    gid = np.repeat(np.arange(len(groups)), [r.size for r, _ in groups])
    flat = episode_advantages(flat_r, gid, flat_p, estimator=f"progpo-{base}")
    np.testing.assert_allclose(flat, np.concatenate(ref), atol=1e-9)
    sizes = {r.size for r, _ in groups}
    if len(sizes) == 1:
        b = progpo_episode_advantages_batched(
            np.stack([r for r, _ in groups]), np.stack([p for _, p in groups]), base=base
        )
        np.testing.assert_allclose(b, np.stack(ref), atol=1e-9)


@st.composite
def step_batch(draw):
    """Random groups of trajectories with random states / first-visit flags."""
    n_groups = draw(st.integers(1, 4))
    outcomes, tgroup, straj, sidx, states, nxt = [], [], [], [], [], []
    n = 0
    for g in range(n_groups):
        size = draw(st.integers(1, 4))
        fail = draw(st.booleans())
        for _ in range(size):
            outcomes.append(0.0 if fail else draw(floats01))
            tgroup.append(g * 10)
            length = draw(st.integers(1, 5))
            path = draw(st.lists(st.integers(0, 4), min_size=length + 1, max_size=length + 1))
            for t in range(length):
                straj.append(n)
                sidx.append(t)
                states.append(path[t])
                nxt.append(path[t + 1])
            n += 1
    straj_a = np.array(straj)
    states_a, nxt_a = np.array(states), np.array(nxt)
    fv = np.zeros(len(straj), bool)
    for i in range(n):  # episode-scope first visit, as FirstVisitCoverage computes it
        seen: set[int] = set()
        for k in np.flatnonzero(straj_a == i):
            if not seen:
                seen.add(states_a[k])
            fv[k] = nxt_a[k] not in seen
            seen.add(nxt_a[k])
    return dict(
        outcomes=np.array(outcomes),
        traj_group=np.array(tgroup),
        step_traj=straj_a,
        step_index=np.array(sidx),
        state_ids=states_a,
        next_ids=nxt_a,
        first_visit=fv,
    )


CONFIGS = [
    AdvantageConfig(estimator=e) for e in ("grpo", "rloo", "gigpo", "progpo-grpo", "progpo-rloo", "progpo-gigpo")
] + [AdvantageConfig(estimator="progpo-gigpo", scope="group", coverage="count", norm="mean", lam=0.5, omega=0.3)]


def _subset(batch, traj_sel):
    """Steps of the given trajectories, renumbered (and reordered as traj_sel says)."""
    remap = {int(old): new for new, old in enumerate(traj_sel)}
    keep = np.isin(batch["step_traj"], traj_sel)
    out = {k: batch[k][keep] for k in ("step_index", "state_ids", "next_ids", "first_visit")}
    out["step_traj"] = np.array([remap[int(i)] for i in batch["step_traj"][keep]], dtype=np.int64)
    out["outcomes"] = batch["outcomes"][traj_sel]
    out["traj_group"] = batch["traj_group"][traj_sel]
    return out, keep


@settings(max_examples=80, deadline=None)
@given(step_batch(), st.sampled_from(CONFIGS), st.randoms(use_true_random=False))
def test_prop_step_level_order_and_batching(batch, cfg, rnd):
    full = step_advantages(**batch, config=cfg).steps
    n = batch["outcomes"].size
    # trajectory order invariance
    perm = np.array(rnd.sample(range(n), n))
    sub, keep = _subset(batch, perm)
    permuted = step_advantages(**sub, config=cfg).steps
    inv = np.empty(n, int)
    inv[perm] = np.arange(n)
    # map each permuted step back: same (original traj, t)
    orig = {(int(t), int(s)): a for t, s, a in zip(batch["step_traj"], batch["step_index"], full)}
    back = [orig[(int(perm[t]), int(s))] for t, s in zip(sub["step_traj"], sub["step_index"])]
    np.testing.assert_allclose(permuted, back, atol=1e-9)
    # batched == per group
    for g in np.unique(batch["traj_group"]):
        sel = np.flatnonzero(batch["traj_group"] == g)
        sub, keep = _subset(batch, sel)
        np.testing.assert_allclose(step_advantages(**sub, config=cfg).steps, full[keep], atol=1e-9)


# ----------------------------------------------------------------------------- coverage signal, end to end
class _RolePolicy:
    """Scripted members of one group: ``spam`` (only invalid commands), ``spam+move`` (a move to a
    new place, then an invalid command, ...), ``explore`` (a move to a new place every step)."""

    def __init__(self, roles: list[str]) -> None:
        self.roles = roles
        self.used: list[set[str]] = [set() for _ in roles]
        self.t = [0] * len(roles)

    def act(self, observations, infos, histories, seed=None):
        from agents.contract import StepOutput

        assert len(infos) == len(self.roles)  # every member plays until the step limit
        out = []
        for m, (role, info) in enumerate(zip(self.roles, infos)):
            t = self.t[m]
            self.t[m] += 1
            moves = [c for c in info["admissible_commands"] if c.startswith("go ")]
            fresh = [c for c in moves if c not in self.used[m]] or moves
            if role == "spam" or (role == "spam+move" and t % 2 == 1):
                cmd = f"dance like nobody watches {t}"  # a different invalid text every time
            else:
                cmd = fresh[0]
            self.used[m].add(cmd)
            out.append(StepOutput(action=cmd))
        return out


def _role_rollout(env_name: str, roles: list[str], steps: int):
    from trainers.envs import make_env_fn
    from trainers.rollouts.rollout import collect_rollout
    from wrappers import GroupVectorEnv

    envs = GroupVectorEnv(make_env_fn(env_name, "train", max_steps=steps), num_groups=1, group_size=len(roles))
    try:
        return collect_rollout(envs, _RolePolicy(roles), task_seeds=[3], seed=0)
    finally:
        envs.close()


@pytest.mark.parametrize("env_name", ["rooms", "alfworld"])
@pytest.mark.parametrize("estimator", ["progpo-grpo", "progpo-rloo", "progpo-gigpo"])
def test_invalid_action_spam_earns_less_than_valid_exploration(env_name, estimator):
    """All-failed group through the real wrappers + rollout: spamming invalid commands is never a
    first visit, so it gets a lower ProGPO advantage than valid exploring play."""
    if env_name == "alfworld":
        from progpo_envs.alfworld.engine import engine_available

        if not engine_available():
            pytest.skip("the ALFWorld engine is not installed")
    roles = ["spam", "spam+move", "explore", "explore"]
    steps = 6
    rollout = _role_rollout(env_name, roles, steps)
    assert [t.outcome for t in rollout.trajectories] == [0.0] * 4 and not any(t.won for t in rollout.trajectories)
    for s in rollout.steps:
        if not s.valid:  # a rejected command: same state, never new
            assert s.action.startswith("dance") and not s.first_visit and s.next_state == s.state
    inputs = rollout.advantage_inputs()
    out = step_advantages(**inputs, config=AdvantageConfig(estimator=estimator))
    assert out.all_failed.tolist() == [True]
    cov = out.coverage
    assert cov[0] == 0.0 and 0.0 < cov[1] < cov[2] == cov[3], cov
    ep = out.episode
    assert ep[0] < 0.0 and ep[0] < ep[1] < ep[2] == pytest.approx(ep[3]), ep
    per_traj = np.array([out.steps[inputs["step_traj"] == i].mean() for i in range(4)])
    assert per_traj[0] < per_traj[1] < min(per_traj[2], per_traj[3]), per_traj
    spam_steps = out.steps[inputs["step_traj"] == 0]
    explore_steps = out.steps[inputs["step_traj"] >= 2]
    assert spam_steps.max() < explore_steps.min()  # no spam step is worth an exploring one


def test_success_counts_wins_not_partial_scores():
    from trainers.rollouts.rollout import Rollout, Trajectory
    from trainers.runs.metrics import rollout_metrics

    trajs = [
        Trajectory(group=0, member=0, task_id="a", task_type="shoes", outcome=0.5, length=3, won=False),
        Trajectory(group=0, member=1, task_id="a", task_type="shoes", outcome=0.5, length=3, won=False),
        Trajectory(group=1, member=2, task_id="b", task_type="tea", outcome=1.0, length=3, won=True),
        Trajectory(group=1, member=3, task_id="b", task_type="tea", outcome=0.0, length=3, won=False),
    ]
    m = rollout_metrics(Rollout(trajectories=trajs[:1]))
    assert m["success"] == 0.0 and m["score_mean"] == 0.5 and "outcome_mean" not in m
    m = rollout_metrics(Rollout(trajectories=trajs))
    assert m["success"] == 0.25 and m["score_mean"] == pytest.approx(0.5)
    assert m["success_by_type/shoes"] == 0.0 and m["success_by_type/tea"] == 0.5
    assert m["all_failed_frac"] == 0.0  # a partial score is an outcome signal, not a failure
    trajs[0].outcome = trajs[1].outcome = 0.0
    assert rollout_metrics(Rollout(trajectories=trajs))["all_failed_frac"] == 0.5


def test_rollout_fills_won_from_info_or_from_the_outcome():
    import gymnasium as gym

    from agents.contract import StepOutput
    from trainers.rollouts.rollout import collect_rollout
    from wrappers import GroupVectorEnv

    class Score(gym.Env):
        observation_space = gym.spaces.Text(16)
        action_space = gym.spaces.Text(16)

        """One step; the final score is the action; ``report_won`` toggles ``info["won"]``."""

        def __init__(self, report_won: bool) -> None:
            self.report_won = report_won

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return "shop", {"task_id": "t", "task_type": "x"}

        def step(self, action):
            score = float(action)
            info = {"outcome": score, "valid_action": True}
            if self.report_won:
                info["won"] = score == 1.0
            return "done", score, True, False, info

    class Fixed:
        def act(self, observations, infos, histories, seed=None):
            return [StepOutput(action=a) for a in ("0.5", "1.0", "0.999")[: len(observations)]]

    for report_won in (True, False):
        envs = GroupVectorEnv(lambda: Score(report_won), num_groups=1, group_size=3)
        try:
            rollout = collect_rollout(envs, Fixed(), task_seeds=[0], seed=0)
        finally:
            envs.close()
        assert [t.outcome for t in rollout.trajectories] == [0.5, 1.0, 0.999]
        assert [t.won for t in rollout.trajectories] == [False, True, False]


# ----------------------------------------------------------------------------- benchmark controls
def _two_groups(outcomes):
    # group 0: trajectories 0, 1 (all failed); group 1: trajectories 2, 3 (one success); one step each
    return dict(
        outcomes=np.array(outcomes, dtype=float),
        traj_group=np.array([0, 0, 1, 1]),
        step_traj=np.array([0, 1, 2, 3]),
        step_index=np.zeros(4, dtype=int),
        first_visit=np.array([True, False, True, False]),
    )


def test_gate_always_adds_progress_in_every_group():
    from trainers.advantages import AdvantageConfig, step_advantages

    kw = _two_groups([0, 0, 1, 0])
    # P = [1, 0 | 1, 0] -> progress term (P - mean) / std = [+1, -1 | +1, -1]; GRPO on group 1 = [+1, -1]
    gated = step_advantages(**kw, config=AdvantageConfig(eps=0.0)).steps
    always = step_advantages(**kw, config=AdvantageConfig(gate="always")).steps
    np.testing.assert_allclose(gated, [1, -1, 1, -1])
    np.testing.assert_allclose(
        always, [1, -1, 2, -2], rtol=1e-5
    )  # all-failed group: same; success group: base + progress
    with pytest.raises(ValueError, match="gate"):
        AdvantageConfig(gate="sometimes")


def test_shuffled_coverage_permutes_within_all_failed_groups_only():
    from trainers.advantages import AdvantageConfig, shuffle_within_groups, step_advantages

    gid = np.array([0, 0, 0, 1, 1, 1])
    vals = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    mask = np.array([True] * 3 + [False] * 3)
    seen = set()
    for seed in range(30):
        out = shuffle_within_groups(vals, gid, mask, seed)
        np.testing.assert_allclose(out[3:], vals[3:])  # not all-failed: untouched
        assert sorted(out[:3]) == sorted(vals[:3])  # a permutation of the group's own values
        seen.add(tuple(out[:3]))
    assert len(seen) > 1
    kw = _two_groups([0, 0, 1, 0])
    moved = [
        step_advantages(**kw, config=AdvantageConfig(eps=0.0, shuffle_coverage=True, shuffle_seed=s)).steps
        for s in range(20)
    ]
    assert any(m[0] < 0 for m in moved) and any(m[0] > 0 for m in moved)  # the link to trajectories is broken
    assert all(list(m[2:]) == [1, -1] for m in moved)  # success group: GRPO as before


@pytest.mark.parametrize("gamma", [0.95, 0.5, 1.0])
def test_the_step_by_step_branch_of_discounted_returns_equals_the_padded_one(monkeypatch, gamma):
    """Very long, uneven trajectories take a step-by-step path (past PADDED_CELLS_MAX cells): the
    threshold lowered, a small shuffled batch must give the same returns as the padded matrix."""
    from trainers.advantages import segments

    rng = np.random.default_rng(3)
    lengths = [1, 7, 3, 12, 2]
    traj = np.concatenate([np.full(n, i) for i, n in enumerate(lengths)])
    t = np.concatenate([np.arange(n) for n in lengths])
    r = rng.normal(size=traj.size)
    perm = rng.permutation(traj.size)
    padded = segments.discounted_returns(r[perm], traj[perm], t[perm], gamma)
    monkeypatch.setattr(segments, "PADDED_CELLS_MAX", 0)
    stepwise = segments.discounted_returns(r[perm], traj[perm], t[perm], gamma)
    np.testing.assert_allclose(stepwise, padded, rtol=1e-12, atol=1e-12)
    by_hand = [
        sum(gamma ** (k - t0) * r[(traj == i) & (t == k)][0] for k in range(t0, lengths[i]))
        for i, t0 in zip(traj[perm], t[perm])
    ]
    np.testing.assert_allclose(stepwise, by_hand, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ every public formula, by hand
def _z(x, eps=1e-6):
    x = np.asarray(x, dtype=float)
    return (x - x.mean()) / (x.std() + eps)


def test_progress_advantages_by_hand_per_row_with_its_gate_scale_and_norm():
    from trainers.advantages import progress_advantages

    p = np.array([[0.0, 0.5, 1.0, 0.5], [0.2, 0.2, 0.2, 0.2], [0.1, 0.10005, 0.1, 0.1]])
    got = progress_advantages(p, lam=2.0)
    assert got.shape == (3, 4)
    np.testing.assert_allclose(got[0], 2.0 * _z(p[0]), rtol=1e-12)
    assert np.all(got[1] == 0.0) and np.all(got[2] == 0.0)  # std 0 and std 2.2e-5 < tau_P: gated
    gate_off = progress_advantages(p, tau_p=0.0)
    np.testing.assert_allclose(gate_off[2], _z(p[2]), rtol=1e-9)  # no gate: the tiny spread is scaled up
    at_gate = np.array([0.0, 0.5])  # std exactly tau_P: the gate is std >= tau_P, so the signal passes
    np.testing.assert_allclose(progress_advantages(at_gate, tau_p=0.25, eps=0.0), [-1.0, 1.0], rtol=1e-12)
    np.testing.assert_allclose(progress_advantages(p[0], norm="mean"), p[0] - p[0].mean(), rtol=1e-12)
    np.testing.assert_allclose(progress_advantages(p[0], eps=1.0), (p[0] - 0.5) / (p[0].std() + 1.0), rtol=1e-12)
    with pytest.raises(ValueError, match="coverage contains NaN"):
        progress_advantages(np.array([0.1, np.nan]))
    with pytest.raises(ValueError, match="norm must be"):
        progress_advantages(p, norm="std")


def test_episode_advantages_of_every_estimator_on_ragged_groups():
    from trainers.advantages import episode_advantages

    r = np.array([1.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0])
    g = np.array([7, 7, 7, 3, 3, 3, 9])  # ids in any order; group 9 has one member
    cov = np.array([0.2, 0.4, 0.1, 0.0, 0.3, 0.6, 0.5])
    turns = np.array([2.0, 5.0, 4.0, 3.0, 3.0, 3.0, 1.0])
    grpo = episode_advantages(r, g, estimator="grpo")
    np.testing.assert_allclose(grpo[:3], _z(r[:3]), rtol=1e-12)
    assert np.all(grpo[3:] == 0.0)
    rloo = episode_advantages(r, g, estimator="rloo")
    np.testing.assert_allclose(rloo[:3], [1.0 - 0.25, 0.0 - 0.75, 0.5 - 0.5], rtol=1e-12)
    assert rloo[6] == 0.0  # a group of one: no others to compare with
    progpo = episode_advantages(r, g, cov, estimator="progpo-grpo", lam=0.5)
    np.testing.assert_allclose(progpo[:3], grpo[:3], rtol=1e-12)  # a success: the base unchanged
    np.testing.assert_allclose(progpo[3:6], 0.5 * _z(cov[3:6]), rtol=1e-12)  # all failed: progress
    assert progpo[6] == 0.0  # one member: no spread of coverage
    assert episode_advantages(r, g, estimator="gigpo").tolist() == grpo.tolist()  # GiGPO's episode level
    planpo = episode_advantages(r, g, estimator="planpo", turns=turns, success_threshold=0.5)
    assert planpo.shape == r.shape and np.all(np.isfinite(planpo))
    for bad, match in (
        (dict(estimator="nope"), "estimator must be one of"),
        (dict(estimator="progpo-grpo"), "needs the coverage"),
        (dict(estimator="planpo"), "needs the number of turns"),
    ):
        with pytest.raises(ValueError, match=match):
            episode_advantages(r, g, **bad)
    with pytest.raises(ValueError, match="group_ids has 2 entries, outcomes 7"):
        episode_advantages(r, g[:2], estimator="grpo")
    with pytest.raises(ValueError, match="coverage has 2 entries"):
        episode_advantages(r, g, cov[:2], estimator="progpo-grpo")
    with pytest.raises(ValueError, match="turns has 2 entries"):
        episode_advantages(r, g, estimator="planpo", turns=turns[:2])


def test_progpo_single_and_batched_views_agree_with_the_flat_one_and_check_shapes():
    from trainers.advantages import episode_advantages, progpo_episode_advantages, progpo_episode_advantages_batched

    r = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    p = np.array([[0.3, 0.1, 0.2], [0.0, 0.6, 0.3]])
    for base in ("grpo", "rloo", "gigpo"):
        batched = progpo_episode_advantages_batched(r, p, base, lam=1.5, tau_p=1e-3, eps=1e-4)
        flat = episode_advantages(
            r.reshape(-1),
            np.repeat([0, 1], 3),
            p.reshape(-1),
            estimator="progpo-" + base,
            lam=1.5,
            tau_p=1e-3,
            eps=1e-4,
        ).reshape(2, 3)
        np.testing.assert_allclose(batched, flat, rtol=1e-12)
        np.testing.assert_allclose(
            progpo_episode_advantages(r[1], p[1], base, lam=1.5, tau_p=1e-3, eps=1e-4), flat[1], rtol=1e-12
        )
    np.testing.assert_allclose(
        progpo_episode_advantages(np.full(3, 1e-3), p[1]), _z(np.full(3, 1e-3))
    )  # a success at tau_R
    np.testing.assert_allclose(
        progpo_episode_advantages(np.full(3, 1e-3), p[1], tau_r=0.01), _z(p[1])
    )  # below: progress
    with pytest.raises(ValueError, match="base must be 'grpo', 'rloo' or 'gigpo'"):
        progpo_episode_advantages(r[0], p[0], "planpo")
    with pytest.raises(ValueError, match="expected two 1-D arrays"):
        progpo_episode_advantages(r, p)
    with pytest.raises(ValueError, match=r"expected two \(B, G\) arrays"):
        progpo_episode_advantages_batched(r[0], p[0])


def test_episode_advantages_take_batched_arrays_name_bad_inputs_and_default_to_progpo_grpo():
    from trainers.advantages import episode_advantages

    r = np.array([[1.0, 0.0, 0.5], [0.0, 0.0, 0.0]])
    g = np.array([[0, 0, 0], [1, 1, 1]])
    cov = np.array([[0.2, 0.4, 0.1], [0.0, 0.3, 0.6]])
    turns = np.array([[2.0, 5.0, 4.0], [3.0, 3.0, 3.0]])
    flat = episode_advantages(r.reshape(-1), g.reshape(-1), cov.reshape(-1))
    np.testing.assert_allclose(episode_advantages(r, g, cov), flat)  # (B, G) arrays: read flat
    np.testing.assert_allclose(
        flat, episode_advantages(r.reshape(-1), g.reshape(-1), cov.reshape(-1), estimator="progpo-grpo")
    )  # the default estimator
    np.testing.assert_allclose(
        episode_advantages(r, g, estimator="planpo", turns=turns, success_threshold=0.5),
        episode_advantages(
            r.reshape(-1), g.reshape(-1), estimator="planpo", turns=turns.reshape(-1), success_threshold=0.5
        ),
    )
    for name, args in (
        ("outcomes", (np.array([np.nan, 0.0]), [0, 0], [0.1, 0.2])),
        ("coverage", (np.array([0.0, 0.0]), [0, 0], [np.inf, 0.2])),
    ):
        with pytest.raises(ValueError, match=f"^{name} contains NaN or inf"):
            episode_advantages(*args)
    with pytest.raises(ValueError, match="^turns contains NaN or inf"):
        episode_advantages([1.0, 0.0], [0, 0], estimator="planpo", turns=[np.nan, 1.0])


def test_planpo_reads_its_success_threshold_through_every_view():
    """PlanPO's R^E_i = R_i / T_i among the members at or above the success threshold, z-scored;
    a partial score below the threshold is no success."""
    from trainers.advantages import episode_advantages
    from trainers.advantages.planpo import planpo_episode_advantages

    r, turns = np.array([0.5, 1.0, 0.0]), np.array([2.0, 4.0, 3.0])
    strict = episode_advantages(r, [0, 0, 0], estimator="planpo", turns=turns)  # threshold 1: only member 1
    np.testing.assert_allclose(strict, _z([0.0, 0.25, 0.0]), rtol=1e-12)
    loose = episode_advantages(r, [0, 0, 0], estimator="planpo", turns=turns, success_threshold=0.5)
    np.testing.assert_allclose(loose, _z([0.25, 0.25, 0.0]), rtol=1e-12)  # 0.5 / 2 and 1.0 / 4
    np.testing.assert_allclose(planpo_episode_advantages(r, turns, success_threshold=0.5), loose, rtol=1e-12)
    assert np.all(episode_advantages(r, [0, 0, 0], estimator="planpo", turns=turns, success_threshold=2.0) == 0.0)
    with pytest.raises(ValueError, match="a successful trajectory needs at least one turn"):
        planpo_episode_advantages(np.array([1.0, 0.0]), np.array([0.0, 2.0]))
    with pytest.raises(ValueError, match="expected two 1-D arrays of one length"):
        planpo_episode_advantages(np.array([1.0, 0.0]), np.array([1.0]))


@pytest.mark.parametrize("seed", range(5))
def test_group_scope_first_visit_against_a_brute_force_reading(seed):
    """A step's new state counts once per group: at the earliest time any trajectory of the group
    reached it (reset states at time 0), ties all counting; and only if it was new in its episode."""
    from trainers.advantages import group_scope_first_visit

    rng = np.random.default_rng(seed)
    n_traj = int(rng.integers(2, 6))
    lengths = rng.integers(1, 6, size=n_traj)
    traj_group = rng.integers(0, 2, size=n_traj)
    traj = np.concatenate([np.full(n, j) for j, n in enumerate(lengths)])
    t = np.concatenate([np.arange(n) for n in lengths])
    path = {j: rng.integers(0, 4, size=n + 1) * 10 for j, n in enumerate(lengths)}  # states o_0..o_T
    state_ids = np.array([path[j][k] for j, k in zip(traj, t)])
    next_ids = np.array([path[j][k + 1] for j, k in zip(traj, t)])
    first_visit = np.array([path[j][k + 1] not in path[j][: k + 1] for j, k in zip(traj, t)])
    perm = rng.permutation(traj.size)
    args = [a[perm] for a in (first_visit, traj, t)] + [traj_group] + [a[perm] for a in (state_ids, next_ids)]
    got = group_scope_first_visit(*args)
    fv, tr, tt = args[0], args[1], args[2]
    for i in range(tr.size):
        g, s, when = traj_group[tr[i]], args[5][i], tt[i] + 1
        earliest = min([k for j in range(n_traj) if traj_group[j] == g for k, x in enumerate(path[j]) if x == s])
        assert got[i] == (bool(fv[i]) and earliest == when), (i, s, when, earliest)


def test_anchor_advantages_and_the_invalid_penalty_by_hand():
    from types import SimpleNamespace

    from trainers.advantages import penalized_advantages
    from trainers.advantages.segments import anchor_advantages

    ret = np.array([1.0, 0.5, 0.2, 0.3, 0.9])
    keys = np.array([7, 7, 3, 7, 9])  # anchors {0, 1, 3}, {2}, {4}
    got = anchor_advantages(ret, keys)
    np.testing.assert_allclose(got[[0, 1, 3]], _z(ret[[0, 1, 3]]), rtol=1e-12)
    assert got[2] == 0.0 and got[4] == 0.0  # an anchor group of one: no comparison
    np.testing.assert_allclose(anchor_advantages(ret, keys, norm="mean")[[0, 1, 3]], ret[[0, 1, 3]] - 0.6, rtol=1e-12)
    np.testing.assert_allclose(
        anchor_advantages(ret, keys, eps=1.0)[[0, 1, 3]],
        (ret[[0, 1, 3]] - 0.6) / (ret[[0, 1, 3]].std() + 1.0),
        rtol=1e-12,
    )
    outputs = [
        SimpleNamespace(penalty=0.25),
        SimpleNamespace(),
        SimpleNamespace(penalty=None),
        SimpleNamespace(penalty=1),
    ]
    np.testing.assert_allclose(penalized_advantages(np.array([1.0, 1.0, 1.0, 0.0]), outputs), [0.75, 1.0, 1.0, -1.0])


# ----------------------------------------------------------------------------- step_advantages' inputs
def _batch() -> dict[str, np.ndarray]:
    """Two groups of two trajectories: group 0 mixed (partial score 0.5 and a win), group 1 failed."""
    return dict(
        outcomes=np.array([0.5, 1.0, 0.0, 0.0]),
        traj_group=np.array([7, 7, 9, 9]),
        step_traj=np.array([0, 0, 1, 2, 2, 3]),
        step_index=np.array([0, 1, 0, 0, 1, 0]),
        state_ids=np.array([0, 1, 0, 2, 3, 2]),
        first_visit=np.array([True, True, True, True, False, True]),
        next_ids=np.array([1, 4, 5, 3, 6, 7]),
    )


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_step_advantages_take_columns_and_float_indices_alike(estimator):
    """Column vectors and float-typed index arrays (as read back from JSON) give the same advantages."""
    from trainers.advantages import AdvantageConfig

    cfg = AdvantageConfig(estimator=estimator)
    want = step_advantages(**_batch(), config=cfg)
    columns = step_advantages(**{k: v[:, None] for k, v in _batch().items()}, config=cfg)
    floats = step_advantages(
        **{
            **_batch(),
            "step_traj": _batch()["step_traj"].astype(float),
            "step_index": _batch()["step_index"].astype(float),
        },
        config=cfg,
    )
    for got in (columns, floats):
        np.testing.assert_array_equal(got.steps, want.steps)
        np.testing.assert_array_equal(got.all_failed, want.all_failed)
    assert want.all_failed.tolist() == [False, True]


def test_step_advantages_name_what_is_wrong_with_their_inputs():
    from trainers.advantages import AdvantageConfig

    b = _batch()
    with pytest.raises(ValueError, match=r"^outcomes contains NaN or inf$"):
        step_advantages(**{**b, "outcomes": np.array([np.nan, 0, 0, 0])})
    with pytest.raises(ValueError, match=r"^traj_group has 3 entries, outcomes 4$"):
        step_advantages(**{**b, "traj_group": np.array([7, 7, 9])})
    with pytest.raises(ValueError, match=r"^step_index has 5 entries, step_traj 6$"):
        step_advantages(**{**b, "step_index": b["step_index"][:5]})
    with pytest.raises(ValueError, match=r"^step_traj must index trajectories 0\.\.3$"):
        step_advantages(**{**b, "step_traj": np.array([0, 0, 1, 2, 2, 4])})  # 4: one past the last
    with pytest.raises(ValueError, match="needs state_ids"):
        step_advantages(**{**b, "state_ids": None}, config=AdvantageConfig(estimator="progpo-grpo", scope="group"))
    assert step_advantages(**{**b, "state_ids": None}, config=AdvantageConfig(estimator="progpo-grpo")).steps.size == 6


def test_an_empty_batch_gives_empty_arrays():
    from trainers.advantages import AdvantageConfig

    empty = {k: v[:0] for k, v in _batch().items()}
    out = step_advantages(**empty, config=AdvantageConfig(estimator="progpo-gigpo"))
    assert out.steps.shape == (0,) and out.all_failed.shape == (0,) and out.all_failed.dtype == bool


def test_step_rewards_and_the_success_threshold_reach_the_estimators():
    """Given step rewards replace the sparse final-step outcome in the step term; PlanPO's success
    threshold decides which partial scores count as successes."""
    from trainers.advantages import AdvantageConfig

    b = _batch()
    gigpo = AdvantageConfig(estimator="gigpo")
    sparse = step_advantages(**b, config=gigpo).steps
    dense = step_advantages(**b, step_rewards=np.array([0.3, 0.2, 0.0, 0.0, 0.0, 0.0]), config=gigpo).steps
    assert not np.allclose(sparse, dense)
    strict = step_advantages(**b, config=AdvantageConfig(estimator="planpo", success_threshold=1.0)).episode
    lenient = step_advantages(**b, config=AdvantageConfig(estimator="planpo", success_threshold=0.4)).episode
    # the 0.5 score is a success only under the lower threshold: R/T of group 0 is then (0.25, 1), not (0, 1)
    assert not np.array_equal(strict[:2], lenient[:2]) and np.array_equal(strict[2:], lenient[2:])


@pytest.mark.parametrize("fn", [progpo_episode_advantages, progpo_episode_advantages_batched])
def test_the_paper_function_names_its_non_finite_input(fn):
    shape = (3,) if fn is progpo_episode_advantages else (1, 3)
    ok = np.zeros(shape)
    with pytest.raises(ValueError, match=r"^outcomes contains NaN or inf$"):
        fn(np.full(shape, np.nan), ok)
    with pytest.raises(ValueError, match=r"^coverage_rate contains NaN or inf$"):
        fn(ok, np.full(shape, np.inf))


def test_episode_advantages_default_lambda_is_one():
    out, cov, group = np.zeros(4), np.array([0.1, 0.3, 0.2, 0.2]), np.array([0, 0, 1, 1])
    default = episode_advantages(out, group, cov, estimator="progpo-grpo")
    np.testing.assert_array_equal(default, episode_advantages(out, group, cov, estimator="progpo-grpo", lam=1.0))
    np.testing.assert_allclose(default[:2], [-1.0, 1.0], atol=1e-4)


def test_gigpo_anchor_groups_never_reach_across_task_groups():
    """Steps of different task groups in one state are never each other's anchors: a batch of
    groups gives each group what it gets alone."""
    from trainers.advantages import AdvantageConfig

    cfg = AdvantageConfig(estimator="gigpo")
    # groups 0, 1, 2 of two trajectories each; states 0 and 1; group 0 visits state 1, group 2 state 0
    outcomes = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 0.0])
    step_traj, step_index = np.array([0, 0, 1, 1, 2, 3, 4, 4, 5, 5]), np.array([0, 1, 0, 1, 0, 0, 0, 1, 0, 1])
    state_ids = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 0])
    traj_group = np.array([0, 0, 1, 1, 2, 2])
    together = step_advantages(outcomes, traj_group, step_traj, step_index, state_ids, config=cfg).steps
    for g in range(3):
        trajs = np.flatnonzero(traj_group == g)
        rows = np.flatnonzero(np.isin(step_traj, trajs))
        alone = step_advantages(
            outcomes[trajs],
            traj_group[trajs],
            step_traj[rows] - trajs[0],
            step_index[rows],
            state_ids[rows],
            config=cfg,
        ).steps
        np.testing.assert_allclose(together[rows], alone, atol=1e-12)
