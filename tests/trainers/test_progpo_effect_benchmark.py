"""The credit-trap lab (python -m trainers.lab) on a toy config: runs, resumes,
records and re-runs bit for bit."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trainers.lab import analysis, cli, methods, plots, registered, report, runs
from trainers.lab.analysis import validity_criteria

sys.path.insert(0, str(Path(__file__).parent))
from lab_records import run_with_evals, write_kept_run

ROOT = Path(__file__).resolve().parents[2]
#: the lab's criteria, as configs/credit_lab.yaml pre-registers them
CRITERIA = validity_criteria(ROOT / "configs" / "credit_lab.yaml")

TOY = """env: rooms
model: tiny
max_steps: 4
num_groups: 2
group_size: 2
eval_episodes: 4
baseline_random: false
eval_extra_split: none
init: none
lora: false
device: cpu
env_backend: sync
torch_threads: 1
history_k: 2
lr: 1.0e-3
"""


def test_mde_at_80_percent_power_matches_the_formula():
    d = np.array([0.05, -0.02, 0.08, 0.01])
    sd = d.std(ddof=1)
    assert analysis.mde_80(d, 8) == pytest.approx((2.364624 + 0.8416) * sd / np.sqrt(8))  # t(0.975, 7)


@pytest.mark.slow
def test_runs_record_and_rerun_reproduces_then_catches_a_change(tmp_path, capsys):
    config = tmp_path / "toy.yaml"
    config.write_text(TOY)
    out, work = tmp_path / "out", tmp_path / "work"
    common = ["--config", str(config), "--out", str(out), "--work", str(work), "--iterations", "2", "--workers", "1"]
    assert cli.main([*common, "--methods", "grpo", "progpo-grpo", "--seeds", "0"]) == 0
    data = json.loads((out / "progpo_effect.json").read_text())
    assert sorted((r["method"], r["seed"], r["state_key"]) for r in data["runs"]) == [
        ("grpo", 0, "canonical"),
        ("progpo-grpo", 0, "canonical"),
    ]
    run = next(r for r in data["runs"] if r["method"] == "progpo-grpo")
    assert [row["iteration"] for row in run["train"]] == [1, 2] and run["config"]["estimator"] == "progpo-grpo"
    assert [e["iteration"] for e in run["eval"]] == [0, 1, 2] and all(e["eval/episodes"] == 4 for e in run["eval"])
    assert set(run["train"][0]) >= {"train/success", "all_failed_fraction", "coverage_rate", "repeat_rate"}
    table = (out / "table.md").read_text()
    assert "| progpo-grpo | 1 |" in table and "progpo-grpo - grpo:" in table and (out / "curves.png").exists()
    assert "(1 seed)" in table and "over 1 seed (no interval)" in table  # one seed gives no interval, not +- 0

    capsys.readouterr()
    assert cli.main([*common, "--rerun", "0", "progpo-grpo"]) == 0
    assert "every metric reproduced" in capsys.readouterr().out
    run["train"][1]["train/success"] = 0.123456  # a recorded figure that the rerun cannot give
    (out / "progpo_effect.json").write_text(json.dumps(data))
    assert cli.main([*common, "--rerun", "0", "progpo-grpo"]) == 1
    assert "DIFFERS" in capsys.readouterr().out

    # a finished run is reused: a second invocation starts no trainer and gives the same records
    before = (out / "runs" / "grpo_canonical_seed0" / "metrics.jsonl").read_bytes()
    assert cli.main([*common, "--methods", "grpo", "--seeds", "0"]) == 0
    assert (out / "runs" / "grpo_canonical_seed0" / "metrics.jsonl").read_bytes() == before

    # --report tables the finished runs alone: the unfinished seed 1 is left out, not started
    assert cli.main([*common, "--report", "--methods", "grpo", "progpo-grpo", "--seeds", "0", "1"]) == 0
    assert not (out / "runs" / "grpo_canonical_seed1").exists() and not list(work.rglob("grpo_canonical_seed1*"))
    assert sorted(r["seed"] for r in json.loads((out / "progpo_effect.json").read_text())["runs"]) == [0, 0]
    capsys.readouterr()
    assert cli.main([*common, "--report", "--methods", "always", "--seeds", "0"]) == 2
    assert capsys.readouterr().err.startswith("error: no finished run of always")


def _record(config: dict, train: list) -> dict:
    return {
        "runs": [{"method": "grpo", "seed": 0, "state_key": "canonical", "config": config, "train": train, "eval": []}]
    }


ROW = {"iteration": 1, **{k: 0.0 for k in methods.TRAIN_KEYS}}


@pytest.mark.parametrize(
    "entry, match",
    [
        (_record("not a mapping", [ROW]), "'config' is not a mapping"),
        (_record({}, []), "'train' is not a non-empty list"),
        (_record({}, [{"iteration": "one"}]), "is not an iteration record"),
        (_record({}, [{"iteration": 1, "train/success": 0.1}]), "iteration 1 lacks"),
        ({"runs": "nope"}, "is not a progpo_effect record"),
    ],
)
def test_rerun_of_a_malformed_record_is_one_line(tmp_path, capsys, entry, match):
    out = tmp_path / "out"
    out.mkdir()
    (out / "progpo_effect.json").write_text(json.dumps(entry))
    assert cli.main(["--out", str(out), "--work", str(tmp_path / "work"), "--rerun", "0", "grpo"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and match in err and "\n" not in err, err


def test_a_failed_rerun_says_why_and_keeps_its_log(tmp_path, capsys):
    import yaml

    out = tmp_path / "out"
    out.mkdir()
    config = {**yaml.safe_load(TOY), "seed": 10**23}  # well-formed record, a config the trainer refuses
    (out / "progpo_effect.json").write_text(json.dumps(_record(config, [ROW])))
    assert cli.main(["--out", str(out), "--work", str(tmp_path / "work"), "--rerun", "0", "grpo"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "seed must be an integer" in err and "\n" not in err, err
    log = Path(err.rsplit("its log: ", 1)[1])
    assert log.is_file() and "seed must be an integer" in log.read_text()


_run = run_with_evals


def test_auc_is_the_mean_success_under_the_trapezoids():
    # evaluations at 0, 15, 30: (0.1 + 0.3) / 2 * 15 + (0.3 + 0.5) / 2 * 15 = 9.0 over a span of 30
    assert analysis.auc(_run("gigpo", 0, [(0, 0.1), (15, 0.3), (30, 0.5)])) == pytest.approx(0.3)
    assert analysis.auc(_run("gigpo", 0, [(0, 0.25)])) == 0.25


def _lab(gigpo_final: list[float], grpo_final: list[float], trap: float = 0.9) -> dict:
    return {
        "gigpo": [_run("gigpo", s, [(0, 0.05), (30, y)], trap) for s, y in enumerate(gigpo_final)],
        "grpo": [_run("grpo", s, [(0, 0.05), (30, y)], trap) for s, y in enumerate(grpo_final)],
    }


def test_the_validity_thresholds_are_the_pre_registered_config_s(tmp_path):
    from trainers.lab.analysis import ValidityCriteria

    assert CRITERIA == ValidityCriteria(trap_min=0.6, room_min=0.2, seeds=8)
    stricter = tmp_path / "stricter.yaml"
    stricter.write_text("notes:\n  preregistration:\n    validity: {trap_min: 0.95, room_min: 0.2, seeds: 8}\n")
    separated = _lab([0.40, 0.45, 0.50, 0.42, 0.48, 0.39, 0.44, 0.47], [0.30, 0.33, 0.35, 0.31, 0.36, 0.30, 0.32, 0.34])
    v = analysis.validity(separated, validity_criteria(stricter))
    assert not v["checks"]["trap"] and v["verdict"] == "cannot discriminate" and v["criteria"]["trap_min"] == 0.95
    (tmp_path / "none.yaml").write_text("env: rooms\n")
    assert validity_criteria(tmp_path / "none.yaml") is None and analysis.validity(separated, None) is None
    (tmp_path / "bad.yaml").write_text("notes: {preregistration: {validity: {trap_min: 0.6}}}\n")
    with pytest.raises(ValueError, match="needs trap_min, room_min and seeds"):
        validity_criteria(tmp_path / "bad.yaml")


def test_validity_needs_the_trap_the_room_and_an_interval_above_zero_at_8_seeds():
    separated = _lab([0.40, 0.45, 0.50, 0.42, 0.48, 0.39, 0.44, 0.47], [0.30, 0.33, 0.35, 0.31, 0.36, 0.30, 0.32, 0.34])
    v = analysis.validity(separated, CRITERIA)
    assert v["verdict"] == "discriminates" and all(v["checks"].values())
    assert v["gigpo_minus_grpo"]["mean"] == pytest.approx(0.1175) and v["gigpo_minus_grpo"]["lo"] > 0
    assert v["gigpo_rise"] == pytest.approx(np.mean([0.40, 0.45, 0.50, 0.42, 0.48, 0.39, 0.44, 0.47]) - 0.05)

    mixed = _lab([0.40, 0.20, 0.50, 0.30, 0.48, 0.19, 0.44, 0.27], [0.30, 0.33, 0.35, 0.31, 0.36, 0.30, 0.32, 0.34])
    v = analysis.validity(mixed, CRITERIA)
    assert v["verdict"] == "cannot discriminate" and v["checks"]["trap"] and not v["checks"]["discrimination"]
    assert v["gigpo_minus_grpo"]["lo"] < 0 < v["gigpo_minus_grpo"]["hi"]

    no_trap = _lab(
        [0.40, 0.45, 0.50, 0.42, 0.48, 0.39, 0.44, 0.47], [0.30, 0.33, 0.35, 0.31, 0.36, 0.30, 0.32, 0.34], trap=0.3
    )
    assert analysis.validity(no_trap, CRITERIA)["verdict"] == "cannot discriminate"
    assert analysis.validity(_lab([0.4, 0.5], [0.1, 0.2]), CRITERIA)["verdict"].startswith("not decided")
    assert analysis.validity({"gigpo": separated["gigpo"]}, CRITERIA) is None


def test_paired_differences_use_the_seeds_both_methods_ran():
    by = {
        "a": [_run("a", s, [(0, y)]) for s, y in ((0, 0.5), (1, 0.7), (2, 0.2))],
        "b": [_run("b", s, [(0, y)]) for s, y in ((1, 0.4), (2, 0.3), (3, 0.9))],
    }
    p = analysis.paired(by, "a", "b", analysis.auc)
    assert p["seeds"] == [1, 2] and p["per_seed"] == pytest.approx([0.3, -0.1]) and p["mean"] == pytest.approx(0.1)
    assert analysis.paired(by, "a", "missing", analysis.auc) is None


def test_many_comparisons_are_holm_adjusted_as_one_family():
    base = [0.30, 0.25, 0.40, 0.35, 0.20, 0.28, 0.33, 0.31]
    shift = {
        "clear": [0.12, 0.10, 0.14, 0.11, 0.13, 0.12, 0.10, 0.15],  # every seed ahead: survives
        "lucky": [0.15, -0.01, 0.12, 0.02, 0.10, -0.02, 0.09, 0.03],  # p 0.031 alone
        "none": [0.05, -0.04, 0.02, -0.06, 0.03, 0.01, -0.02, 0.00],
    }
    by = {"gigpo": [_run("gigpo", s, [(0, 0.05), (30, y)]) for s, y in enumerate(base)]}
    for m, d in shift.items():
        by[m] = [_run(m, s, [(0, 0.05), (30, y + dy)]) for s, (y, dy) in enumerate(zip(base, d))]
    fam = {r["method"]: r for r in analysis.multiplicity(by, ["gigpo", "clear", "lucky", "none"])}
    assert set(fam) == {"clear", "lucky", "none"}  # the baseline is not compared with itself
    assert fam["lucky"]["p"] < 0.05 and fam["lucky"]["diff"]["lo"] > 0  # its own interval excludes 0 ...
    assert fam["lucky"]["p_holm"] >= 0.05  # ... but not once the family of three is accounted for
    assert fam["clear"]["p_holm"] < 0.001 and fam["none"]["p_holm"] == pytest.approx(fam["none"]["p"])
    text = "\n".join(report._multiplicity_lines(list(fam.values()), "Pure RL remedies"))
    assert "3 comparisons against gigpo" in text and "| clear | 8 | +0.121" in text and "| **0.000** |" in text
    lucky = next(line for line in text.splitlines() if line.startswith("| lucky |"))
    assert "**" not in lucky  # bold marks the Holm-adjusted p, not the one-at-a-time p under 0.05


def test_where_a_remedy_acted_is_blank_for_a_method_without_that_term():
    # the trainer logs every share, a zero where the term is off: the table shows a blank there, not 0.000
    by = {
        m: [{"method": m, "seed": 0, "acted": [{"iteration": 1, "ProGPO groups": share, "PlanPO groups": 0.0}]}]
        for m, share in (("gigpo", 0.0), ("progpo-gigpo", 0.4))
    }
    by["planpo"] = [
        {"method": "planpo", "seed": 0, "acted": [{"iteration": 1, "ProGPO groups": 0.0, "PlanPO groups": 0.5}]}
    ]
    lines = report._acted_lines(by)
    assert "| method | ProGPO groups | PlanPO groups |" in lines
    assert "| gigpo |  |  |" in lines and "| progpo-gigpo | 0.400 |  |" in lines and "| planpo |  | 0.500 |" in lines


def test_validity_reads_the_trap_at_iteration_1_and_tests_the_fresh_seeds_apart():
    gigpo = [0.40, 0.45, 0.50, 0.42, 0.48, 0.39, 0.44, 0.47]
    grpo = [0.10, 0.12, 0.35, 0.31, 0.36, 0.30, 0.32, 0.34]  # the pilot seeds 0-1 carry most of the gap
    by = _lab(gigpo, grpo)
    for r in by["gigpo"]:  # the trap is read where it is set, at iteration 1, not where training ended
        r["train"].append({"iteration": 30, "all_failed_fraction": 0.1})
    v = analysis.validity(by, CRITERIA, pilot_seeds=(0, 1))
    assert v["all_failed_it1"] == pytest.approx(0.9) and v["checks"]["trap"]
    fresh = v["gigpo_minus_grpo_fresh"]
    assert fresh["seeds"] == [2, 3, 4, 5, 6, 7] and v["gigpo_minus_grpo"]["seeds"] == list(range(8))
    assert fresh["mean"] == pytest.approx(np.mean(np.subtract(gigpo, grpo)[2:]))
    assert v["pilot_seeds"] == [0, 1] and fresh["mean"] < v["gigpo_minus_grpo"]["mean"]


def test_the_families_leave_out_the_validity_pair_and_one_seed_arms():
    by = _lab([0.40, 0.45, 0.50], [0.30, 0.33, 0.35])
    by["planpo"] = [_run("planpo", s, [(0, 0.05), (30, y)]) for s, y in enumerate([0.5, 0.4, 0.6])]
    by["hgpo"] = [_run("hgpo", 0, [(0, 0.05), (30, 0.5)])]  # one seed: no test, not a family member
    by["gigpo+privileged"] = [_run("gigpo+privileged", s, [(0, 0.05), (30, 0.6)]) for s in range(3)]
    fams = analysis.families(by)
    assert [r["method"] for r in fams["pure"]] == ["planpo"]  # grpo is the validity test, judged alone
    assert [r["method"] for r in fams["labelled"]] == ["gigpo+privileged"]
    assert analysis.families({m: rs for m, rs in by.items() if m != "gigpo"}) is None


def test_completeness_counts_only_the_planned_runs():
    entries = [
        {"method": m, "seed": s} for m, s in (("grpo", 0), ("gigpo", 0), ("gigpo", 1), ("planpo", 0), ("grpo", 9))
    ]
    done = analysis.completeness(entries, ["grpo", "gigpo"], [0, 1])
    assert done == {"finished": 3, "planned": 4, "complete_seeds": [0]}  # planpo and seed 9 are outside the plan
    assert analysis.completeness([], ["grpo"], [0])["complete_seeds"] == []


@pytest.mark.slow
def test_the_lab_reports_validity_both_baselines_and_where_each_remedy_acted(tmp_path, capsys):
    out = tmp_path / "lab"
    common = [*_lab_argv(tmp_path), *"--iterations 2 --workers 2".split()]
    assert cli.main([*common, "--methods", "grpo", "planpo", "gigpo+hindsight", "--seeds", "0"]) == 0
    data = json.loads((out / "credit_lab.json").read_text())
    assert data["validity"] is None  # no gigpo run: the verdict is not measured, not guessed
    planpo = next(r for r in data["runs"] if r["method"] == "planpo")
    assert [row["iteration"] for row in planpo["acted"]] == [1, 2] and "PlanPO groups" in planpo["acted"][0]
    table = (out / "table.md").read_text()
    assert "The credit-trap lab, alfworld block" in table and "Not measured: the lab needs gigpo and grpo" in table
    assert "Not run yet (no finished seed): gigpo, progpo-gigpo," in table
    assert "| planpo | 1 |" in table and "Labelled tracks" in table and "gigpo+hindsight [hindsight" in table
    pure, tracks = table.split("Labelled tracks")[:2]
    assert "gigpo+hindsight" not in pure.split("## Pure RL")[1] and "| planpo" not in tracks.split("## Where")[0]
    assert "| method | PlanPO groups | teacher groups |" in table  # only the remedies these methods have
    capsys.readouterr()
    assert cli.main([*common, "--rerun", "0", "planpo"]) == 0  # reads credit_lab.json
    assert "every metric reproduced" in capsys.readouterr().out


def test_the_lab_plot_draws_the_paired_differences_panel(tmp_path):
    import argparse

    keys = ("train/success", "all_failed_fraction", "coverage_rate", "repeat_rate")
    entries = []
    for m, final in (("gigpo", 0.3), ("progpo-gigpo", 0.4), ("gigpo+privileged", 0.2)):
        for s in range(3):
            run = _run(m, s, [(0, 0.05), (2, final + 0.01 * s)])
            run["train"] = [{"iteration": i, **{k: 0.1 * i for k in keys}} for i in (1, 2)]
            entries.append(run)
    args = argparse.Namespace(
        lab="alfworld",
        methods=["gigpo", "progpo-gigpo", "gigpo+privileged"],
        config="credit_lab.yaml",
        state_key="canonical",
        seeds=[0, 1, 2],
    )
    plots.plot(args, entries, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 10_000
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    plots._forest(ax, {m: [e for e in entries if e["method"] == m] for m in args.methods})
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["progpo-gigpo (3)", "gigpo+privileged [privileged] (3)"]  # the track keeps its label
    plt.close(fig)


def test_progpo_on_off_pairs_each_base_and_pools_per_seed():
    finals = {
        "gigpo": [0.30, 0.20, 0.40],
        "progpo-gigpo": [0.35, 0.20, 0.50],
        "hgpo": [0.10, 0.30, 0.20, 0.25],
        "progpo-hgpo": [0.30, 0.30, 0.30, 0.35],
        "grpo": [0.2, 0.2, 0.2],
    }
    by = {m: [_run(m, s, [(0, 0.05), (30, y)]) for s, y in enumerate(ys)] for m, ys in finals.items()}
    res = analysis.progpo_on_off(by)
    assert [(r["on"], r["off"]) for r in res["pairs"]] == [("progpo-gigpo", "gigpo"), ("progpo-hgpo", "hgpo")]
    assert res["pairs"][1]["diff"]["seeds"] == [0, 1, 2, 3]  # each pair on every seed it ran
    pooled = res["pooled"]
    # seed 3 has no gigpo pair: the pooled contrast uses the seeds every pair ran, one value a seed
    assert pooled["seeds"] == [0, 1, 2]
    assert pooled["per_seed"] == pytest.approx([(0.05 + 0.20) / 2, 0.0, (0.10 + 0.10) / 2])
    assert pooled["mean"] == pytest.approx(np.mean([0.125, 0.0, 0.10])) and pooled["lo"] < pooled["mean"] < pooled["hi"]
    assert analysis.progpo_on_off({"gigpo": by["gigpo"], "grpo": by["grpo"]}) is None
    one = analysis.progpo_on_off({"gigpo": by["gigpo"], "progpo-gigpo": by["progpo-gigpo"]})
    assert one["pooled"] is None  # one base: nothing to pool
    text = "\n".join(report._on_off_lines(res, analysis.progpo_on_off(by, analysis.auc)))
    assert "exploratory: not pre-registered" in text and "| **pooled over the 2 bases** | | 3 | +0.075" in text


# ------------------------------------------------------------------ runs read back as what they ran
def _fake_run(runs: Path, method: str, seed: int, config: dict | None = None, **kept: Any) -> Path:
    """A finished run folder of the toy setting as the lab keeps it, ``config`` over the method's
    axes; ``kept``: :func:`lab_records.write_kept_run`'s ``records`` or ``success``."""
    import yaml

    folder = runs / methods.run_name(method, seed, "canonical")
    return write_kept_run(folder, method, seed, {**yaml.safe_load(TOY), **(config or {})}, **kept)


