"""The lab's report (trainers.lab.report) read cell by cell against figures computed here from the
runs: the table over seeds, the episodes to reach a level, the task types, the paired
differences, the validity lines and the compute line."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from trainers.lab import plots, report
from trainers.lab.analysis import ValidityCriteria
from trainers.statistics import t975


def _cell(values: list[float]) -> str:
    """mean +- half-width of the 95% t interval, written out (the report's own helper is not used)."""
    x = np.asarray(values, dtype=float)
    if x.size == 1:
        return f"{x[0]:.3f} (1 seed)"
    return f"{x.mean():.3f} +- {t975(x.size - 1) * x.std(ddof=1) / np.sqrt(x.size):.3f}"


def _entry(
    method: str,
    seed: int,
    evals: list[float],
    success: list[float],
    failed: list[float],
    types: dict[str, float] | None = None,
) -> dict:
    its = [0, len(success)] if len(evals) == 2 else list(range(len(evals)))
    return {
        "method": method,
        "seed": seed,
        "state_key": "canonical",
        "config": {"num_groups": 4, "group_size": 8},
        "train": [
            {
                "iteration": i + 1,
                "train/success": s,
                "all_failed_fraction": f,
                "coverage_rate": 0.1 * (i + 1),
                "repeat_rate": 0.5 - 0.05 * i,
            }
            for i, (s, f) in enumerate(zip(success, failed))
        ],
        "eval": [
            {
                "iteration": it,
                "eval/success": y,
                "eval/episodes": 8,  # the task types of the last one count
                "by_task_type": {t: (v if k == len(evals) - 1 else 0.0) for t, v in (types or {}).items()},
            }
            for k, (it, y) in enumerate(zip(its, evals))
        ],
        "acted": [],
        "train_core_s": 1800.0,
    }


# fmt: off
# method, seed, eval success at iterations 0 and 6, train success and all-failed share per iteration, task types
GIGPO = [
    _entry("gigpo", 0, [0.1, 0.5], [0.0, 0.1, 0.1, 0.2, 0.2, 0.3], [0.9, 0.8, 0.8, 0.7, 0.7, 0.6], {"pick": 1.0, "clean": 0.0}),
    _entry("gigpo", 1, [0.3, 0.5], [0.0, 0.0, 0.1, 0.1, 0.1, 0.2], [0.7, 0.7, 0.6, 0.6, 0.5, 0.5], {"pick": 0.5, "clean": 0.5}),
]
PROGPO = [
    _entry("progpo-gigpo", 0, [0.1, 0.6], [0.0, 0.2, 0.3, 0.3, 0.4, 0.4], [0.8, 0.6, 0.5, 0.5, 0.4, 0.4], {"pick": 1.0, "clean": 0.25}),
    _entry("progpo-gigpo", 1, [0.1, 0.8], [0.1, 0.2, 0.2, 0.3, 0.3, 0.3], [0.8, 0.7, 0.6, 0.5, 0.5, 0.5], {"pick": 0.75, "clean": 0.75}),
]
# fmt: on


def _args(**kw) -> argparse.Namespace:
    base = dict(
        lab=None,
        pilot=False,
        methods=["gigpo", "progpo-gigpo", "grpo"],
        seeds=[0, 1],
        iterations=6,
        state_key="canonical",
        config="configs/toy.yaml",
        levels=[0.1, 0.19, 0.5],
        report=False,
        workers=2,
        planned_seeds=8,
    )
    return argparse.Namespace(**{**base, **kw})


def test_the_table_gives_each_method_s_mean_and_interval_over_seeds_cell_by_cell():
    text = report.report(_args(), GIGPO + PROGPO, wall_s=90.0)
    _assert_well_formed(text)
    lines = text.splitlines()
    assert lines[0] == "# ProGPO vs its base in the credit trap (`toy.yaml`, state key `canonical`)"
    assert lines[2] == (
        "`python -m trainers.lab`: seeds [0, 1], 6 iterations x 32 episodes; eval on 8 "
        "held-out episodes at fixed seeds. Mean over seeds +- the half-width of the 95% t interval."
    )
    assert "| method | seeds | eval it 0 | eval it 6 | train, last 5 | all-failed it 1 |" in text
    for runs in (GIGPO, PROGPO):
        cells = [
            _cell([r["eval"][0]["eval/success"] for r in runs]),
            _cell([r["eval"][1]["eval/success"] for r in runs]),
            _cell([np.mean([t["train/success"] for t in r["train"][1:]]) for r in runs]),
            _cell([r["train"][0]["all_failed_fraction"] for r in runs]),
            _cell([np.mean([t["all_failed_fraction"] for t in r["train"][1:]]) for r in runs]),
            _cell([np.mean([t["coverage_rate"] for t in r["train"][1:]]) for r in runs]),
            _cell([np.mean([t["repeat_rate"] for t in r["train"][1:]]) for r in runs]),
        ]
        assert f"| {runs[0]['method']} | 2 | " + " | ".join(cells) + " |" in lines
    assert "grpo" not in text.split("## Episodes")[0].split("|---")[1]  # a method with no run has no row
    # seed-mean train success, running mean over 2 iterations, first iteration at the level, x 32 episodes
    assert "| gigpo | 128 | 192 | - |" in lines and "| progpo-gigpo | 64 | 96 | - |" in lines
    assert "| method | clean | pick |" in lines  # task types sorted
    assert "| gigpo | 0.250 | 0.750 |" in lines and "| progpo-gigpo | 0.500 | 0.875 |" in lines
    d = [0.6 - 0.5, 0.8 - 0.5]
    half = t975(1) * np.std(d, ddof=1) / np.sqrt(2)
    assert f"- progpo-gigpo - gigpo: +0.200 +- {half:.3f} over 2 seeds (+0.100, +0.300)" in lines
    assert not any(ln.startswith("- gigpo - grpo") for ln in lines)  # no grpo run: no such pair
    assert lines[-1].startswith("Compute: 2.0 core-hours of warm start + training over 4 runs")
    assert lines[-1].endswith("Wall time of this invocation: 1.5 min on 2 worker(s).")
    assert "Wall time" not in report.report(_args(report=True), GIGPO + PROGPO, wall_s=90.0)  # --report: no wall time


def test_one_seed_has_no_interval_and_the_pilot_gives_the_mde():
    text = report.report(_args(seeds=[0]), GIGPO[:1] + PROGPO[:1], wall_s=0.0)
    assert "| gigpo | 1 | 0.100 (1 seed) | 0.500 (1 seed) |" in text
    assert "- progpo-gigpo - gigpo: +0.100 over 1 seed (no interval) (+0.100)" in text
    pilot = report.report(_args(pilot=True, planned_seeds=8), GIGPO + PROGPO, wall_s=0.0)
    d = np.array([0.1, 0.3])
    mde = (t975(7) + 0.8416) * d.std(ddof=1) / np.sqrt(8)
    assert f"minimum detectable difference at 80% power with 8 seeds: {mde:.3f}" in pilot
    assert "`python -m trainers.lab --pilot`" in pilot
    assert "minimum detectable" not in report.report(_args(pilot=True), GIGPO[:1] + PROGPO[:1], wall_s=0.0)


def test_the_provenance_line_names_the_commit_and_path_or_says_it_was_not_recorded():
    p = {"commit": "c" * 40, "compute": {"torch_threads": 1, "batch_decisions": "on"}, "cpu": "x", "versions": {}}
    text = report.report(_args(), [{**e, "provenance": p} for e in GIGPO], wall_s=0.0)
    assert (
        "Provenance: every run on commit " + "c" * 40 + ', compute path {"batch_decisions": "on", "torch_threads": 1}.'
    ) in text
    assert (
        "Provenance: not recorded (runs made before runs recorded their commit); pairing them assumes one code "
        "version." in report.report(_args(), GIGPO, wall_s=0.0)
    )
    mixed = report.report(_args(mixed="two commits"), GIGPO, wall_s=0.0)
    assert "**Mixed provenance (--allow-mixed): two commits. Paired differences compare code and paths too.**" in mixed


def _lab_by(gigpo: list[float], grpo: list[float]) -> dict:
    return {
        "gigpo": [_entry("gigpo", s, [0.05, y], [0.1] * 6, [0.9] * 6) for s, y in enumerate(gigpo)],
        "grpo": [_entry("grpo", s, [0.05, y], [0.1] * 6, [0.9] * 6) for s, y in enumerate(grpo)],
    }


def test_the_validity_lines_give_each_check_its_threshold_and_the_fresh_seeds_apart():
    crit = ValidityCriteria(trap_min=0.6, room_min=0.2, seeds=4)
    by = _lab_by([0.40, 0.45, 0.50, 0.42], [0.30, 0.33, 0.35, 0.31])
    from trainers.lab.analysis import validity

    valid = validity(by, crit, pilot_seeds=(0, 1))
    lines = report.lab_report(_args(lab="alfworld", methods=["gigpo", "grpo"], criteria=crit), by, valid)
    assert "- the trap: all-failed fraction at iteration 1 0.900 (needs >= 0.60): met" in lines
    rise = np.array([0.40, 0.45, 0.50, 0.42]) - 0.05
    half = t975(3) * rise.std(ddof=1) / 2
    assert (
        f"- room to move: GiGPO's held-out success {rise.mean():+.3f} +- {half:.3f} from start to end (needs >= +0.20): met"
        in lines
    )
    disc = next(ln for ln in lines if ln.startswith("- discrimination:"))
    d = valid["gigpo_minus_grpo"]
    assert disc.startswith(
        f"- discrimination: GiGPO - GRPO final {d['mean']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}] over 4 "
        "seeds (needs the 95% interval above 0 at >= 4 seeds): met; these seeds include the pilot "
        "seeds [0, 1], which chose the setting. On the fresh seeds alone: "
    )
    assert disc.endswith(" over 2 seeds")
    assert "**Verdict: discriminates.**" in lines
    weak = _lab_by([0.10, 0.12, 0.11, 0.10], [0.30, 0.33, 0.35, 0.31])
    lines = report.lab_report(
        _args(lab="alfworld", methods=["gigpo", "grpo"], criteria=crit), weak, validity(weak, crit)
    )
    assert "(needs >= +0.20): NOT met" in next(ln for ln in lines if ln.startswith("- room to move"))
    assert "these seeds include the pilot" not in "\n".join(lines)
    assert "**Verdict: cannot discriminate.** Every comparison below is read as: this lab cannot discriminate." in lines
    assert "Not measured: the lab needs gigpo and grpo runs." in report.lab_report(
        _args(lab="alfworld", methods=["gigpo"]), {"gigpo": weak["gigpo"]}, None
    )


@pytest.mark.parametrize(
    "p, cell",
    [
        (None, "-"),
        ({"mean": 0.1234, "lo": -0.05, "hi": 0.3, "seeds": [0, 1]}, "+0.123 [-0.050, +0.300]"),
        ({"mean": -0.2, "lo": -0.2, "hi": -0.2, "seeds": [3]}, "-0.200 (1 seed)"),
    ],
)
def test_a_difference_cell_gives_its_interval_or_says_it_has_one_seed(p, cell):
    assert report._diff_cell(p) == cell


def _tables(text: str) -> list[list[str]]:
    """The markdown tables of ``text``: runs of consecutive lines that start with '|'."""
    out: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("|"):
            if out and out[-1] is not None and out[-1][-1] is not None:
                out[-1].append(line)
                continue
        out.append([line] if line.startswith("|") else None)
    return [t for t in out if t]


def _assert_well_formed(text: str) -> None:
    """Every table has a separator row under its header and as many cells in every row."""
    tables = _tables(text)
    assert tables
    for t in tables:
        width = t[0].count("|")
        assert len(t) >= 2 and set(t[1].replace("|", "")) == {"-"}, t[:2]
        assert all(row.count("|") == width for row in t), t


def _lab_block() -> list[dict]:
    """Three seeds of a lab block: the validity pair, two bases with ProGPO on and off, a labelled
    teacher, each with where its remedy acted."""
    entries = []
    finals = {
        "grpo": [0.10, 0.12, 0.15],
        "gigpo": [0.30, 0.25, 0.35],
        "progpo-gigpo": [0.40, 0.30, 0.45],
        "planpo": [0.20, 0.30, 0.25],
        "progpo-planpo": [0.30, 0.35, 0.20],
        "gigpo+privileged": [0.6, 0.7, 0.5],
    }
    acted = {
        "progpo-gigpo": {"ProGPO groups": 0.4},
        "progpo-planpo": {"ProGPO groups": 0.2, "PlanPO groups": 0.5},
        "planpo": {"PlanPO groups": 0.6},
        "gigpo+privileged": {"teacher groups": 0.25},
    }
    for m, ys in finals.items():
        for s, y in enumerate(ys):
            e = _entry(m, s, [0.05, y], [0.1] * 6, [0.9] * 6)
            # the trainer logs every share, 0 where the method has no such term
            e["acted"] = [{"iteration": i, "ProGPO groups": 0.0, "tree forks": 0.0, **acted.get(m, {})} for i in (1, 2)]
            entries.append(e)
    return entries


def test_the_lab_report_has_its_sections_in_order_and_every_table_is_well_formed():
    from trainers.lab.analysis import auc, final_success, paired
    from trainers.lab.methods import LAB_PRESETS
    from trainers.lab.report import _diff_cell

    crit = ValidityCriteria(trap_min=0.6, room_min=0.1, seeds=3)
    methods = ["grpo", "gigpo", "progpo-gigpo", "planpo", "progpo-planpo", "gigpo+privileged"]
    entries = _lab_block()
    text = report.report(
        _args(lab="alfworld", methods=methods, seeds=[0, 1, 2], criteria=crit, config="configs/credit_lab.yaml"),
        entries,
        wall_s=0.0,
    )
    _assert_well_formed(text)
    heads = [ln for ln in text.splitlines() if ln.startswith("#")]
    assert heads == [
        "# The credit-trap lab, alfworld block (`credit_lab.yaml`, state key `canonical`)",
        "## Episodes to reach a train success level",
        "## Validity: can this lab tell GiGPO from GRPO?",
        "## Pure RL: final held-out success and AUC, paired by seed (95% t intervals)",
        "## Labelled tracks (not ranked with pure RL): final held-out success and AUC, paired by seed (95% t intervals)",
        "## Many comparisons at once (primary metric)",
        "### Pure RL remedies: 3 comparisons against gigpo (final held-out success)",
        "### Labelled tracks: 1 comparisons against gigpo (final held-out success)",
        "## ProGPO's term on and off, over its bases (exploratory: not pre-registered)",
        "## Where each remedy acted (mean over iterations and seeds)",
    ]
    assert "`python -m trainers.lab --lab alfworld`" in text
    note = LAB_PRESETS["alfworld"]["provenance_note"]
    assert f"pairing them assumes one code version; {note}." in text
    missing = [m for m in LAB_PRESETS["alfworld"]["methods"] if m not in methods]
    assert "Not run yet (no finished seed): " + ", ".join(report.labelled(m) for m in missing) + "." in text
    by = {m: [e for e in entries if e["method"] == m] for m in methods}
    for m in ("planpo", "gigpo", "progpo-gigpo"):  # a method's own base column is blank
        cells = [
            ("" if m == b else _diff_cell(paired(by, m, b, f)))
            for b in ("gigpo", "progpo-gigpo")
            for f in (final_success, auc)
        ]
        row = next(ln for ln in text.splitlines() if ln.startswith(f"| {m} | 3 | ") and ln.count("|") == 9)
        assert row.split(" | ")[4:] == [*cells[:3], cells[3] + " |"], row
    assert "| gigpo+privileged [privileged (not pure RL)] | 3 |" in text.split("## Labelled tracks (not ranked")[1]
    assert "gigpo+privileged" not in text.split("## Pure RL:")[1].split("## Labelled tracks")[0]
    labelled_table = text.split("## Labelled tracks (not ranked")[1].split("##")[0]
    assert [ln.split(" | ")[0] for ln in labelled_table.splitlines() if ln.startswith("| ") and "3 |" in ln] == [
        "| gigpo+privileged [privileged (not pure RL)]"
    ]
    assert "**Exploratory: the Holm family was added after seeds 0-4 had been seen (not pre-registered).**" in text
    acted = text.split("## Where each remedy acted")[1]
    assert "| method | ProGPO groups | PlanPO groups | teacher groups |" in acted
    assert "| progpo-planpo | 0.200 | 0.500 |  |" in acted and "| gigpo |  |  |  |" in acted
    assert "| gigpo+privileged [privileged (not pure RL)] |  |  | 0.250 |" in acted
    on_off = text.split("## ProGPO's term on and off")[1].split("##")[0]
    assert "| progpo-gigpo | gigpo | 3 |" in on_off and "| progpo-planpo | planpo | 3 |" in on_off
    assert "| **pooled over the 2 bases** | | 3 |" in on_off and "(Holm" not in on_off

    pure_only = [e for e in entries if e["method"] != "gigpo+privileged"]
    text = report.report(
        _args(lab="alfworld", methods=methods[:-1], seeds=[0, 1, 2], criteria=crit, config="configs/credit_lab.yaml"),
        pure_only,
        wall_s=0.0,
    )
    _assert_well_formed(text)
    assert "### Pure RL remedies" in text and "### Labelled tracks" not in text and "## Labelled tracks" not in text


# ----------------------------------------------------------------------------- the plot
def _figure(monkeypatch, tmp_path, args, entries):
    """The figure ``plots.plot`` draws, kept from its close (it is written to a PNG too)."""
    import matplotlib.pyplot as plt

    kept = []
    monkeypatch.setattr(plt, "close", kept.append)
    plots.plot(args, entries, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 0
    return kept[0]


PANELS = [
    ("held-out eval success", "eval", "eval/success"),
    ("train success", "train", "train/success"),
    ("all-failed fraction", "train", "all_failed_fraction"),
    ("coverage rate", "train", "coverage_rate"),
    ("repeated-action rate", "train", "repeat_rate"),
]


def test_each_panel_draws_every_methods_mean_over_seeds_with_its_interval(monkeypatch, tmp_path):
    from trainers.statistics import mean_ci

    entries = GIGPO + PROGPO
    fig = _figure(monkeypatch, tmp_path, _args(methods=["gigpo", "progpo-gigpo", "grpo"]), entries)
    axes = fig.axes
    order = [0, 1, 3, 4, 5]  # the grid's panels in drawing order; axes[2] is the (empty) forest panel
    assert [axes[k].get_title() for k in order] == [t for t, _, _ in PANELS]
    assert not axes[2].axison  # no lab block: no forest panel
    width = 0.8 * min(1.0, 3.0 / 2)
    for k, (title, part, key) in zip(order, PANELS):
        ax = axes[k]
        assert ax.get_xlabel() == "iteration" and ax.get_ylim() == (-0.05, 1.05)
        if part == "eval":  # points with error bars: the label is the container's
            drawn = [(c.get_label(), c.lines[0]) for c in ax.containers]
        else:
            drawn = [(ln.get_label(), ln) for ln in ax.get_lines()]
        assert [name for name, _ in drawn] == ["gigpo", "progpo-gigpo"]  # grpo has no runs: not drawn
        lines = [ln for _, ln in drawn]
        for i, (ln, runs) in enumerate(zip(lines, (GIGPO, PROGPO))):
            rows = [[r[key] for r in e[part]] for e in runs]
            mean, half = mean_ci(np.asarray(rows, dtype=float))
            xs = np.array([r["iteration"] for r in runs[0][part]], dtype=float)
            np.testing.assert_allclose(ln.get_ydata(), mean)
            np.testing.assert_allclose(ln.get_xdata(), xs + ((i - 0.5) * width if part == "eval" else 0.0))
            assert ln.get_linestyle() == "-"
        if part == "train":  # a band per method around its mean, the interval's half-width either side
            bands = ax.collections
            assert len(bands) == 2 and all(abs(b.get_alpha() - 0.15) < 1e-9 for b in bands)
            rows = [[r[key] for r in e[part]] for e in GIGPO]
            mean, half = mean_ci(np.asarray(rows, dtype=float))
            ys = bands[0].get_paths()[0].vertices[:, 1]
            assert np.isclose(ys.max(), (mean + half).max()) and np.isclose(ys.min(), (mean - half).min())
    assert lines[0].get_color() != lines[1].get_color()
    legend = fig.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["gigpo", "progpo-gigpo"]
    assert fig._suptitle.get_text() == "toy.yaml, state key canonical: mean and 95% CI over seeds [0, 1]"


def test_the_forest_panel_shows_each_methods_paired_difference_from_gigpo_and_labels_teachers(monkeypatch, tmp_path):
    from trainers.lab.analysis import final_success, paired

    entries = _lab_block()
    methods = ["grpo", "gigpo", "progpo-gigpo", "planpo", "progpo-planpo", "gigpo+privileged"]
    fig = _figure(monkeypatch, tmp_path, _args(lab="alfworld", methods=methods, seeds=[0, 1, 2]), entries)
    forest = fig.axes[2]
    assert forest.axison and forest.get_title().startswith("final held-out success - gigpo")
    by = {m: [e for e in entries if e["method"] == m] for m in methods}
    rows = ["grpo", "progpo-gigpo", "planpo", "progpo-planpo", "gigpo+privileged"]  # pure first, labelled below
    points = [ln for ln in forest.get_lines() if ln.get_marker() == "o"]
    assert len(points) == len(rows)
    for y, (m, ln) in enumerate(zip(rows, points)):
        d = paired(by, m, "gigpo", final_success)
        assert ln.get_xdata()[0] == pytest.approx(d["mean"]) and ln.get_ydata()[0] == -y
    ticks = [t.get_text() for t in forest.get_yticklabels()]
    assert ticks[0] == "grpo (3)" and ticks[-1] == "gigpo+privileged [privileged] (3)"
    vertical = [ln for ln in forest.get_lines() if list(ln.get_xdata()) == [0.0, 0.0]]
    rule = [ln for ln in forest.get_lines() if list(ln.get_ydata()) == [-3.5, -3.5]]
    assert vertical and rule  # zero marked; the labelled track set apart below the pure ones
    teacher = [ln for ln in fig.axes[1].get_lines() if ln.get_label().startswith("gigpo+privileged")][0]
    assert teacher.get_linestyle() == "--" and teacher.get_label() == "gigpo+privileged [privileged (not pure RL)]"
    assert len(fig.legends[0].get_texts()) == len(methods)
    bands = fig.axes[1].collections
    assert len(bands) == len(methods) and all(abs(b.get_alpha() - 0.05) < 1e-9 for b in bands)  # many methods: fainter


# ----------------------------------------------------------------------------- the header's lines
def _with_provenance(entries: list[dict], commits: list[str | None], starts: list[str | None]) -> list[dict]:
    out = []
    for e, commit, start in zip(entries, commits, starts):
        e = dict(e)
        if commit is not None:
            e["provenance"] = {"commit": commit, "compute": {"device": "cpu"}, **({"started": start} if start else {})}
        out.append(e)
    return out


def test_a_registered_blocks_header_gives_its_commit_time_and_its_first_and_last_starts():
    entries = _with_provenance(
        GIGPO + PROGPO, ["c0ffee"] * 4, ["2026-12-06T17:00:00Z", None, "2026-12-06T16:50:00Z", "2026-12-06T18:30:00Z"]
    )
    reg = ("0123456789abcdef0123", "2026-12-06T16:41:15Z")
    lines = report.report(_args(registration=reg), entries, wall_s=1.0).splitlines()
    assert (
        "Registration: toy.yaml committed at 0123456789ab on 2026-12-06T16:41:15Z; its first run started "
        "2026-12-06T16:50:00Z and its last 2026-12-06T18:30:00Z (3 of 4 runs record a start)."
    ) in lines
    assert 'Provenance: every run on commit c0ffee, compute path {"device": "cpu"}.' in lines
    no_starts = report.report(_args(registration=reg), _with_provenance(GIGPO, ["c0ffee"] * 2, [None, None]), 1.0)
    assert (
        "Registration: toy.yaml committed at 0123456789ab on 2026-12-06T16:41:15Z; its runs record no start time "
        "(run before start times were recorded)."
    ) in no_starts.splitlines()
    assert "Registration:" not in report.report(_args(), entries, wall_s=1.0)  # not a registered block


def test_the_provenance_line_reads_the_first_runs_record():
    first_bare = _with_provenance(GIGPO + PROGPO, [None, "c0ffee", "c0ffee", "c0ffee"], [None] * 4)
    assert "Provenance: not recorded" in report.report(_args(), first_bare, wall_s=1.0)
    first_other = _with_provenance(GIGPO + PROGPO, ["aaaa", "bbbb", "bbbb", "bbbb"], [None] * 4)
    assert "Provenance: every run on commit aaaa," in report.report(_args(), first_other, wall_s=1.0)


def test_the_header_counts_the_episodes_an_iteration_plays_and_the_first_evaluations_size():
    entries = [dict(e, config={"num_groups": 4}) for e in GIGPO + PROGPO]  # no group size recorded
    for e in entries:
        e["eval"] = [dict(e["eval"][0], **{"eval/episodes": 8}), dict(e["eval"][1], **{"eval/episodes": 16})]
    line = report.report(_args(), entries, wall_s=1.0).splitlines()[2]
    assert "6 iterations x 0 episodes; eval on 8 held-out episodes" in line


def test_the_on_off_rows_give_final_and_auc_differences_and_the_pooled_row():
    def diff(mean: float, lo: float, hi: float) -> dict:
        return {"seeds": [0, 1, 2], "mean": mean, "lo": lo, "hi": hi, "p": 0.01}

    res = {
        "pairs": [{"on": "progpo-gigpo", "off": "gigpo", "diff": diff(0.1, 0.02, 0.18), "p": 0.02}],
        "pooled": diff(0.1, 0.02, 0.18),
    }
    res_auc = {
        "pairs": [{"on": "progpo-gigpo", "off": "gigpo", "diff": diff(0.05, -0.01, 0.11), "p": 0.09}],
        "pooled": diff(0.05, -0.01, 0.11),
    }
    lines = report._on_off_lines(res, res_auc, preregistered=True)
    assert (
        "| progpo-gigpo | gigpo | 3 | +0.100 [+0.020, +0.180] | 0.020 (Holm 0.020) | +0.050 [-0.010, +0.110] | 0.090 |"
        in lines
    )
    assert (
        "| **pooled over the 1 bases** | | 3 | +0.100 [+0.020, +0.180] | 0.010 | +0.050 [-0.010, +0.110] | 0.010 |"
        in lines
    )


@pytest.mark.parametrize("p_holm, bold", [(0.05, False), (0.0499, True)])
def test_a_holm_adjusted_p_is_bold_only_below_alpha(p_holm, bold):
    row = {"method": "planpo", "seeds": 8, "diff": None, "p": 0.01, "p_holm": p_holm}
    last = report._multiplicity_lines([row], "Against gigpo")[-1]
    assert last == f"| planpo | 8 | - | 0.010 | {'**' if bold else ''}{p_holm:.3f}{'**' if bold else ''} |"


def test_the_forest_panel_colours_each_kind_of_method_and_draws_each_interval(monkeypatch, tmp_path):
    """ProGPO's rows blue, labelled (privileged) tracks grey, the rest black; each point's
    horizontal bar spans its 95% interval; zero is a red line; no rule without a labelled track."""
    from matplotlib.colors import to_rgba

    from trainers.lab.analysis import final_success, paired

    entries = _lab_block()
    methods = ["grpo", "gigpo", "progpo-gigpo", "gigpo+privileged"]
    fig = _figure(monkeypatch, tmp_path, _args(lab="alfworld", methods=methods, seeds=[0, 1, 2]), entries)
    forest = fig.axes[2]
    by = {m: [e for e in entries if e["method"] == m] for m in methods}
    rows = ["grpo", "progpo-gigpo", "gigpo+privileged"]
    containers = forest.containers
    assert len(containers) == len(rows)
    for y, (m, c) in enumerate(zip(rows, containers)):
        d = paired(by, m, "gigpo", final_success)
        point = c.lines[0]
        expected = {"grpo": "black", "progpo-gigpo": "tab:blue", "gigpo+privileged": "tab:gray"}[m]
        assert to_rgba(point.get_color()) == to_rgba(expected)
        (bar,) = c.lines[2]  # the horizontal interval
        (x0, y0), (x1, _) = bar.get_segments()[0]
        assert (x0, x1) == (pytest.approx(d["mean"] - d["half"]), pytest.approx(d["mean"] + d["half"])) and y0 == -y
    assert list(forest.get_yticks()) == [0, -1, -2]
    zero = [ln for ln in forest.get_lines() if list(ln.get_xdata()) == [0.0, 0.0]][0]
    assert to_rgba(zero.get_color()) == to_rgba("tab:red")
    pure_only = _figure(
        monkeypatch,
        tmp_path,
        _args(lab="alfworld", methods=["grpo", "gigpo", "progpo-gigpo"], seeds=[0, 1, 2]),
        entries,
    ).axes[2]
    assert not [
        ln for ln in pure_only.get_lines() if list(ln.get_ydata()) == [-1.5, -1.5]
    ]  # no labelled track: no rule
