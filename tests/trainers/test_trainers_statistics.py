"""The within-group AUC of coverage for success, on constructed rollouts."""

from __future__ import annotations

import numpy as np
import pytest

from trainers.statistics import auc_with_ci, within_group_auc


def test_hand_computed_auc_pairs_only_inside_groups():
    # group 0: the winner covers 0.5 vs losers 0.2, 0.1 -> 2 of 2 pairs; group 1: a partial score
    # 0.3 (counts as R > 0) at 0.4 ties one loser (0.5) and loses to the other (0.9) -> 0.5 of 2;
    # group 2 all failed, group 3 all won: no pairs. Pairs never cross groups.
    p = np.array([0.5, 0.2, 0.1, 0.4, 0.4, 0.9, 0.3, 0.2, 0.6, 0.7])
    r = np.array([1.0, 0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0])
    g = np.array([0, 0, 0, 1, 1, 1, 2, 2, 3, 3])
    res = within_group_auc(p, r, g)
    assert (res.pairs, res.groups) == (4, 2) and res.auc == pytest.approx((2 + 0.5) / 4)


def test_no_mixed_group_gives_nan_and_a_length_mismatch_raises():
    assert np.isnan(within_group_auc(np.ones(4), np.zeros(4), np.array([0, 0, 1, 1])).auc)
    with pytest.raises(ValueError, match="one entry per trajectory"):
        within_group_auc(np.ones(3), np.zeros(4), np.zeros(4))


def test_bootstrap_interval_covers_a_known_effect():
    rng = np.random.default_rng(0)
    groups, size = 60, 8
    g = np.repeat(np.arange(groups), size)
    won = rng.random(groups * size) < 0.4
    p = rng.random(groups * size) + 0.5 * won  # winners cover more: true AUC about 0.82
    res = auc_with_ci(p, won.astype(float), g, n_boot=500)
    assert 0.7 < res.ci[0] < res.auc < res.ci[1] < 0.95
    null = auc_with_ci(rng.random(groups * size), won.astype(float), g, n_boot=500)
    assert null.ci[0] < 0.5 < null.ci[1]


def test_coverage_auc_benchmark_tables_every_key_and_the_mismatch():
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("coverage_auc", root / "benchmarks" / "coverage_auc.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    base = {
        "outcome": np.array([1.0, 0.0, 0.0, 1.0]),
        "group": np.array([0, 0, 1, 1]),
        "task_type": np.array(["a", "a", "b", "b"]),
    }
    data = {
        "canonical": {**base, "coverage": np.array([0.9, 0.1, 0.2, 0.8]), "first_visit": np.array([1, 1, 1, 0], bool)},
        "exact": {**base, "coverage": np.array([0.1, 0.9, 0.2, 0.8]), "first_visit": np.array([1, 1, 1, 1], bool)},
        "carry-free": {**base, "coverage": np.array([0.9, 0.1, 0.2, 0.8]), "first_visit": np.array([1, 0, 1, 0], bool)},
    }
    result = bench.summarize(data, 1e-3)
    assert result["canonical"]["all"]["auc"] == 1.0 and result["exact"]["all"]["auc"] == 0.5
    text = bench.table(result, data, 1e-3)
    assert "| all | carry-free | 1.000 |" in text and "2 mixed groups" in text
    assert "1 of the canonical key's 3 first visits" in bench.mismatch(data)


def _t_tail_by_integration(t: float, df: int) -> float:
    """P(|T| >= |t|) from Student's t density, integrated numerically (Simpson): a reference that
    shares nothing with the closed form under test."""
    import math

    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    x = np.linspace(0.0, abs(t), 20_001)
    f = c * (1 + x * x / df) ** (-(df + 1) / 2)
    h = x[1] - x[0]
    inside = h / 3 * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum()) if t else 0.0
    return 1.0 - 2.0 * inside