def _lab_argv(tmp_path: Path, config: str = TOY, name: str = "toy.yaml") -> list[str]:
    """The lab's command line on the config text ``config`` (written to ``tmp_path/name``), its
    results in ``tmp_path/lab`` and its run dirs in ``tmp_path/work``."""
    path = tmp_path / name
    path.write_text(config)
    return [
        "--lab",
        "alfworld",
        "--config",
        str(path),
        "--out",
        str(tmp_path / "lab"),
        "--work",
        str(tmp_path / "work"),
    ]


def _report(tmp_path: Path, *methods: str) -> int:
    return cli.main([*_lab_argv(tmp_path), *"--report --seeds 0 --methods".split(), *methods])


def test_every_method_sets_every_axis_on_the_command_line():
    for method in methods.METHODS:
        args = methods.METHODS[method]
        for axis in methods.AXES:
            flag = "--" + axis.replace("_", "-")
            assert flag in args or "--no-" + flag[2:] in args, (method, axis)
    assert methods.axes_of("gigpo")["distill"] == "none" and "privileged" in methods.METHODS["gigpo+privileged"]


@pytest.mark.parametrize(
    "line, key",
    [
        ("distill: hindsight", "distill"),
        ("rollout: tree\ntree: {branches: 2}", "rollout"),
        ("estimator: grpo", "estimator"),
        ("shuffle_coverage: true", "shuffle_coverage"),
        ("dynamic_sampling: true", "dynamic_sampling"),
    ],
)
def test_a_lab_config_that_sets_a_methods_axis_is_said_and_every_run_trains_its_methods_own(tmp_path, line, key):
    from trainers.config_flags import parse_args

    argv = [*_lab_argv(tmp_path, TOY + line + "\n", "my.yaml"), *"--seeds 0 --methods gigpo".split()]
    note = runs.config_axes_note(tmp_path / "my.yaml")
    assert note is not None and key in note and "not used by any run" in note and "\n" not in note
    args = cli.parse(argv)
    for method in ("gigpo", "progpo-gigpo", "gigpo+hindsight", "gigpo+dynamic"):
        cfg, _ = parse_args(runs.trainer_args(args, method, 0, 1, tmp_path / "w"))
        want = methods.axes_of(method)
        assert {k: getattr(cfg, k) for k in want} == want, method  # the config's value never reaches a run


