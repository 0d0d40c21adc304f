"""The estimators' options reach the terms they name, groups never see each other, and the edge
cases (empty batches, zero denominators, the shuffled control's seed) give what they promise.

Every batch here is a seeded random one with several task groups drawing their states from one
small pool, so that two groups share state ids: a group key that mixes groups up changes numbers.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import numpy as np
import pytest

from trainers.advantages import ESTIMATORS, AdvantageConfig, discounted_returns, step_advantages
from trainers.advantages.hgpo import HGPOConfig, hgpo_history_advantages, history_clusters, potential_credit
from trainers.advantages.planpo import PlanPOConfig, planpo_episode_flat, planpo_turn_advantages
from trainers.advantages.progpo import shuffle_within_groups
from trainers.advantages.segments import anchor_advantages, dense_ids, safe_divide

KINDS = ("failed", "mixed", "won", "partial")


def _batch(seed: int, n_groups: int = 6, size: int = 4, n_states: int = 4, max_len: int = 6) -> dict[str, np.ndarray]:
    """``n_groups`` groups of ``size`` trajectories (all failed, mixed, all won, partial scores
    only, in turn), walks over ``n_states`` shared states, episode-scope first visits as
    :class:`wrappers.FirstVisitCoverage` computes them, and a token count per answer."""
    rng = np.random.default_rng(seed)
    outcomes, groups, traj, idx, states, nxt, fv, lengths = [], [], [], [], [], [], [], []
    for g in range(n_groups):
        kind = KINDS[g % len(KINDS)]
        for m in range(size):
            i = len(outcomes)
            if kind == "failed":
                outcomes.append(0.0)
            elif kind == "won":
                outcomes.append(1.0)
            elif kind == "partial":  # a 0.5 and a 0 at least: a success only under a threshold of 0.5
                outcomes.append(0.5 if m == 0 else 0.0 if m == 1 else float(rng.choice([0.0, 0.25, 0.5])))
            else:
                outcomes.append(1.0 if m == 0 else float(rng.choice([0.0, 0.5, 1.0])))
            groups.append(10 * g + 3)  # ids that are neither dense nor sorted by first appearance
            path = rng.integers(0, n_states, size=int(rng.integers(1, max_len + 1)) + 1)
            seen = {int(path[0])}
            for t in range(path.size - 1):
                traj.append(i)
                idx.append(t)
                states.append(int(path[t]))
                nxt.append(int(path[t + 1]))
                fv.append(int(path[t + 1]) not in seen)
                seen.add(int(path[t + 1]))
                lengths.append(int(rng.integers(3, 40)))
    return dict(
        outcomes=np.array(outcomes),
        traj_group=np.array(groups),
        step_traj=np.array(traj),
        step_index=np.array(idx),
        state_ids=np.array(states),
        next_ids=np.array(nxt),
        first_visit=np.array(fv),
        response_lengths=np.array(lengths, dtype=float),
    )


def _group_alone(batch: dict[str, np.ndarray], group_id: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """One group's trajectories and steps, renumbered from 0, and the mask of its steps."""
    trajs = np.flatnonzero(batch["traj_group"] == group_id)
    rows = np.isin(batch["step_traj"], trajs)
    alone = {k: v[rows] for k, v in batch.items() if k not in ("outcomes", "traj_group")}
    alone["step_traj"] = np.searchsorted(trajs, batch["step_traj"][rows])
    alone["outcomes"], alone["traj_group"] = batch["outcomes"][trajs], batch["traj_group"][trajs]
    return alone, rows


GROUPWISE = [AdvantageConfig(estimator=e) for e in ESTIMATORS] + [
    AdvantageConfig(estimator="progpo-gigpo", scope="group", coverage="count", norm="mean", lam=0.5, omega=0.3),
    AdvantageConfig(
        estimator="progpo-hgpo", scope="group", hgpo_depth=3, hgpo_fusion="inverse-variance", potential_credit=True
    ),
    AdvantageConfig(estimator="hgpo", hgpo_depth=1, hgpo_alpha=2.0, potential_credit=True, gamma=0.5),
    AdvantageConfig(estimator="progpo-planpo", success_threshold=0.5, planpo_alpha=0.3, gate="always"),
]


@pytest.mark.parametrize(
    "cfg", GROUPWISE, ids=lambda c: f"{c.estimator}-{c.scope}-{c.hgpo_fusion}-{c.success_threshold}"
)
@pytest.mark.parametrize("seed", range(3))
def test_every_estimator_gives_each_group_what_it_gets_alone(cfg, seed):
    """A batch of groups is a batch of independent problems: no anchor state, history cluster,
    turn group or group-scope first visit reaches across groups, even where they share state ids."""
    batch = _batch(seed)
    together = step_advantages(**batch, config=cfg)
    for g in np.unique(batch["traj_group"]):
        alone_batch, rows = _group_alone(batch, g)
        trajs = batch["traj_group"] == g
        alone = step_advantages(**alone_batch, config=cfg)
        np.testing.assert_allclose(together.steps[rows], alone.steps, atol=1e-9, err_msg=f"group {g}")
        np.testing.assert_allclose(together.episode[trajs], alone.episode, atol=1e-9)
        np.testing.assert_allclose(together.coverage[trajs], alone.coverage, atol=1e-12)