def test_t_p_values_match_the_density_and_the_interval_mean_ci_reports():
    from trainers.lab.significance import paired_t_p
    from trainers.statistics import mean_ci, t975, t_two_sided_p

    for df in range(1, 31):
        for t in (0.0, 0.4, 1.0, 2.0, 3.3, 12.0, -2.5):
            assert t_two_sided_p(t, df) == pytest.approx(_t_tail_by_integration(t, df), abs=1e-9)
        # the interval's quantile is where the test's p-value crosses 0.05
        assert t_two_sided_p(t975(df), df) == pytest.approx(0.05, abs=1e-9)
    rng = np.random.default_rng(1)
    for _ in range(200):
        d = rng.normal(0.05, 0.1, size=int(rng.integers(2, 12)))
        m, h = mean_ci(d[:, None])
        t = float(np.mean(d)) / (float(np.std(d, ddof=1)) / np.sqrt(d.size))
        assert paired_t_p(d) == pytest.approx(_t_tail_by_integration(t, d.size - 1), abs=1e-9)
        excludes_zero = abs(float(m[0])) > float(h[0])
        assert (paired_t_p(d) < 0.05) == excludes_zero or abs(abs(float(m[0])) - float(h[0])) < 1e-9


def test_a_nan_or_an_infinite_difference_is_never_significant():
    """One unread run (NaN) or a broken value (inf) gives no p-value, never p = 0."""
    from trainers.lab.significance import holm, paired_t_p
    from trainers.statistics import t_two_sided_p

    for bad in (float("nan"), float("inf"), float("-inf")):
        assert np.isnan(paired_t_p([0.1, bad, 0.3])), bad
    assert np.isnan(t_two_sided_p(float("nan"), 4))
    adjusted = holm([0.001, float("nan"), 0.02])
    assert np.isnan(adjusted[1]) and not adjusted[1] < 0.05
    assert adjusted[0] == pytest.approx(0.003) and adjusted[2] == pytest.approx(0.04)  # the family is still 3


def test_the_interval_takes_its_degrees_of_freedom_from_the_seeds_with_a_value():
    from trainers.statistics import mean_ci, t975

    m, h = mean_ci(np.array([[0.1, 0.1], [np.nan, 0.2], [0.3, 0.3]]))
    assert m[0] == pytest.approx(0.2) and h[0] == pytest.approx(t975(1) * np.std([0.1, 0.3], ddof=1) / np.sqrt(2))
    assert h[1] == pytest.approx(t975(2) * np.std([0.1, 0.2, 0.3], ddof=1) / np.sqrt(3))
    _, h1 = mean_ci(np.array([[0.5], [np.nan]]))  # one value: no interval
    assert h1[0] == 0.0


@pytest.mark.parametrize("n", [2, 8, 31, 32, 33, 60, 200])
def test_the_interval_uses_the_t_quantile_at_every_seed_count(n):
    """Past 31 seeds the quantile is t's, not the normal's 1.96 (3.9% too narrow at n = 32)."""
    from trainers.statistics import mean_ci

    d = np.random.default_rng(n).normal(0.0, 1.0, size=n)
    _, h = mean_ci(d[:, None])
    tq = float(h[0]) / (np.std(d, ddof=1) / np.sqrt(n))
    assert _t_tail_by_integration(tq, n - 1) == pytest.approx(0.05, abs=1e-6)


def test_t_p_edge_cases():
    from trainers.lab.significance import paired_t_p
    from trainers.statistics import t_two_sided_p

    assert np.isnan(paired_t_p([0.2]))
    assert paired_t_p([0.1, 0.1, 0.1]) == 0.0 and paired_t_p([0.0, 0.0]) == 1.0
    assert t_two_sided_p(float("inf"), 5) == 0.0
    with pytest.raises(ValueError, match="integer df"):
        t_two_sided_p(1.0, 0)


def test_holm_holds_the_order_is_monotone_and_never_below_the_raw_p():
    from trainers.lab.significance import holm

    rng = np.random.default_rng(2)
    for _ in range(100):
        p = rng.random(int(rng.integers(1, 10)))
        adj = np.array(holm(p))
        assert np.all(adj >= p - 1e-12) and np.all(adj <= 1.0)
        order = np.argsort(p)
        assert np.all(np.diff(adj[order]) >= -1e-12)  # the step-down never reverses the ranking
    # one comparison: nothing to adjust; k equal p-values: each multiplied by k
    assert holm([0.03]) == [0.03] and holm([0.01, 0.01, 0.01]) == [0.03, 0.03, 0.03]