@pytest.mark.parametrize(
    "config,records_say",
    [({"distill": "privileged"}, None), ({"rollout": "tree"}, None), ({}, "privileged (not pure RL)")],
)
def test_a_recorded_run_is_reported_by_what_it_ran_not_its_folder_name(tmp_path, capsys, config, records_say):
    runs = tmp_path / "lab" / "runs"
    _fake_run(runs, "grpo", 0)
    folder = _fake_run(runs, "gigpo", 0, config=config)
    if records_say:
        lines = [json.loads(ln) for ln in (folder / "metrics.jsonl").read_text().splitlines()]
        (folder / "metrics.jsonl").write_text("".join(json.dumps({**r, "distill": records_say}) + "\n" for r in lines))
    assert _report(tmp_path, "grpo", "gigpo") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "gigpo seed 0" in err and "not what 'gigpo' names" in err and "\n" not in err
    assert not (tmp_path / "lab" / "table.md").exists()


@pytest.mark.parametrize(
    "damage,said",
    [
        ("cut", "ends at iteration 1 of 2"),
        ("no-eval", "no evaluation"),
        ("no-config", "no config.yaml"),
        ("nan", "no finite held-out success"),
        ("not-json-record", "not a record"),
    ],
)
def test_the_report_names_a_half_written_run_in_one_line(tmp_path, capsys, damage, said):
    runs = tmp_path / "lab" / "runs"
    _fake_run(runs, "grpo", 0)
    folder = _fake_run(runs, "gigpo", 0)
    lines = (folder / "metrics.jsonl").read_text().splitlines()
    if damage == "cut":
        (folder / "metrics.jsonl").write_text("\n".join(lines[:1]) + "\n" + lines[1][:20])
    elif damage == "no-eval":
        (folder / "metrics.jsonl").write_text("\n".join(lines[:2]) + "\n")
    elif damage == "no-config":
        (folder / "config.yaml").unlink()
    elif damage == "nan":
        (folder / "metrics.jsonl").write_text("\n".join(lines).replace('"eval/success": 0.25', '"eval/success": NaN'))
    else:
        (folder / "metrics.jsonl").write_text("\n".join([*lines, "[1, 2]"]) + "\n")
    assert _report(tmp_path, "grpo", "gigpo") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "gigpo seed 0" in err and said in err and "\n" not in err, err