# (estimator, option, a value other than the default): each must change the advantages of the batch
OPTIONS = [
    ("gigpo", "gamma", 0.5),
    ("gigpo", "omega", 0.3),
    ("gigpo", "norm", "mean"),
    ("gigpo", "eps", 0.5),
    ("hgpo", "gamma", 0.5),
    ("hgpo", "omega", 0.3),
    ("hgpo", "norm", "mean"),
    ("hgpo", "eps", 0.5),
    ("hgpo", "hgpo_depth", 0),
    ("hgpo", "hgpo_alpha", 3.0),
    ("hgpo", "hgpo_fusion", "inverse-variance"),
    ("hgpo", "potential_credit", True),
    ("planpo", "success_threshold", 0.5),
    ("planpo", "planpo_alpha", 0.0),
    ("planpo", "planpo_alpha", 0.5),
    ("planpo", "eps", 0.5),
    ("planpo", "norm", "mean"),
    ("grpo", "norm", "mean"),
    ("grpo", "eps", 0.5),
    ("progpo-grpo", "lam", 0.5),
    ("progpo-grpo", "coverage", "count"),
    ("progpo-grpo", "scope", "group"),
    ("progpo-grpo", "gate", "always"),
    ("progpo-grpo", "shuffle_coverage", True),
    ("progpo-grpo", "tau_r", 0.6),
    ("progpo-grpo", "tau_p", 0.3),
    ("progpo-grpo", "norm", "mean"),
]


@pytest.mark.parametrize("estimator,option,value", OPTIONS, ids=lambda v: str(v))
def test_each_option_changes_the_advantages(estimator, option, value):
    batch = _batch(0)
    default = step_advantages(**batch, config=AdvantageConfig(estimator=estimator)).steps
    changed = step_advantages(**batch, config=AdvantageConfig(estimator=estimator, **{option: value})).steps
    assert not np.allclose(default, changed), f"{estimator}: {option}={value!r} left every advantage as it was"