# ------------------------------------------------------------------ intervals, exact and bootstrap
def test_t975_matches_the_density_and_refuses_what_is_not_a_degree_count():
    from trainers.statistics import t975

    for df, tabled in ((1, 12.7062), (2, 4.3027), (7, 2.3646), (30, 2.0423), (120, 1.9799)):
        assert t975(df) == pytest.approx(tabled, abs=1e-4)
        assert _t_tail_by_integration(t975(df), df) == pytest.approx(0.05, abs=1e-8)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="t975 needs an integer df >= 1"):
            t975(bad)


def test_mean_ci_reads_a_missing_value_as_nan_and_works_per_column():
    from trainers.statistics import mean_ci, t975

    m, h = mean_ci([[0.1, 1.0], [None, 3.0], [0.3, 2.0]])  # a run without that record: None
    assert m.tolist() == pytest.approx([0.2, 2.0])
    assert h.tolist() == pytest.approx([t975(1) * np.std([0.1, 0.3], ddof=1) / np.sqrt(2), t975(2) * 1.0 / np.sqrt(3)])
    m, h = mean_ci(np.array([[np.nan], [np.nan]]))  # no value at all: NaN mean, no interval
    assert np.isnan(m[0]) and h[0] == 0.0


def test_paired_bootstrap_interval_is_the_percentile_interval_of_resampled_means():
    from trainers.statistics import paired_bootstrap_ci

    start = np.array([0, 0, 1, 0, 1, 0, 0, 1, 0, 0] * 6, dtype=float)
    end = np.array([1, 0, 1, 1, 1, 0, 1, 1, 0, 0] * 6, dtype=float)
    diff, lo, hi = paired_bootstrap_ci(start, end, n_boot=4000, seed=3)
    d = end - start
    assert diff == pytest.approx(d.mean()) and lo < diff < hi  # +0.3 with 60 pairs
    se = d.std(ddof=0) / np.sqrt(d.size)
    assert lo == pytest.approx(diff - 1.96 * se, abs=0.03) and hi == pytest.approx(diff + 1.96 * se, abs=0.03)
    narrow = paired_bootstrap_ci(start, end, n_boot=4000, seed=3, alpha=0.5)
    assert lo < narrow[1] < diff < narrow[2] < hi  # a 50% interval sits inside the 95% one
    assert paired_bootstrap_ci(start, end, n_boot=4000, seed=3) == (diff, lo, hi)  # seeded: repeatable
    assert paired_bootstrap_ci(end, start, n_boot=4000, seed=3)[0] == pytest.approx(-diff)
    assert paired_bootstrap_ci([1.0, 1.0], [0.0, 0.0]) == (-1.0, -1.0, -1.0)  # no spread: no width
    for a, b in (([1.0, 0.0], [1.0]), ([[1.0]], [[1.0]]), ([], [])):
        with pytest.raises(ValueError, match="two equal-length 1-D win vectors"):
            paired_bootstrap_ci(a, b)


def test_episodes_to_reach_smooths_over_two_iterations_and_counts_episodes():
    from trainers.lab.significance import episodes_to_reach

    train = np.array([[0.0, 0.4, 0.0, 0.6, 0.6], [0.0, 0.0, 0.2, 0.2, np.nan]])
    # seed means 0, .2, .1, .4, .6 -> running means 0, .1, .15, .25, .5
    assert episodes_to_reach(train, [0.1, 0.2, 0.5, 0.7], per_iteration=8) == ["16", "32", "40", "-"]
    assert episodes_to_reach(train, [0.0], per_iteration=3) == ["3"]


def test_holm_on_a_family_of_one_and_of_ties():
    from trainers.lab.significance import holm

    assert holm([0.03]) == [0.03]
    assert holm([0.02, 0.02, 0.02]) == [0.06, 0.06, 0.06]
    assert holm([0.5, 0.6]) == [1.0, 1.0]  # capped at 1
    assert holm([]) == []