def test_whole_runs_report_and_a_rerun_with_a_bad_seed_is_one_line(tmp_path, capsys):
    runs = tmp_path / "lab" / "runs"
    _fake_run(runs, "grpo", 0)
    _fake_run(runs, "gigpo", 0, success=0.5)
    assert _report(tmp_path, "grpo", "gigpo") == 0
    assert "| gigpo | 1 |" in (tmp_path / "lab" / "table.md").read_text()
    capsys.readouterr()
    for argv in (["--rerun", "zero", "gigpo"], ["--rerun", "0", "gigpo+nothing"]):
        assert cli.main(["--out", str(tmp_path / "lab"), *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: --rerun SEED METHOD") and "\n" not in err


def test_a_block_still_running_says_how_much_is_in_and_which_seeds_are_whole(tmp_path):
    runs = tmp_path / "lab" / "runs"
    for method, seed in (("grpo", 0), ("gigpo", 0), ("gigpo", 1)):  # grpo seed 1 still running
        _fake_run(runs, method, seed)
    argv = [*_lab_argv(tmp_path), *"--report --methods grpo gigpo".split()]
    assert cli.main([*argv, "--seeds", "0", "1"]) == 0
    table = (tmp_path / "lab" / "table.md").read_text()
    assert "**Partial block: 3 of 4 runs finished; seeds with every method in: [0]." in table
    assert "| +0.000 (1 seed) |" in table  # a difference over one seed has no interval
    assert json.loads((tmp_path / "lab" / "credit_lab.json").read_text())["completeness"] == {
        "finished": 3,
        "planned": 4,
        "complete_seeds": [0],
    }
    assert cli.main([*argv, "--seeds", "0"]) == 0  # the block as planned is whole: no such line
    assert "Partial block" not in (tmp_path / "lab" / "table.md").read_text()
    assert json.loads((tmp_path / "lab" / "credit_lab.json").read_text())["completeness"]["complete_seeds"] == [0]


def test_runs_that_played_different_held_out_episodes_are_never_paired(tmp_path, capsys):
    runs = tmp_path / "lab" / "runs"
    train = {src: 0.5 for src in methods.TRAIN_KEYS.values()}

    def records(panels):
        return [{"iteration": i, "kind": "train", **train} for i in (1, 2)] + [
            {"iteration": i, "kind": "eval", "eval/success": 0.5, "eval/episodes": 4, "eval/panel": p}
            for i, p in zip((0, 2), panels)
        ]

    _fake_run(runs, "grpo", 0, records=records(["aaaa", "aaaa"]))
    _fake_run(runs, "gigpo", 0, records=records(["aaaa", "bbbb"]))
    assert _report(tmp_path, "grpo", "gigpo") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: seed 0's runs played different held-out episodes") and "bbbb" in err


def test_runs_of_other_code_are_refused_unless_mixed_is_allowed(tmp_path, capsys):
    runs = tmp_path / "lab" / "runs"
    for method, commit in (("grpo", "a" * 40), ("gigpo", "b" * 40)):
        folder = _fake_run(runs, method, 0)
        (folder / "provenance.jsonl").write_text(
            json.dumps(
                {
                    "iteration": 0,
                    "kind": "provenance",
                    "commit": commit,
                    "dirty": False,
                    "cpu": "x",
                    "versions": {},
                    "compute": {"batch_decisions": "on", "torch_threads": 1},
                }
            )
            + "\n"
        )
    assert _report(tmp_path, "grpo", "gigpo") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: the runs ran on different code") and "aaaaaaaaaaaa" in err and "--allow-mixed" in err
    assert cli.main([*_lab_argv(tmp_path), *"--report --seeds 0 --methods grpo gigpo --allow-mixed".split()]) == 0
    assert "**Mixed provenance (--allow-mixed)" in (tmp_path / "lab" / "table.md").read_text()


def test_a_run_resumed_on_other_code_or_path_or_dirty_pairs_with_nothing(tmp_path):
    path = {"batch_decisions": "on", "torch_threads": 1}

    def kept(*recs: dict) -> dict | None:
        folder = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        (folder / "provenance.jsonl").write_text("".join(json.dumps({"kind": "provenance", **r}) + "\n" for r in recs))
        return runs.provenance_of(folder)

    clean = {"commit": "a" * 40, "dirty": False, "compute": path}
    assert kept(clean, {**clean, "iteration": 7}) == {
        "commit": "a" * 40,
        "compute": path,
        "cpu": None,
        "versions": None,
    }
    assert kept({**clean, "dirty": True})["commit"] == "a" * 40 + "+dirty"  # uncommitted code is not commit a
    assert kept(clean, {**clean, "commit": "b" * 40})["commit"].startswith("mixed: ")
    assert "mixed" in kept(clean, {**clean, "compute": {**path, "torch_threads": 2}})["compute"]
    assert runs.provenance_of(tmp_path / "never_recorded") is None


@pytest.mark.git
def test_a_preregistered_block_takes_only_runs_of_the_commit_that_added_its_config(tmp_path):
    entries = [{"method": "gigpo", "seed": 8, "provenance": {"commit": "f" * 40, "compute": {}}}]
    problem = runs.preregistered_commit_problem(tmp_path / "not_committed.yaml", entries)
    assert "is not committed" in problem
    committed = ROOT / "configs" / "credit_lab.yaml"
    problem = runs.preregistered_commit_problem(committed, entries)
    assert "not made on" in problem and "gigpo seed 8" in problem


def test_strict_rerun_comparison_reads_every_numeric_field():
    a = [
        {"kind": "init", "iteration": 0, "bc/loss": 11.814424479, "time/init_s": 3.0},
        {"kind": "train", "iteration": 1, "update/kl": 0.5, "eval/won": [1, 0]},
    ]
    assert runs.strict_compare(a, [dict(r) for r in a], 2) == (2, None)
    b = [{**a[0], "bc/loss": 11.814422989, "time/init_s": 9.0}, a[1]]
    n, (rel, where) = runs.strict_compare(a, b, 2)
    assert n == 2 and where == "init iteration 0 bc/loss" and rel == pytest.approx(1.26e-7, rel=1e-2)
    c = [a[0], {**a[1], "update/kl": 0.51, "eval/won": [1, 1]}]  # the largest difference is named, in a list too
    assert runs.strict_compare(a, c, 2) == (2, (1.0, "train iteration 1 eval/won"))
    assert runs.strict_compare(a, c, 0) == (1, None)  # only the iterations asked for
    nan = [{"kind": "train", "iteration": 1, "update/kl": float("nan")}]
    assert runs.strict_compare(nan, [dict(nan[0])], 1) == (1, None)  # NaN in both: the same value
    assert runs.strict_compare(nan, [{**nan[0], "update/kl": 0.5}], 1)[1] == (
        float("inf"),
        "train iteration 1 update/kl",
    )


@pytest.mark.parametrize("method", list(methods.METHOD_AXES))
def test_each_runs_command_line_is_read_by_the_trainer_as_the_method_and_block_say(tmp_path, method):
    """What the lab passes the trainer, read by the trainer's own parser: the block's config, seed,
    iterations, state key and output dir, an evaluation halfway, a checkpoint every iteration,
    no bars or TensorBoard, and every axis of the method."""
    import argparse

    from trainers.config_flags import parse_args

    ns = argparse.Namespace(config=ROOT / "configs" / "credit_lab.yaml", state_key="exact")
    cfg, _ = parse_args(runs.trainer_args(ns, method, 5, 30, tmp_path / "run"))
    assert (cfg.seed, cfg.iterations, cfg.state_key, cfg.output_dir) == (5, 30, "exact", str(tmp_path / "run"))
    assert (cfg.eval_every, cfg.save_every, cfg.progress_bars, cfg.tensorboard) == (15, 1, False, False)
    for axis, value in methods.axes_of(method).items():
        assert getattr(cfg, axis) == value, f"{method}: {axis}"
    assert parse_args(runs.trainer_args(ns, method, 0, 1, tmp_path))[0].eval_every == 1  # one iteration: never 0


def test_runs_alike_in_another_key_order_pair_and_a_mixed_block_names_its_groups():
    """A compute path is compared by its content, not the order its record lists it in; a block
    that mixes commits names each group: its first four runs, then '...', and its size."""
    path = {"batch_decisions": "on", "torch_threads": 1}
    entry = lambda m, s, commit, compute: {"method": m, "seed": s, "provenance": {"commit": commit, "compute": compute}}  # noqa: E731 - a one-line callable, read where it is passed
    alike = [entry("gigpo", 0, "a" * 40, path), entry("grpo", 0, "a" * 40, dict(reversed(list(path.items()))))]
    assert runs.provenance_problem(alike) is None
    mixed = [entry("gigpo", s, "a" * 40, path) for s in range(5)] + [entry("grpo", 0, "b" * 40, path)]
    said = runs.provenance_problem(mixed)
    assert said == (
        "the runs ran on different code or compute paths (commit " + "a" * 40 + ', path {"batch_decisions": '
        '"on", "torch_threads": 1}: gigpo seed 0, gigpo seed 1, gigpo seed 2, gigpo seed 3 ... (5 runs); commit '
        + "b" * 40
        + ', path {"batch_decisions": "on", "torch_threads": 1}: grpo seed 0 (1 runs))'
    )
    assert runs.provenance_problem(mixed[1:]).count(" ...") == 0  # four runs: all named
    assert "not recorded: gigpo seed 9" in runs.provenance_problem(mixed + [{"method": "gigpo", "seed": 9}])


def test_strict_rerun_comparison_misses_nothing_after_a_skipped_field():
    """Wall-clock fields and flags are skipped wherever they stand, and every field after them is
    still read; a list of another length, a value that only one record has and a field of another
    kind of record are differences, never 'bit-exact'."""
    rec = {
        "kind": "train",
        "iteration": 1,
        "time/iteration_s": 3.0,
        "tokens_per_s": 90.0,
        "resumed": False,
        "update/kl": 0.5,
        "eval/won": [1, 0, 1],
    }
    same_but_clock = {**rec, "time/iteration_s": 7.0, "tokens_per_s": 40.0, "resumed": True}
    assert runs.strict_compare([rec], [same_but_clock], 1) == (1, None)
    assert runs.strict_compare([rec], [{**same_but_clock, "update/kl": 0.25}], 1) == (
        1,
        (0.5, "train iteration 1 update/kl"),
    )
    assert runs.strict_compare([rec], [{**rec, "eval/won": [1, 0]}], 1) == (
        1,
        (float("inf"), "train iteration 1 eval/won (3 entries vs 2)"),
    )
    assert runs.strict_compare([rec], [{k: v for k, v in rec.items() if k != "eval/won"}], 1) == (
        1,
        (float("inf"), "train iteration 1 eval/won (missing)"),
    )
    assert runs.strict_compare([rec], [{k: v for k, v in rec.items() if k != "update/kl"}], 1) == (
        1,
        (float("inf"), "train iteration 1 update/kl (missing)"),
    )
    none = {**rec, "eval/success": None, "eval/won": [1, None, 1]}
    assert runs.strict_compare([none], [{**none, "eval/success": 0.5}], 1) == (
        1,
        (float("inf"), "train iteration 1 eval/success"),
    )
    assert runs.strict_compare([none], [{**none, "eval/won": [1, 0, 1]}], 1) == (
        1,
        (float("inf"), "train iteration 1 eval/won"),
    )
    assert runs.strict_compare([none], [dict(none)], 1) == (1, None)
    # records pair by kind and iteration: an eval record is never compared with a train one
    assert runs.strict_compare([rec], [{**rec, "kind": "eval"}], 1) == (0, None)
    assert runs.strict_compare([rec, {**rec, "kind": "eval", "update/kl": 9.0}], [rec, {**rec, "kind": "eval"}], 1) == (
        2,
        (pytest.approx(17 / 18), "eval iteration 1 update/kl"),
    )


@pytest.mark.slow
def test_runs_spread_over_a_two_node_ray_cluster_match_local_runs(tmp_path):
    """--ray ADDRESS: each (method, seed) a Ray task on a 2-node loopback cluster (127.0.0.2); the
    records (wall-clock fields aside) equal those of the same runs made locally."""
    import os
    import sys as _sys

    pytest.importorskip("ray", reason="extra [ray] not installed")
    import ray

    _sys.path.insert(0, str(ROOT / "benchmarks"))
    from ray_cluster import LoopbackRayCluster

    from trainers.runs.metrics import TIMING_KEYS

    config = tmp_path / "toy.yaml"
    config.write_text(TOY)

    def run(where: str, extra: list[str]) -> dict:
        out = tmp_path / where
        assert (
            cli.main(
                [
                    "--config",
                    str(config),
                    "--out",
                    str(out),
                    "--work",
                    str(tmp_path / f"work_{where}"),
                    *"--iterations 1 --methods grpo --seeds 0 1".split(),
                    *extra,
                ]
            )
            == 0
        )
        return {
            p.parent.name: [
                {k: v for k, v in r.items() if k not in TIMING_KEYS and not k.startswith("time/")}
                for r in (json.loads(ln) for ln in p.read_text().splitlines())
            ]
            for p in sorted((out / "runs").glob("*/metrics.jsonl"))
        }

    local = run("local", ["--workers", "1"])
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    cluster = LoopbackRayCluster(num_nodes=2, num_cpus=1, env=env)
    try:
        cluster.start()
        remote = run("ray", ["--ray", cluster.address])
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.stop()
    assert sorted(local) == ["grpo_canonical_seed0", "grpo_canonical_seed1"] and remote == local


@pytest.mark.slow
def test_verify_at_puts_a_recorded_block_on_one_commit_run_by_run(tmp_path, capsys, monkeypatch):
    """Each recorded run's first iterations, re-run by the commit's trainer from its recorded
    config: bit-exact runs are verified on it, a run whose records differ is named to re-run, the
    verdicts are kept (a second pass re-runs nothing), and the commit's checkout is made once."""
    import subprocess

    from trainers.lab import verify

    out = tmp_path / "lab"
    common = [*_lab_argv(tmp_path), "--workers", "2"]
    assert cli.main([*common, "--iterations", "2", "--methods", "grpo", "progpo-grpo", "--seeds", "0"]) == 0
    kept = out / "runs" / "grpo_canonical_seed0" / "metrics.jsonl"
    rows = [json.loads(line) for line in kept.read_text().splitlines()]
    first = next(r for r in rows if r.get("kind") == "train" and r["iteration"] == 1)
    field = next(
        k
        for k, v in sorted(first.items())
        if not k.startswith("time/") and isinstance(v, float) and v > 0 and k not in ("tokens_per_s", "env_steps_per_s")
    )
    first[field] *= 1 + 1e-9  # a run of slightly other code
    kept.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # the working tree stands for the commit's checkout: what is verified is the comparison
    monkeypatch.setattr(verify, "worktree_at", lambda commit: runs.ROOT)
    head = verify.resolve_commit("HEAD")
    capsys.readouterr()
    toy = [*common, "--methods", "grpo", "progpo-grpo", "--seeds", "0"]
    assert cli.main([*toy, "--verify-at", "HEAD", "--verify-iterations", "1"]) == 1
    said = capsys.readouterr().out
    assert "progpo-grpo_canonical_seed0: bit-exact" in said
    assert (
        f"grpo_canonical_seed0: NOT bit-exact: largest relative difference 1e-09 in train iteration 1 {field}" in said
    )
    assert f"1 of 2 runs bit-exact at {head[:12]}; to re-run in full there: grpo_canonical_seed0" in said
    verdicts = verify.verified_commits(out)
    assert (
        verdicts["progpo-grpo_canonical_seed0"]["bit_exact"]
        and verdicts["progpo-grpo_canonical_seed0"]["commit"] == head
    )
    assert verdicts["grpo_canonical_seed0"]["worst"]["field"] == f"train iteration 1 {field}"
    assert cli.main([*toy, "--verify-at", "HEAD", "--verify-iterations", "1"]) == 1
    assert "verifying 0 of 2 runs" in capsys.readouterr().out  # kept verdicts: nothing re-run
    assert (
        cli.main([*common, "--methods", "grpo", "--seeds", "0", "--verify-at", "HEAD", "--verify-iterations", "1"]) == 1
    )
    assert "verifying 0 of 1 runs" in capsys.readouterr().out  # only the methods and seeds named

    monkeypatch.undo()
    tree = verify.worktree_at(head, under=tmp_path / "trees")
    assert (
        subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        == head
    )
    assert verify.worktree_at(head, under=tmp_path / "trees") == tree  # made once
    subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=runs.ROOT, check=True)
    assert cli.main([*common, "--verify-at", "no-such-rev"]) == 2
    assert "no such commit" in capsys.readouterr().err


# ------------------------------------------------------------------ the pre-registered primary
def test_the_confirmatory_config_states_its_primary_test():
    test = analysis.primary_test(ROOT / "configs" / "credit_lab_confirm.yaml")
    assert test == analysis.PrimaryTest(tuple(range(8, 24)), ("gigpo", "planpo", "hgpo", "gigpo+tree"), 0.05)
    assert analysis.primary_test(ROOT / "configs" / "credit_lab.yaml") is None  # the exploratory block has none


_BASES = ("gigpo", "planpo", "hgpo", "gigpo+tree")


def _block(shift: dict[int, float], seeds=(0, 1, 2, 3)) -> dict:
    """Every base off at a seed-dependent level, and on at that level plus ``shift[seed]`` (grpo beside)."""
    by = {"grpo": [_run("grpo", s, [(0, 0.05), (30, 0.1)]) for s in seeds]}
    for k, b in enumerate(_BASES):
        by[b] = [_run(b, s, [(0, 0.05), (30, 0.2 + 0.01 * k + 0.02 * s)]) for s in seeds]
        by[f"progpo-{b}"] = [
            _run(f"progpo-{b}", s, [(0, 0.05), (30, 0.2 + 0.01 * k + 0.02 * s + shift.get(s, 0.0) + 0.004 * k)])
            for s in seeds
        ]
    return by


@pytest.mark.parametrize(
    "shift, decision",
    [
        ({0: 0.10, 1: 0.12, 2: 0.09, 3: 0.11}, "raises"),
        ({0: -0.10, 1: -0.12, 2: -0.09, 3: -0.11}, "lowers"),
        ({0: 0.10, 1: -0.12, 2: 0.09, 3: -0.11}, "cannot tell"),
        ({0: 0.10, 1: 0.03, 2: 0.12, 3: 0.01}, "cannot tell"),  # p 0.076: under 0.10, not under the registered 0.05
    ],
)
def test_the_primary_verdict_pools_the_registered_bases_per_seed(shift, decision):
    test = analysis.PrimaryTest((0, 1, 2, 3), _BASES, 0.05)
    by = _block(shift, seeds=(0, 1, 2, 3, 4) if decision == "raises" else (0, 1, 2, 3))
    if decision == "raises":  # a seed the registration does not name is left out, whatever it holds
        for m in by:
            by[m][4]["eval"][-1]["eval/success"] = -5.0 if m.startswith("progpo-") else 0.0
    v = analysis.primary_verdict(by, test)
    per_seed = [shift[s] + 0.004 * 1.5 for s in range(4)]  # the mean over the bases of on - off
    assert v["complete"] and v["seeds_in"] == 4 and v["decision"] == decision
    assert (v["bases"], v["alpha"], v["registered_seeds"]) == (list(_BASES), 0.05, [0, 1, 2, 3])
    assert f"p = {v['p']:.3f} {'<' if decision != 'cannot tell' else '>='} alpha 0.05, 4 seeds" in v["text"]
    assert v["estimate"] == pytest.approx(np.mean(per_seed)) and v["lo"] < v["estimate"] < v["hi"]
    from trainers.lab.significance import paired_t_p

    assert v["p"] == pytest.approx(paired_t_p(per_seed)) and (v["p"] < 0.05) == (decision != "cannot tell")
    if decision == "cannot tell":
        assert v["text"].startswith("this lab cannot tell whether ProGPO's term changes") and "p = " in v["text"]
    else:
        assert v["text"].startswith(f"ProGPO's term {decision} final held-out success over its 4 bases: on - off ")


def test_no_verdict_and_no_contrast_before_every_registered_seed_is_in(tmp_path):
    import argparse

    import yaml

    shift = {0: 0.10, 1: 0.12, 2: 0.09, 3: 0.11}
    by = _block(shift)
    by["progpo-hgpo"] = by["progpo-hgpo"][:3]  # one arm's last seed still running
    test = analysis.PrimaryTest((0, 1, 2, 3), _BASES, 0.05)
    v = analysis.primary_verdict(by, test)
    assert not v["complete"] and v["seeds_in"] == 3 and "estimate" not in v and "decision" not in v
    assert v["text"] == (
        "no verdict yet: 3 of the 4 registered seeds have every base's on and off run; the primary "
        "is read once all are in"
    )
    assert not analysis.primary_verdict({m: rs for m, rs in _block(shift).items() if m != "progpo-planpo"}, test)[
        "complete"
    ]

    config = tmp_path / "confirm.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "notes": {
                    "preregistration": {
                        "primary": "per-seed mean over the bases of on - off",
                        "seeds": [0, 1, 2, 3],
                        "bases": list(_BASES),
                        "alpha": 0.05,
                    }
                }
            }
        )
    )
    args = argparse.Namespace(
        lab="confirm", config=config, methods=list(by), out=tmp_path, criteria=CRITERIA, seeds=[0, 1, 2, 3]
    )
    entries = [r for rs in by.values() for r in rs]
    text = "\n".join(registered.verdict_lines(args, by) + report.lab_report(args, by, None))
    assert text.startswith("**Verdict on the pre-registered primary: No verdict yet: 3 of the 4 registered seeds")
    assert "Withheld until every registered seed is in" in text and "pooled over" not in text
    on_off = cli.lab_record(args, entries)["progpo_on_off"]
    assert on_off["final"] is None and on_off["auc"] is None and not on_off["verdict"]["complete"]
    assert "exploratory" not in on_off and on_off["preregistered"].startswith("primary of confirm.yaml")

    by = _block(shift)  # every seed in: the verdict, then the contrasts labelled as registered
    args.methods = list(by)
    text = "\n".join(registered.verdict_lines(args, by) + report.lab_report(args, by, None))
    assert text.startswith("**Verdict on the pre-registered primary: ProGPO's term raises final held-out success")
    assert "## Primary (pre-registered)" in text and "| **pooled over the 4 bases** | | 4 | +0.111" in text
    assert text.count(" (Holm ") == 4  # the per-base secondaries, Holm-adjusted as one family
    # the family against gigpo is reported, and said to be outside the registered tests
    assert (
        "judged alone above. **Descriptive: these comparisons against gigpo are not among the tests this block" in text
    )
    record = cli.lab_record(args, [r for rs in by.values() for r in rs])
    on_off = record["progpo_on_off"]
    assert on_off["verdict"]["decision"] == "raises" and on_off["final"]["pooled"]["seeds"] == [0, 1, 2, 3]
    assert record["multiplicity"]["not_registered"].startswith("descriptive: ")