def test_the_shuffled_control_follows_its_seed():
    batch = _batch(0, n_groups=8, size=6)
    cfg = AdvantageConfig(estimator="progpo-grpo", shuffle_coverage=True)
    first, again = (step_advantages(**batch, config=cfg).episode for _ in range(2))
    other = step_advantages(**batch, config=dataclasses.replace(cfg, shuffle_seed=1)).episode
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def _sparse_returns(batch: dict[str, np.ndarray], gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """Each step's reward (the outcome on the last step, 0 before) and its discounted return."""
    traj, t = batch["step_traj"], batch["step_index"]
    last = np.zeros(batch["outcomes"].size, dtype=np.int64)
    np.maximum.at(last, traj, t)
    rew = np.where(t == last[traj], batch["outcomes"][traj], 0.0)
    return rew, discounted_returns(rew, traj, t, gamma)


@pytest.mark.parametrize(
    "cfg",
    [
        AdvantageConfig(estimator="gigpo", gamma=0.5, omega=0.3, eps=0.2, norm="mean_std"),
        AdvantageConfig(estimator="gigpo", norm="mean"),
    ],
)
def test_gigpo_step_term_is_the_anchor_term_with_the_configs_options(cfg):
    batch = _batch(1)
    out = step_advantages(**batch, config=cfg)
    _, ret = _sparse_returns(batch, cfg.gamma)
    keys = dense_ids(batch["traj_group"])[0][batch["step_traj"]] * 1000 + batch["state_ids"]
    want = cfg.omega * anchor_advantages(ret, keys, cfg.eps, cfg.norm)
    np.testing.assert_allclose(out.steps - out.episode[batch["step_traj"]], want, atol=1e-12)


#: HGPO's own options, each off its default
HGPO_OPTIONS = dict(hgpo_depth=3, hgpo_alpha=2.5, hgpo_fusion="power")


@pytest.mark.parametrize(
    "cfg",
    [
        AdvantageConfig(estimator="hgpo", gamma=0.5, omega=0.3, eps=0.2, potential_credit=True, **HGPO_OPTIONS),
        AdvantageConfig(estimator="hgpo", norm="mean", hgpo_fusion="inverse-variance"),
        AdvantageConfig(estimator="progpo-hgpo", gamma=0.7, potential_credit=True, hgpo_depth=1),
    ],
)
def test_hgpo_step_term_is_the_history_term_with_the_configs_options(cfg):
    """Depth, alpha, fusion, eps, norm, gamma and the potential credit all reach HGPO's step term;
    under ProGPO the step reward of an all-failed group is its first visits."""
    batch = _batch(2)
    out = step_advantages(**batch, config=cfg)
    traj, t, s = batch["step_traj"], batch["step_index"], batch["state_ids"]
    step_group = dense_ids(batch["traj_group"])[0][traj]
    rew, ret = _sparse_returns(batch, cfg.gamma)
    if cfg.progpo:
        failed_step = out.all_failed[step_group]
        rew = np.where(failed_step, batch["first_visit"].astype(float), rew)
        ret = discounted_returns(rew, traj, t, cfg.gamma)
    clusters = history_clusters(step_group, traj, t, s, cfg.hgpo_depth)
    options = dict(depth=cfg.hgpo_depth, alpha=cfg.hgpo_alpha, fusion=cfg.hgpo_fusion, eps=cfg.eps, norm=cfg.norm)
    want = hgpo_history_advantages(ret, step_group, traj, t, s, **options)
    if cfg.potential_credit:
        want = want + potential_credit(ret, rew, traj, t, clusters, gamma=cfg.gamma, eps=cfg.eps)
    np.testing.assert_allclose(out.steps - out.episode[traj], cfg.omega * want, atol=1e-12)
    peers = clusters.count > 1
    assert out.acted["hgpo_peer_steps"] == float(peers.any(axis=0).sum())
    assert out.acted["hgpo_deep_steps"] == float(peers[1:].any(axis=0).sum())
    assert 0 < out.acted["hgpo_deep_steps"] < out.acted["hgpo_peer_steps"] < t.size  # the batch has all three kinds


@pytest.mark.parametrize(
    "cfg",
    [
        AdvantageConfig(estimator="planpo", success_threshold=0.5, planpo_alpha=0.4, eps=0.2),
        AdvantageConfig(estimator="planpo", norm="mean"),
    ],
)
def test_planpo_terms_take_the_configs_threshold_alpha_eps_and_norm(cfg):
    batch = _batch(3)
    out = step_advantages(**batch, config=cfg)
    traj, gid = batch["step_traj"], dense_ids(batch["traj_group"])[0]
    turns = np.bincount(traj, minlength=gid.size)
    episode = planpo_episode_flat(
        batch["outcomes"],
        turns,
        gid,
        int(gid.max()) + 1,
        success_threshold=cfg.success_threshold,
        eps=cfg.eps,
        norm=cfg.norm,
    )
    turn = planpo_turn_advantages(
        batch["outcomes"],
        gid,
        traj,
        batch["step_index"],
        batch["response_lengths"],
        success_threshold=cfg.success_threshold,
        eps=cfg.eps,
        norm=cfg.norm,
    )
    np.testing.assert_allclose(out.episode, episode, atol=1e-12)
    np.testing.assert_allclose(out.steps, episode[traj] + cfg.planpo_alpha * turn, atol=1e-12)
    acted_groups = np.unique(gid[episode != 0]).size
    assert out.acted["planpo_groups"] == float(acted_groups) and 0 < acted_groups < gid.max() + 1
    partial = gid[batch["traj_group"] == 33][0]  # the fourth group: scores of 0.5 at best
    assert (episode[gid == partial] != 0).any() == (cfg.success_threshold <= 0.5)
    assert out.acted["planpo_turn_alpha"] == cfg.planpo_alpha


def test_a_zero_denominator_gives_zero_whatever_the_memory_held():
    """With eps 0, a group whose values are all equal divides 0 by 0: the advantage is 0, never
    what the freed memory held (the division writes only where the denominator is positive)."""
    for _ in range(20):
        junk = np.full(4096, 7.0)
        del junk
        assert not safe_divide(np.zeros(4096), np.zeros(4096)).any()
    won = dict(
        outcomes=np.ones(4),
        traj_group=np.zeros(4, int),
        step_traj=np.arange(4),
        step_index=np.zeros(4, int),
        state_ids=np.zeros(4, int),
        first_visit=np.ones(4, bool),
    )
    for estimator in ("grpo", "gigpo", "hgpo"):
        out = step_advantages(**won, config=AdvantageConfig(estimator=estimator, eps=0.0))
        np.testing.assert_array_equal(out.steps, np.zeros(4))


def test_shuffling_keeps_each_groups_values_in_that_group_and_is_reproducible():
    rng = np.random.default_rng(0)
    gid = np.repeat(np.arange(5), 6)
    values = rng.random(gid.size)
    mask = np.isin(gid, [0, 2, 3])
    out = shuffle_within_groups(values, gid, mask)
    np.testing.assert_array_equal(out[~mask], values[~mask])
    for g in (0, 2, 3):
        np.testing.assert_array_equal(np.sort(out[gid == g]), np.sort(values[gid == g]))
    assert not np.array_equal(out, values)
    np.testing.assert_array_equal(shuffle_within_groups(values, gid, mask), out)  # the default seed is fixed
    assert shuffle_within_groups(np.arange(4), np.zeros(4, int), np.ones(4, bool)).dtype == np.float64


@pytest.mark.parametrize("gamma", [0.0, 1.0])
def test_gamma_takes_both_ends_of_its_range(gamma):
    out = step_advantages(**_batch(0), config=AdvantageConfig(estimator="gigpo", gamma=gamma))
    assert np.isfinite(out.steps).all()


@pytest.mark.parametrize("gamma", [-0.1, 1.01])
def test_gamma_outside_its_range_is_refused(gamma):
    with pytest.raises(ValueError, match=r"^gamma must be in \[0, 1\], got"):
        AdvantageConfig(gamma=gamma)


@pytest.mark.parametrize("eps", [-1e-6, float("nan")])
def test_a_negative_eps_is_refused(eps):
    with pytest.raises(ValueError, match=r"^eps must be >= 0, got"):
        AdvantageConfig(eps=eps)


@pytest.mark.parametrize("depth", [-1, 1.5, True, "2"])
def test_hgpo_depth_must_be_an_integer_from_zero(depth):
    with pytest.raises(ValueError, match=r"^hgpo depth must be an integer >= 0, got"):
        HGPOConfig(depth=depth)
    assert HGPOConfig(depth=0).depth == 0


def test_empty_step_arrays_give_empty_returns_and_credit():
    none = np.zeros(0, dtype=np.int64)
    assert discounted_returns(np.zeros(0), none, none).shape == (0,)
    clusters = history_clusters(none, none, none, none, 2)
    assert clusters.ids.shape == (3, 0)
    assert potential_credit(np.zeros(0), np.zeros(0), none, none, clusters).shape == (0,)


def test_the_progress_inputs_name_what_is_wrong():
    b = _batch(0)
    with pytest.raises(ValueError, match=rf"^first_visit has 3 entries, step_traj {b['step_traj'].size}$"):
        step_advantages(**{**b, "first_visit": b["first_visit"][:3]}, config=AdvantageConfig(estimator="progpo-grpo"))
    with pytest.raises(ValueError, match=r"^scope='group' needs next_ids \(o_\{t\+1\} of each step\)$"):
        step_advantages(**{**b, "next_ids": None}, config=AdvantageConfig(estimator="progpo-grpo", scope="group"))


# A function's default for an option is the config's default for it: calling the estimators'
# functions directly gives what the trainer gives with its defaults.
# (``coverage`` is left out: in the functions it names the progress values, not the option)
CONFIG_NAME = {
    "gamma": "gamma",
    "eps": "eps",
    "norm": "norm",
    "lam": "lam",
    "success_threshold": "success_threshold",
    "scope": "scope",
    "gate": "gate",
    "omega": "omega",
}
PER_MODULE = {
    "trainers.advantages.hgpo": {"depth": "hgpo_depth", "alpha": "hgpo_alpha", "fusion": "hgpo_fusion"},
    "trainers.advantages.progpo": {"seed": "shuffle_seed"},
}
MODULES = ("segments", "grpo", "gigpo", "planpo", "hgpo", "progpo", "episode", "step")


def _function_defaults():
    defaults = AdvantageConfig()
    for short in MODULES:
        name = f"trainers.advantages.{short}"
        module = importlib.import_module(name)
        names = {**CONFIG_NAME, **PER_MODULE.get(name, {})}
        for fn_name in module.__all__:  # the public functions, what a user calls
            fn = getattr(module, fn_name)
            if not inspect.isfunction(fn) or fn.__module__ != name:
                continue
            for p in inspect.signature(fn).parameters.values():
                if p.name in names and p.default is not inspect.Parameter.empty:
                    yield f"{name}.{fn_name}({p.name})", p.default, getattr(defaults, names[p.name])


def test_every_function_default_is_the_configs_default():
    found = list(_function_defaults())
    assert len(found) > 20  # the scan still finds the estimators' functions
    wrong = [f"{where} = {got!r}, config {want!r}" for where, got, want in found if got != want]
    assert not wrong, "\n".join(wrong)
    assert (HGPOConfig().depth, HGPOConfig().alpha, HGPOConfig().fusion) == (
        AdvantageConfig().hgpo_depth,
        AdvantageConfig().hgpo_alpha,
        AdvantageConfig().hgpo_fusion,
    )
    assert (PlanPOConfig().success_threshold, PlanPOConfig().alpha) == (
        AdvantageConfig().success_threshold,
        AdvantageConfig().planpo_alpha,
    )