def test_paired_bootstrap_takes_bool_wins_resamples_every_pair_and_is_symmetric():
    from trainers.statistics import paired_bootstrap_ci

    start = np.array([False, True, False, False] * 10)  # eval records keep wins; bools must work
    end = np.array([True, True, False, True] * 10)
    assert paired_bootstrap_ci(start, end)[0] == pytest.approx(0.5)
    # only pair 0 differs: a resample that never drew it would give an interval of [0, 0]
    diff, lo, hi = paired_bootstrap_ci([0.0] * 4, [1.0, 0.0, 0.0, 0.0], n_boot=2000)
    assert diff == 0.25 and lo == 0.0 and hi > 0.0
    rng = np.random.default_rng(5)
    d = rng.normal(0.1, 1.0, size=400)
    z = np.zeros_like(d)
    diff, lo, hi = paired_bootstrap_ci(z, d, n_boot=8000, seed=1, alpha=0.5)
    se = d.std() / np.sqrt(d.size)
    assert diff - lo == pytest.approx(0.674 * se, rel=0.15) and hi - diff == pytest.approx(0.674 * se, rel=0.15)
    assert paired_bootstrap_ci(z, d, seed=7) == paired_bootstrap_ci(z, d, seed=7) != paired_bootstrap_ci(z, d, seed=8)


def test_paired_t_p_of_a_difference_without_spread():
    from trainers.lab.significance import paired_t_p

    assert paired_t_p([0.25, 0.25, 0.25]) == 0.0 and paired_t_p([-0.5, -0.5]) == 0.0
    assert paired_t_p([0.0, 0.0, 0.0]) == 1.0


def test_an_outcome_at_exactly_tau_r_is_a_success_and_no_mixed_group_counts_nothing():
    from wrappers.signals import TAU_R

    res = within_group_auc(np.array([0.9, 0.1]), np.array([TAU_R, 0.0]), np.array([0, 0]))
    assert (res.auc, res.pairs, res.groups) == (1.0, 1, 1)
    res = auc_with_ci(np.array([0.9, 0.1]), np.array([TAU_R, 0.0]), np.array([0, 0]))
    assert (res.auc, res.pairs, res.groups) == (1.0, 1, 1)
    none = within_group_auc(np.array([0.9, 0.1]), np.array([0.0, 0.0]), np.array([0, 0]))
    assert np.isnan(none.auc) and (none.pairs, none.groups) == (0, 0)


def test_auc_interval_is_the_percentile_bootstrap_over_mixed_groups():
    """The documented interval: resample the mixed groups with replacement (seeded), pool each
    resample's pair scores, take the 2.5th and 97.5th percentiles; two groups already give one."""
    rng = np.random.default_rng(4)
    g = np.repeat(np.arange(12), 4)
    won = rng.random(48) < 0.5
    p = rng.random(48) + 0.3 * won
    res = auc_with_ci(p, won.astype(float), g, n_boot=700, seed=2)
    sums, counts = [], []
    for k in range(12):
        m = g == k
        diff = p[m & won][:, None] - p[m & ~won][None, :]
        if diff.size:
            sums.append(np.sum(diff > 0) + 0.5 * np.sum(diff == 0))
            counts.append(diff.size)
    sums, counts = np.array(sums, float), np.array(counts, float)
    idx = np.random.default_rng(2).integers(0, counts.size, size=(700, counts.size))
    expected = np.percentile(sums[idx].sum(axis=1) / counts[idx].sum(axis=1), [2.5, 97.5])
    assert res.ci == pytest.approx(tuple(expected)) and (res.pairs, res.groups) == (int(counts.sum()), counts.size)
    assert auc_with_ci(p, won.astype(float), g) == auc_with_ci(p, won.astype(float), g)  # seeded by default
    two = auc_with_ci(np.array([2.0, 1.0, 1.0, 2.0]), np.array([1.0, 0.0, 1.0, 0.0]), np.array([0, 0, 1, 1]))
    assert two.ci == (0.0, 1.0)  # two mixed groups (AUC 1 and 0): resamples of both


def test_every_mixed_group_can_be_drawn_by_the_bootstrap():
    # group 0 alone has AUC 1; a bootstrap that never drew it would put the whole interval at 0
    p = np.array([1.0, 0.0, 0.0, 1.0, 0.0, 1.0])
    r = np.array([1.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    res = auc_with_ci(p, r, np.array([0, 0, 1, 1, 2, 2]), n_boot=500)
    assert res.ci[0] == 0.0 and res.ci[1] > 0.0