def test_the_tree_replication_registers_one_base_and_its_verdict_is_that_pair_s_paired_t():
    test = analysis.primary_test(ROOT / "configs" / "credit_lab_tree.yaml")
    assert test == analysis.PrimaryTest(tuple(range(24, 52)), ("gigpo+tree",), 0.05)
    confirm = analysis.primary_test(ROOT / "configs" / "credit_lab_confirm.yaml")
    assert not set(test.seeds) & set(confirm.seeds) and not set(test.seeds) & set(range(8))  # fresh seeds
    shift = {0: 0.10, 1: 0.03, 2: 0.12, 3: 0.07}
    by = {m: rs for m, rs in _block(shift).items() if m in ("gigpo+tree", "progpo-gigpo+tree")}
    one = analysis.PrimaryTest((0, 1, 2, 3), ("gigpo+tree",), 0.05)
    v = analysis.primary_verdict(by, one)
    from trainers.lab.significance import paired_t_p

    per_seed = [shift[s] + 0.004 * 3 for s in range(4)]
    assert v["complete"] and v["estimate"] == pytest.approx(np.mean(per_seed))
    assert v["p"] == pytest.approx(paired_t_p(per_seed)) and v["decision"] == "raises"
    assert v["text"].startswith("ProGPO's term raises final held-out success over gigpo+tree: on - off +0.")
    assert not analysis.primary_verdict({"gigpo+tree": by["gigpo+tree"]}, one)["complete"]


def test_the_power_calculation_matches_the_noncentral_t_and_gives_the_registered_seed_count():
    from scipy import stats

    from trainers.lab.significance import paired_t_power, seeds_for_power

    for effect, sd, n in ((0.08, 0.1435, 28), (0.05, 0.2, 10), (0.3, 0.1, 3), (0.0, 0.1, 40)):
        df, nc = n - 1, effect / sd * np.sqrt(n)
        crit = stats.t.ppf(0.975, df)
        assert paired_t_power(effect, sd, n) == pytest.approx(
            1 - stats.nct.cdf(crit, df, nc) + stats.nct.cdf(-crit, df, nc), abs=1e-6
        )
    assert seeds_for_power(0.08, 0.1434711410001925) == 28  # configs/credit_lab_tree.yaml's 28 seeds
    assert paired_t_power(0.08, 0.1434711410001925, 27) < 0.8 <= paired_t_power(0.08, 0.1434711410001925, 28)
    with pytest.raises(ValueError):
        paired_t_power(0.1, 0.1, 2)
