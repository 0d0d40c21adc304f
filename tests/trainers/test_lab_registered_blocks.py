"""The lab's registered blocks as a reader meets them: the committed tables come out of their
kept runs to the printed digit, a registered contrast is read as registered, a partial block
shows no outcome, and every verdict says how much it rests on a few seeds."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from lab_records import run_with_evals
from scipy import stats

from trainers.lab import registered, report
from trainers.lab.analysis import PrimaryTest, primary_test, primary_verdict
from trainers.lab.significance import paired_t_p, paired_t_power, robustness, seeds_for_power
from trainers.statistics import t975, t_two_sided_p

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "block, lab",
    [("credit_lab", "alfworld"), ("credit_lab_confirm", "confirm"), ("credit_lab_tree", "tree")],
)
def test_a_committed_blocks_table_comes_out_of_its_kept_runs_to_the_printed_digit(tmp_path, block, lab):
    out = tmp_path / block
    shutil.copytree(ROOT / "benchmarks" / "results" / block, out)
    (out / "table.md").unlink()
    proc = subprocess.run(
        [sys.executable, "-m", "trainers.lab", "--lab", lab, "--report", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / "table.md").read_text() == (ROOT / "benchmarks" / "results" / block / "table.md").read_text()


def test_the_tree_blocks_table_says_how_much_its_verdict_rests_on_a_few_seeds():
    table = (ROOT / "benchmarks" / "results" / "credit_lab_tree" / "table.md").read_text()
    assert "+0.112 [+0.031, +0.194]" in table and "p = 0.009" in table
    assert "19 of 28 nonzero seeds positive (sign test p = 0.087)" in table and "median seed +0.066" in table
    assert "Wilcoxon signed-rank p = 0.020" in table and "within [+0.097, +0.124]" in table
    assert (ROOT / "benchmarks" / "results" / "credit_lab_tree" / "per_seed.png").stat().st_size > 5_000


def test_the_tests_are_scipys():
    d = np.array([0.1, 0.3, -0.2, 0.25, 0.05, 0.4])
    assert paired_t_p(d) == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue, rel=1e-12)
    lo, hi = stats.t.interval(0.95, d.size - 1, loc=d.mean(), scale=stats.sem(d))
    assert d.mean() - t975(d.size - 1) * stats.sem(d) == pytest.approx(lo) and hi == pytest.approx(
        d.mean() + t975(d.size - 1) * stats.sem(d)
    )
    assert t_two_sided_p(2.0, 9) == pytest.approx(2 * stats.t.sf(2.0, 9))
    lam = 0.1 / 0.21 * np.sqrt(37)
    crit = stats.t.ppf(0.975, 36)
    assert paired_t_power(0.1, 0.21, 37) == pytest.approx(stats.nct.sf(crit, 36, lam) + stats.nct.cdf(-crit, 36, lam))
    assert seeds_for_power(0.1, 0.21) == 37
    rob = robustness(d)
    assert rob["wilcoxon_p"] == pytest.approx(stats.wilcoxon(d).pvalue)
    assert rob["sign_p"] == pytest.approx(stats.binomtest(5, 6, 0.5).pvalue) and rob["positive"] == 5
    loo = [np.delete(d, i).mean() for i in range(d.size)]
    assert (rob["loo_lo"], rob["loo_hi"]) == pytest.approx((min(loo), max(loo)))


def test_the_dynamic_block_registers_its_contrast_seeds_and_budget():
    test = primary_test(ROOT / "configs" / "credit_lab_dynamic.yaml")
    assert test.contrast == ("progpo-gigpo", "gigpo+dynamic") and test.alpha == 0.05
    assert test.seeds == tuple(range(52, 89))  # fresh: 0-51 were the earlier blocks'
    from trainers.config import TrainConfig, load_yaml

    cfg = TrainConfig.from_dict(load_yaml(ROOT / "configs" / "credit_lab_dynamic.yaml"))
    assert cfg.budget_episodes == 1920 and cfg.iterations == 30 and not cfg.dynamic_sampling


def _by(diffs: list[float], a: str = "progpo-gigpo", b: str = "gigpo+dynamic") -> dict:
    seeds = range(len(diffs))
    return {
        a: [run_with_evals(a, s, [(0, 0.1), (30, 0.3 + d)]) for s, d in zip(seeds, diffs)],
        b: [run_with_evals(b, s, [(0, 0.1), (12, 0.3)]) for s in seeds],
        "gigpo": [run_with_evals("gigpo", s, [(0, 0.1), (30, 0.9)]) for s in seeds],  # not in the contrast
    }


def test_a_registered_contrast_is_read_as_a_minus_b_over_the_registered_seeds_only():
    diffs = [0.2, 0.1, 0.3, 0.15, 0.25]
    test = PrimaryTest(tuple(range(5)), (), 0.05, ("progpo-gigpo", "gigpo+dynamic"))
    verdict = primary_verdict(_by(diffs), test)
    assert verdict["complete"] and verdict["per_seed"] == pytest.approx(diffs)
    assert verdict["estimate"] == pytest.approx(np.mean(diffs)) and verdict["p"] == pytest.approx(paired_t_p(diffs))
    assert verdict["text"].startswith("progpo-gigpo raises final held-out success against gigpo+dynamic")
    flipped = primary_verdict(_by([-d for d in diffs]), test)
    assert flipped["decision"] == "lowers"
    null = primary_verdict(_by([0.1, -0.1, 0.05, -0.05, 0.0]), test)
    assert null["decision"] == "cannot tell" and "this lab cannot tell progpo-gigpo from gigpo+dynamic" in null["text"]
    waiting = primary_verdict(_by(diffs[:4]), test)
    assert not waiting["complete"] and "estimate" not in waiting and "4 of the 5 registered seeds" in waiting["text"]


def test_a_partial_registered_block_shows_no_per_arm_outcome(monkeypatch):
    test = PrimaryTest((0, 1, 2), (), 0.05, ("progpo-gigpo", "gigpo+dynamic"))
    for module in (report, registered):
        monkeypatch.setattr(module, "registered_primary", lambda lab, config: test)
    by = _by([0.4, 0.3])  # two of three seeds in
    entries = [
        {**e, "state_key": "canonical", "config": {"num_groups": 8, "group_size": 8}, "acted": [], "train_core_s": 60.0}
        for rs in by.values()
        for e in rs
    ]
    for e in entries:
        e["eval"] = [{**x, "eval/episodes": 144, "by_task_type": {}} for x in e["eval"]]
        e["train"] = [{**e["train"][0], "train/success": 0.9, "first_collection": 0.875}]
    args = argparse.Namespace(
        lab="dynamic", pilot=False, methods=list(by), seeds=[0, 1, 2], iterations=30, state_key="canonical",
        config="configs/credit_lab_dynamic.yaml", levels=[0.1], report=True, workers=2,
    )  # fmt: skip
    text = report.report(args, entries, wall_s=0.0)
    assert "Partial block: 6 of 9 runs finished" in text and "No verdict yet" in text
    assert "withheld until every registered run is in" in text
    assert "0.875" in text  # the first collection: fixed before the arms diverge
    for outcome in ("0.300", "0.700", "0.600", "0.900", "eval it", "final eval", "Episodes to reach"):
        assert outcome not in text, outcome


def test_the_partial_json_of_a_registered_block_keeps_no_outcome(tmp_path, monkeypatch):
    from trainers.lab import cli

    monkeypatch.setattr(cli, "withheld", lambda args, entries: True)
    monkeypatch.setattr(cli, "report", lambda args, entries, wall_s: "table\n")
    monkeypatch.setattr(cli, "lab_record", lambda args, entries: {"progpo_on_off": {"final": 0.1}, "validity": {}})
    args = argparse.Namespace(
        out=tmp_path, json_name="credit_lab.json", config=ROOT / "configs" / "x.yaml", lab="dynamic"
    )
    entries = [
        {"method": "gigpo", "seed": 52, "train": [{"train/success": 0.5}], "eval": [{"eval/success": 0.4}], "acted": []}
    ]
    cli.write(args, entries, 0.0)
    record = json.loads((tmp_path / "credit_lab.json").read_text())
    assert record["runs"] == [{"method": "gigpo", "seed": 52}] and "progpo_on_off" not in record
    assert not (tmp_path / "curves.png").exists() and not (tmp_path / "per_seed.png").exists()


def test_the_registered_slope_secondary_is_read_with_the_primary_and_only_then(monkeypatch):
    from trainers.lab import analysis

    firsts = [0.5, 0.6, 0.7, 0.8, 0.9]
    by = _by([0.1, 0.1, 0.1, 0.1, 0.1])
    for rs in by.values():
        for r, f in zip(rs, firsts):
            r["train"] = [{"first_collection": f, "all_failed_fraction": 0.0}]
    for r, f in zip(by["progpo-gigpo"], firsts):  # the term's effect over gigpo grows with the trap
        r["eval"][-1]["eval/success"] = 0.9 + f
    test = PrimaryTest(tuple(range(5)), (), 0.05, ("progpo-gigpo", "gigpo+dynamic"))
    for module in (report, registered):
        monkeypatch.setattr(module, "registered_primary", lambda lab, config: test)
    args = argparse.Namespace(lab="dynamic", config="configs/credit_lab_dynamic.yaml")
    lines = "\n".join(registered.verdict_lines(args, by))
    fit = analysis.covariate_slope(by, "progpo-gigpo", "gigpo", range(5))
    assert fit["slope"] == pytest.approx(1.0) and fit["seeds"] == 5
    assert (
        "**Registered secondary: progpo-gigpo - gigpo final held-out success grows with the all-failed share of the "
        "first collection:** OLS slope +1.000" in lines
    )
    # the covariate is the first collection's, never the off arm's outcome
    assert analysis.covariate_slope(by, "progpo-gigpo", "gigpo", range(6)) is None  # a seed missing: no look
    partial = {m: rs[:4] for m, rs in by.items()}
    assert "Registered secondary" not in "\n".join(registered.verdict_lines(args, partial))
