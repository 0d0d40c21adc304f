"""The lab's run machinery (trainers.lab.runs) with a stand-in trainer: how a run is started,
resumed, reused and kept, what the trainer process gets, and what ``--rerun`` reads, compares and
says. Fast: the stand-in is a ``trainers.progpo`` module of a few lines in a checkout of its own,
so every path of the real subprocess call is taken without training anything."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from trainers.config import EARLIER_VALUES
from trainers.lab import cli, methods, runs
from trainers.runs.metrics import read_metrics

sys.path.insert(0, str(Path(__file__).parent))
from lab_records import run_with_evals, write_kept_run

ROOT_CONFIGS = runs.ROOT / "configs"

#: a ``python -m trainers.progpo`` that says what it got and writes a finished run as the trainer
#: keeps it (or fails when its config says so)
STAND_IN = """
import json, os, sys
from pathlib import Path

argv = sys.argv[1:]
print("argv " + json.dumps(argv))
print("env " + json.dumps([os.environ.get("OMP_NUM_THREADS"), os.environ.get("PYTHONWARNINGS"),
                           os.environ["PYTHONPATH"], os.getcwd(), os.environ.get("LAB_TEST_MARK")]))
config = Path(argv[argv.index("--config") + 1]).read_text()
if "fail_here" in config:
    print("error: the stand-in refuses this config")
    sys.exit(3)
out = Path(argv[argv.index("--output-dir") + 1])
out.mkdir(parents=True, exist_ok=True)
(out / "metrics.jsonl").write_text(json.dumps({"kind": "train", "iteration": 1, "config": config,
                                               "iterations": int(argv[argv.index("--iterations") + 1])}) + "\\n")
"""


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "trainers").mkdir(parents=True)
    (root / "trainers" / "__init__.py").write_text("")
    (root / "trainers" / "progpo.py").write_text(STAND_IN)
    return root


def _said(log: Path) -> list[tuple[list, list]]:
    """Each stand-in call in ``log``: its argv and (OMP threads, warnings, PYTHONPATH, cwd, a marker)."""
    lines = log.read_text().splitlines()
    argvs = [json.loads(ln[5:]) for ln in lines if ln.startswith("argv ")]
    envs = [json.loads(ln[4:]) for ln in lines if ln.startswith("env ")]
    return list(zip(argvs, envs))


def test_the_trainer_runs_from_the_checkout_on_one_thread_and_its_log_grows(tmp_path, checkout, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "8")  # the caller's settings do not reach the run ...
    monkeypatch.setenv("PYTHONWARNINGS", "default")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setenv("LAB_TEST_MARK", "kept")  # ... the rest of its environment does
    config = tmp_path / "c.yaml"
    config.write_text("lr: 0.1\n")
    log = tmp_path / "run.log"
    cmd = ["--config", str(config), "--iterations", "2", "--output-dir", str(tmp_path / "o")]
    runs.run_trainer(cmd, log, root=checkout)
    runs.run_trainer(cmd, log, root=checkout)  # a resumed run appends to the log of its start
    said = _said(log)
    assert len(said) == 2 and said[0][0] == cmd
    assert said[0][1] == [
        "1",
        "ignore",
        str(checkout),
        str(checkout),
        "kept",
    ]  # the checkout's code, not the installed one
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    runs.run_trainer(cmd, log, root=checkout)
    assert _said(log)[-1][1][2] == os.pathsep.join([str(checkout), "/elsewhere"])  # first, before the caller's
    config.write_text("fail_here: 1\n")
    with pytest.raises(RuntimeError) as err:
        runs.run_trainer(cmd, log, root=checkout)
    assert "failed (3)" in str(err.value) and str(log) in str(err.value) and "--iterations 2" in str(err.value)
    assert "the stand-in refuses this config" in log.read_text() and len(_said(log)) == 4


def test_a_rerun_starts_from_the_recorded_config_with_the_earlier_meanings(tmp_path, checkout):
    log = tmp_path / "rerun.log"
    log.write_text("an older rerun's output\n")
    recorded = {"lr": 0.25, "init": "bc", "seed": 7}  # 'init' is the old name of warm_start
    records = runs.rerun_records(recorded, 3, log, root=checkout)
    assert len(records) == 1 and records[0]["iterations"] == 3
    config = yaml.safe_load(records[0]["config"])
    assert {k: config[k] for k in ("lr", "warm_start", "seed")} == {"lr": 0.25, "warm_start": "bc", "seed": 7}
    assert "init" not in config and all(config[k] == v for k, v in EARLIER_VALUES.items())
    argv = _said(log)[0][0]
    assert "an older rerun" not in log.read_text() and len(_said(log)) == 1  # the log is started anew
    assert argv[argv.index("--output-dir") + 1] == config["output_dir"] and "--overwrite" in argv
    assert argv[argv.index("--iterations") + 1] == "3"
    assert not Path(config["output_dir"]).exists()  # the temporary run dir is gone
    again = runs.rerun_records({**recorded, "batch_decisions": "on"}, 1, log, root=checkout)
    assert yaml.safe_load(again[0]["config"])["batch_decisions"] == "on"  # a recorded value wins over the earlier one


# ---- run_one: started, resumed, reused, kept small -------------------------------------------


def _args(tmp_path: Path) -> argparse.Namespace:
    return argparse.Namespace(
        config=tmp_path / "block.yaml",
        state_key="canonical",
        iterations=2,
        runs=tmp_path / "out" / "runs",
        work=tmp_path / "work" / "out",
    )


def _finished_run(out: Path, method: str, seed: int, provenance: bool = True) -> None:
    """What the trainer leaves in its output dir: the records, config, report and provenance the
    lab keeps, and the checkpoints and extras it does not."""
    write_kept_run(out, method, seed, eval_iterations=(2,))
    if provenance:
        (out / "provenance.jsonl").write_text(json.dumps({"kind": "provenance", "commit": "a" * 40}) + "\n")
    (out / "checkpoints" / "latest").mkdir(parents=True, exist_ok=True)
    (out / "checkpoints" / "latest" / "model.pt").write_bytes(b"\0" * 64)
    (out / "rollouts.jsonl").write_text("{}\n")


@pytest.fixture
def trainer_calls(monkeypatch):
    """run_trainer replaced by a stand-in that finishes the run in its output dir; its calls."""
    calls: list[tuple[list[str], Path]] = []

    def finish(cmd: list[str], log: Path, root: Path = runs.ROOT) -> None:
        calls.append((cmd, log))
        out = Path(cmd[cmd.index("--output-dir") + 1])
        seed = int(cmd[cmd.index("--seed") + 1])
        method = next(m for m in methods.METHODS if cmd[-1 - len(methods.METHODS[m]) : -1] == methods.METHODS[m])
        _finished_run(out, method, seed, provenance="no-provenance" not in str(out))

    monkeypatch.setattr(runs, "run_trainer", finish)
    return calls


def test_a_new_run_starts_afresh_and_keeps_only_its_records_config_report_and_provenance(
    tmp_path, trainer_calls, capsys
):
    args = _args(tmp_path)
    got = runs.run_one(args, "gigpo", 3)
    name = methods.run_name("gigpo", 3, "canonical")
    ((cmd, log),) = trainer_calls
    assert cmd == [*runs.trainer_args(args, "gigpo", 3, 2, args.work / name), "--overwrite"]
    assert log == args.work / f"{name}.log"  # beside the run dir, so it outlives an --overwrite
    kept = args.runs / name
    assert sorted(p.name for p in kept.iterdir()) == ["config.yaml", "metrics.jsonl", "provenance.jsonl", "summary.md"]
    for f in kept.iterdir():
        assert f.read_bytes() == (args.work / name / f.name).read_bytes()
    assert got == read_metrics(kept / "metrics.jsonl") and [r["kind"] for r in got] == ["train", "train", "eval"]
    assert f"  {name}: " in capsys.readouterr().out


def test_a_finished_run_is_reused_and_a_started_one_resumes(tmp_path, trainer_calls, capsys):
    args = _args(tmp_path)
    first = runs.run_one(args, "grpo", 0)
    assert runs.run_one(args, "grpo", 0) == first and len(trainer_calls) == 1  # reused: no trainer
    name = methods.run_name("grpo", 0, "canonical")
    (args.runs / name / "summary.md").unlink()  # kept, but half-copied: its run dir has a checkpoint
    capsys.readouterr()
    assert runs.run_one(args, "grpo", 0) == first
    assert trainer_calls[1][0][-1] == "--resume" and "--overwrite" not in trainer_calls[1][0]
    assert capsys.readouterr().out.rstrip().endswith("(resumed)")


def test_a_run_without_provenance_is_kept_without_it_and_a_failed_one_not_at_all(tmp_path, trainer_calls, monkeypatch):
    args = _args(tmp_path)
    args.work = tmp_path / "work" / "no-provenance"
    runs.run_one(args, "planpo", 1)
    kept = args.runs / methods.run_name("planpo", 1, "canonical")
    assert (kept / "summary.md").exists() and not (kept / "provenance.jsonl").exists()
    assert runs.provenance_of(kept) is None

    def fail(cmd, log, root=runs.ROOT):
        raise RuntimeError("the trainer failed")

    monkeypatch.setattr(runs, "run_trainer", fail)
    with pytest.raises(RuntimeError):
        runs.run_one(args, "hgpo", 1)
    assert not (args.runs / methods.run_name("hgpo", 1, "canonical")).exists()  # the next invocation starts it again


def test_a_kept_run_that_is_not_what_its_method_names_is_refused_not_reused(tmp_path, trainer_calls):
    args = _args(tmp_path)
    runs.run_one(args, "gigpo", 0)
    kept = args.runs / methods.run_name("gigpo", 0, "canonical")
    (kept / "config.yaml").write_text(yaml.safe_dump({"iterations": 2, **methods.axes_of("grpo")}))
    with pytest.raises(runs.LabError, match="is not what 'gigpo' names"):
        runs.run_one(args, "gigpo", 0)
    assert len(trainer_calls) == 1


# ---- --rerun: which record, what is compared, what is said -----------------------------------


def _train_row(it: int, value: float) -> dict:
    return {"iteration": it, **{k: value for k in methods.TRAIN_KEYS}}


def _fresh(values: dict[int, float], bc_loss: float = 11.5) -> list[dict]:
    """A fresh run's records as the trainer writes them (metric names, not the lab's keys)."""
    recs = [{"kind": "init", "iteration": 0, "bc/loss": bc_loss, "time/init_s": 3.0}]
    return recs + [
        {"kind": "train", "iteration": it, **{src: v for src in methods.TRAIN_KEYS.values()}, "time/iteration_s": 1.0}
        for it, v in values.items()
    ]


def _block(folder: Path, *entries: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "progpo_effect.json").write_text(json.dumps({"runs": list(entries)}))


def _entry(method: str, seed: int, values: dict[int, float], state_key: str = "canonical") -> dict:
    return {
        "method": method,
        "seed": seed,
        "state_key": state_key,
        "config": {"seed": seed, "tag": state_key},
        "train": [_train_row(it, v) for it, v in values.items()],
        "eval": [],
    }


@pytest.fixture
def reruns(monkeypatch):
    """rerun_records replaced: the fresh records it returns (set ``fresh``) and the configs it got."""
    state: dict = {"fresh": [], "configs": [], "iterations": []}

    def fake(config, iterations, log, root=runs.ROOT):
        state["configs"].append(config)
        state["iterations"].append(iterations)
        assert log.parent.is_dir()
        return [dict(r) for r in state["fresh"]]

    monkeypatch.setattr(runs, "rerun_records", fake)
    return state


def _rerun(tmp_path: Path, *argv: str) -> int:
    return cli.main(["--out", str(tmp_path / "block"), "--work", str(tmp_path / "work"), "--rerun", *argv])


def test_rerun_picks_the_record_of_the_seed_method_and_state_key_asked_for(tmp_path, reruns, capsys):
    _block(
        tmp_path / "block",
        _entry("gigpo", 1, {1: 0.1, 2: 0.2}),
        _entry("gigpo", 2, {1: 0.3, 2: 0.4}, "exact"),
        _entry("gigpo", 2, {1: 0.5, 2: 0.6}),
        _entry("grpo", 2, {1: 0.7, 2: 0.8}),
    )
    reruns["fresh"] = _fresh({1: 0.5, 2: 0.6})
    assert _rerun(tmp_path, "2", "gigpo", "--iterations", "2") == 0
    assert reruns["configs"] == [{"seed": 2, "tag": "canonical"}] and reruns["iterations"] == [2]
    out = capsys.readouterr().out
    assert "gigpo seed 2: every metric reproduced" in out and out.count("same") == 2 * len(methods.TRAIN_KEYS)
    assert "DIFFERS" not in out and "bit-exact" not in out  # no kept run to compare field by field
    reruns["fresh"] = _fresh({1: 0.3, 2: 0.4})
    assert _rerun(tmp_path, "2", "gigpo", "--iterations", "2", "--state-key", "exact") == 0
    assert reruns["configs"][-1] == {"seed": 2, "tag": "exact"}


def test_rerun_finds_a_pilot_run_and_compares_only_the_iterations_asked_for(tmp_path, reruns, capsys):
    _block(tmp_path / "block")  # the comparison's own record lacks the seed ...
    _block(tmp_path / "block_pilot", _entry("gigpo", 0, {1: 0.1, 2: 0.2, 3: 0.9}))  # ... its pilot has it
    reruns["fresh"] = _fresh({1: 0.1, 2: 0.25})  # iteration 3 not re-run; iteration 2 differs
    assert _rerun(tmp_path, "0", "gigpo", "--iterations", "1") == 0
    out = capsys.readouterr().out
    assert "iteration 2" not in out and "every metric reproduced" in out
    assert _rerun(tmp_path, "0", "gigpo", "--iterations", "2") == 1
    out = capsys.readouterr().out
    assert out.count("DIFFERS") == len(methods.TRAIN_KEYS) and all(
        "iteration 2" in ln for ln in out.splitlines() if "DIFFERS" in ln
    )
    assert f"gigpo seed 0: {len(methods.TRAIN_KEYS)} metric(s) differ" in out


def test_rerun_says_bit_exact_or_names_the_largest_difference_against_the_kept_run(tmp_path, reruns, capsys):
    _block(tmp_path / "block", _entry("grpo", 4, {1: 0.1, 2: 0.2}))
    kept = tmp_path / "block" / "runs" / methods.run_name("grpo", 4, "canonical")
    kept.mkdir(parents=True)
    fresh = _fresh({1: 0.1, 2: 0.2})
    (kept / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in fresh))
    reruns["fresh"] = [{**r, "time/init_s": 99.0} for r in fresh]  # wall clock differs: still bit-exact
    assert _rerun(tmp_path, "4", "grpo", "--iterations", "2") == 0
    out = capsys.readouterr().out
    assert "grpo seed 4: bit-exact (every numeric field of 3 records, bc/* and update/* included)" in out
    # the train metrics the lab records agree, but the warm start does not: not bit-exact, exit 1
    reruns["fresh"] = _fresh({1: 0.1, 2: 0.2}, bc_loss=11.5 * (1 + 1e-7))
    assert _rerun(tmp_path, "4", "grpo", "--iterations", "2") == 1
    out = capsys.readouterr().out
    assert "every metric reproduced" in out
    assert (
        "grpo seed 4: NOT bit-exact: largest relative difference 1e-07 in init iteration 0 bc/loss (3 records compared)"
        in out
    )


def test_rerun_of_a_run_that_was_never_recorded_is_one_line(tmp_path, reruns, capsys):
    assert _rerun(tmp_path, "0", "gigpo") == 2  # no record at all
    err = capsys.readouterr().err.strip()
    assert err == f"error: no recorded run gigpo seed 0 (state key canonical) in {(tmp_path / 'block').resolve()}"
    _block(tmp_path / "block", _entry("gigpo", 0, {1: 0.1}, "exact"))
    assert _rerun(tmp_path, "0", "gigpo") == 2 and "no recorded run gigpo seed 0" in capsys.readouterr().err
    (tmp_path / "block_pilot").mkdir()
    (tmp_path / "block_pilot" / "progpo_effect.json").write_text("[1, 2]")  # a pilot record that is no record
    assert _rerun(tmp_path, "0", "gigpo") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        f"error: {(tmp_path / 'block_pilot' / 'progpo_effect.json').resolve()} is not a progpo_effect"
    )
    assert "\n" not in err and reruns["configs"] == []  # nothing re-run


def test_a_rerun_that_fails_names_the_last_line_of_its_log(tmp_path, monkeypatch, capsys):
    _block(tmp_path / "block", _entry("gigpo", 0, {1: 0.1}))

    def fail(config, iterations, log, root=runs.ROOT):
        log.write_text("starting\nloading\n\nerror: out of memory at step 3\n\n")
        raise RuntimeError("failed")

    monkeypatch.setattr(runs, "rerun_records", fail)
    assert _rerun(tmp_path, "0", "gigpo") == 2
    log = (tmp_path / "work").resolve() / "block" / f"rerun_{methods.run_name('gigpo', 0, 'canonical')}.log"
    assert capsys.readouterr().err.strip() == (
        f"error: the rerun of gigpo seed 0 failed: error: out of memory at step 3; its log: {log}"
    )

    def silent(config, iterations, log, root=runs.ROOT):
        log.write_text("")
        raise RuntimeError("failed")

    monkeypatch.setattr(runs, "rerun_records", silent)
    assert _rerun(tmp_path, "0", "gigpo") == 2
    assert "failed: (no output); its log:" in capsys.readouterr().err


# ---- the analysis at its edges: uneven evaluations, thresholds met exactly, too few seeds ------


def test_auc_weighs_each_stretch_by_its_length_and_divides_by_the_span():
    from trainers.lab.analysis import auc

    # (0.2 + 0.4) / 2 * 5 + (0.4 + 0.0) / 2 * 20 = 5.5 over the span 25 (not 30: the curve starts at 5)
    assert auc(run_with_evals("gigpo", 0, [(5, 0.2), (10, 0.4), (30, 0.0)])) == pytest.approx(0.22)
    assert auc(run_with_evals("gigpo", 0, [(0, 0.6), (30, 0.0)])) == pytest.approx(0.3)


def test_the_mde_needs_two_pilot_differences_and_falls_with_more_seeds():
    from trainers.lab.analysis import mde_80
    from trainers.statistics import t975

    assert np.isnan(mde_80(np.array([0.1]), 8))  # one difference has no spread
    two = mde_80(np.array([0.1, 0.3]), 8)
    assert two == pytest.approx((t975(7) + 0.8416) * np.std([0.1, 0.3], ddof=1) / np.sqrt(8))
    assert mde_80(np.array([0.1, 0.3]), 16) < two


def test_validity_passes_thresholds_met_exactly_and_decides_at_the_registered_seed_count():
    from trainers.lab.analysis import ValidityCriteria, validity
    from trainers.statistics import mean_ci

    gigpo = [0.30, 0.35, 0.40, 0.33]
    by = {
        "gigpo": [run_with_evals("gigpo", s, [(0, 0.05), (30, y)], all_failed_it1=0.6) for s, y in enumerate(gigpo)],
        "grpo": [
            run_with_evals("grpo", s, [(0, 0.05), (30, y - 0.1 - 0.01 * s)], all_failed_it1=0.6)
            for s, y in enumerate(gigpo)
        ],
    }
    rise = validity(by, ValidityCriteria(trap_min=0.6, room_min=0.0, seeds=4))["gigpo_rise"]  # as the lab computes it
    assert rise == pytest.approx(float(np.mean(gigpo)) - 0.05)
    v = validity(by, ValidityCriteria(trap_min=0.6, room_min=rise, seeds=4))
    assert v["checks"] == {"trap": True, "room": True, "discrimination": True} and v["verdict"] == "discriminates"
    assert v["seeds"] == 4 and v["criteria"] == {"trap_min": 0.6, "room_min": rise, "seeds": 4}
    half = mean_ci(np.array([[y - 0.05] for y in gigpo]))[1][0]
    assert v["gigpo_rise_half"] == pytest.approx(half) and v["gigpo_rise"] == pytest.approx(rise)
    assert v["pilot_seeds"] == [] and v["gigpo_minus_grpo_fresh"] == v["gigpo_minus_grpo"]
    v = validity(by, ValidityCriteria(trap_min=0.61, room_min=rise, seeds=4))
    assert v["checks"]["trap"] is False and v["verdict"] == "cannot discriminate"
    v = validity(by, ValidityCriteria(trap_min=0.6, room_min=rise + 1e-9, seeds=4))
    assert v["checks"]["room"] is False and v["verdict"] == "cannot discriminate"
    v = validity(by, ValidityCriteria(trap_min=0.6, room_min=rise, seeds=5))
    assert v["verdict"] == "not decided: fewer than 5 paired seeds" and v["checks"]["discrimination"] is False


def test_progpo_on_off_pools_only_over_several_bases_and_seeds():
    from trainers.lab.analysis import progpo_on_off
    from trainers.lab.significance import paired_t_p

    def arm(m, finals):
        return [run_with_evals(m, s, [(0, 0.0), (30, y)]) for s, y in finals.items()]

    one_base = {
        "gigpo": arm("gigpo", {0: 0.2, 1: 0.3, 2: 0.1}),
        "progpo-gigpo": arm("progpo-gigpo", {0: 0.3, 1: 0.3, 2: 0.4}),
    }
    res = progpo_on_off(one_base)
    assert res["pooled"] is None  # one base: its pair is the whole contrast
    assert res["pairs"][0]["p"] == pytest.approx(paired_t_p([0.1, 0.0, 0.3]))
    two_bases_one_seed = {
        **one_base,
        "hgpo": arm("hgpo", {2: 0.1, 5: 0.1}),
        "progpo-hgpo": arm("progpo-hgpo", {2: 0.2, 5: 0.3}),
    }
    res = progpo_on_off(two_bases_one_seed)
    assert len(res["pairs"]) == 2 and res["pooled"] is None  # seed 2 alone is common: no interval
    res = progpo_on_off(
        {
            **two_bases_one_seed,
            "hgpo": arm("hgpo", {1: 0.1, 2: 0.1}),
            "progpo-hgpo": arm("progpo-hgpo", {1: 0.2, 2: 0.3}),
        }
    )
    assert res["pooled"]["seeds"] == [1, 2] and res["pooled"]["per_seed"] == pytest.approx([0.05, 0.25])
    assert res["pooled"]["p"] == pytest.approx(paired_t_p([0.05, 0.25]))
    assert progpo_on_off({"progpo-gigpo": one_base["progpo-gigpo"]}) is None  # no base to pair with


# ---- what a run's JSON entry keeps; what a block's config may set ------------------------------


def test_a_run_s_entry_keeps_the_lab_s_keys_panels_task_types_and_core_seconds():
    train1 = {
        "success": 0.2,
        "all_failed_frac": 0.75,
        "coverage_rate": 0.5,
        "repeated_action_rate": 0.1,
        "score_mean": 0.2,
        "adv/abs_mean": 0.3,
        "adv/progress_groups": 2,
        "adv/progress_group_frac": 0.5,
        "rollout/forks": 3,
        "bc/loss": 9.0,
    }
    records = [
        {"kind": "init", "iteration": 0, "time/init_s": 5.0, "bc/loss": 1.0},
        {
            "kind": "eval",
            "iteration": 0,
            "eval/success": 0.1,
            "eval/episodes": 4,
            "eval/panel": "p1",
            "eval/success_by_type/pick": 0.5,
            "eval/success_by_type/clean": 0.0,
            "time/iteration_s": 1.5,
        },
        {"kind": "train", "iteration": 1, **train1, "time/iteration_s": 10.0},
        {"kind": "train", "iteration": 2, "success": 0.3, "time/iteration_s": 12.5},  # a metric not logged: None
        {"kind": "eval", "iteration": 2, "eval/success": 0.3, "eval/episodes": 4},
    ]
    entry = runs.run_record("progpo-gigpo", 3, "exact", records, {"lr": 0.1})
    assert (
        entry
        == {
            "method": "progpo-gigpo",
            "seed": 3,
            "state_key": "exact",
            "config": {"lr": 0.1},
            "train": [
                {
                    "iteration": 1,
                    "train/success": 0.2,
                    "all_failed_fraction": 0.75,
                    "coverage_rate": 0.5,
                    "repeat_rate": 0.1,
                    "score_mean": 0.2,
                    "adv/abs_mean": 0.3,
                    "adv/progress_groups": 2,
                    "sampled_episodes": None,  # a run from before budgets were recorded
                    "sampled_first_all_failed": None,
                    "gen_batches": None,
                    "first_collection": 0.75,  # no dynamic sampling: the iteration's one collection
                },
                {
                    "iteration": 2,
                    "train/success": 0.3,
                    **{k: None for k in list(methods.TRAIN_KEYS)[1:]},
                    "first_collection": None,
                },
            ],
            "eval": [
                {
                    "iteration": 0,
                    "eval/success": 0.1,
                    "eval/episodes": 4,
                    "eval/panel": "p1",
                    "by_task_type": {"pick": 0.5, "clean": 0.0},
                },
                {"iteration": 2, "eval/success": 0.3, "eval/episodes": 4, "by_task_type": {}},
            ],
            "acted": [{"iteration": 1, "ProGPO groups": 0.5, "tree forks": 3}, {"iteration": 2}],
            "train_core_s": 29.0,
        }
    )


@pytest.mark.parametrize(
    "text, said",
    [
        ("advantage: {estimator: grpo}\n", "estimator: grpo"),  # in its section, as configs are written now
        ("tree: {scorer: random}\n", "tree_scorer: random"),
        ("distill: {mode: hindsight}\n", "distill: hindsight"),
        ("progress_gate: always\nshuffle_coverage: true\n", "progress_gate: always, shuffle_coverage: True"),
        ("init: bc\nrollout: tree\n", "rollout: tree"),  # an old name beside it is read, not an error
    ],
)
def test_a_block_config_that_sets_a_method_axis_gets_a_note_that_the_methods_override_it(tmp_path, text, said):
    config = tmp_path / "block.yaml"
    config.write_text(text)
    note = runs.config_axes_note(config)
    assert note is not None and said in note and "not used by any run" in note and "\n" not in note, note


@pytest.mark.parametrize(
    "text, said",
    [
        ("- a list\n", "is not a mapping of config fields"),
        ("lr: [unclosed\n", "cannot be read (ParserError)"),
        ("advantage: {estimater: grpo}\n", "has no key 'estimater'; did you mean estimator?"),
    ],
)
def test_a_block_config_that_cannot_be_read_is_refused_in_one_line(tmp_path, text, said):
    config = tmp_path / "block.yaml"
    config.write_text(text)
    with pytest.raises(runs.LabError, match=re.escape(said)) as err:
        runs.config_axes_note(config)
    assert "\n" not in str(err.value)


def test_a_block_config_may_restate_an_axis_at_its_default_or_leave_them_all_out(tmp_path, capsys):
    config = tmp_path / "block.yaml"
    for text in (
        "",
        "lr: 0.001\nseed: 3\n",
        "advantage: {estimator: gigpo, gamma: 0.9}\ntree: {scorer: coverage}\n",
        "rollout: flat\ndistill: {mode: none}\nprogress_gate: all_failed\nshuffle_coverage: false\n",
    ):
        config.write_text(text)
        assert runs.config_axes_note(config) is None, text
    assert capsys.readouterr().err == ""  # a check, not a load: no deprecation lines for old spellings
    with pytest.raises(runs.LabError, match=re.escape("cannot be read (FileNotFoundError)")):
        runs.config_axes_note(tmp_path / "absent.yaml")
    assert runs.config_axes_note(ROOT_CONFIGS / "credit_lab.yaml") is None  # the shipped blocks pass
    assert runs.config_axes_note(ROOT_CONFIGS / "credit_lab_confirm.yaml") is None


# ---- load_run: what a finished run must hold ---------------------------------------------------


def _kept(tmp_path: Path, method: str, config: dict | None = None, records: list[dict] | None = None) -> Path:
    folder = tmp_path / "kept" / method
    _finished_run(folder, method, 0)
    if config is not None:
        (folder / "config.yaml").write_text(yaml.safe_dump(config))
    if records is not None:
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def test_a_whole_run_loads_with_its_config_flattened_and_a_cut_one_names_where_it_ends(tmp_path):
    sectioned = {
        "iterations": 2,
        "rollout": "flat",
        "advantage": {"estimator": "planpo", "gamma": 0.9},
        "distill": {"mode": "none"},
    }
    records, config = runs.load_run(_kept(tmp_path, "planpo", config=sectioned), "planpo", 0)
    assert config["estimator"] == "planpo" and config["gamma"] == 0.9 and "advantage" not in config
    assert [r["kind"] for r in records] == ["train", "train", "eval"]
    train = {src: 0.5 for src in methods.TRAIN_KEYS.values()}
    good_eval = {"kind": "eval", "iteration": 2, "eval/success": 1, "eval/episodes": 4}  # an int success is a success
    longer = [{"kind": "train", "iteration": i, **train} for i in (1, 2, 3)] + [good_eval]
    assert len(runs.load_run(_kept(tmp_path, "grpo", records=longer), "grpo", 0)[0]) == 4
    cut = [{"kind": "train", "iteration": 1, **train}, good_eval]
    with pytest.raises(runs.LabError, match=r"ends at iteration 1 of 2 \(cut short\)"):
        runs.load_run(_kept(tmp_path, "gigpo", records=cut), "gigpo", 0)
    with pytest.raises(runs.LabError, match=r"ends at iteration 0 of 2"):
        runs.load_run(_kept(tmp_path, "hgpo", records=[good_eval]), "hgpo", 0)
    no_count = {"rollout": "flat", **methods.axes_of("progpo-gigpo"), "iterations": "unknown"}
    assert runs.load_run(_kept(tmp_path, "progpo-gigpo", config=no_count, records=cut), "progpo-gigpo", 0)


def test_a_run_that_trained_with_a_teacher_is_only_reported_as_a_teacher_method(tmp_path):
    train = {src: 0.5 for src in methods.TRAIN_KEYS.values()}
    taught = [{"kind": "train", "iteration": i, **train, "distill": "hindsight (not pure RL)"} for i in (1, 2)]
    taught.append({"kind": "eval", "iteration": 2, "eval/success": 0.5, "eval/episodes": 4})
    assert runs.load_run(_kept(tmp_path, "gigpo+hindsight", records=taught), "gigpo+hindsight", 0)
    with pytest.raises(runs.LabError) as err:
        runs.load_run(_kept(tmp_path, "gigpo", records=taught), "gigpo", 0)
    assert "its records say it trained with a teacher (hindsight (not pure RL))" in str(err.value)
    with pytest.raises(runs.LabError, match="config.yaml is not a mapping"):
        runs.load_run(_kept(tmp_path, "grpo", config=["a", "list"]), "grpo", 0)
    folder = _kept(tmp_path, "planpo")
    (folder / "config.yaml").write_text("advantage: {estimater: planpo}\n")
    with pytest.raises(runs.LabError, match="has no key 'estimater'.*delete the folder"):
        runs.load_run(folder, "planpo", 0)


# ---- edges: a pilot beside the block, retired names, key order, one panel, the last evaluation ----


def test_rerun_reads_the_comparison_and_its_pilot_together_and_a_missing_iteration_differs(tmp_path, reruns, capsys):
    _block(tmp_path / "block", _entry("gigpo", 3, {1: 0.1, 2: 0.2}))
    _block(tmp_path / "block_pilot", _entry("gigpo", 0, {1: 0.5}))  # a pilot beside it takes nothing away
    reruns["fresh"] = _fresh({1: 0.1})  # the fresh run stopped before iteration 2
    assert _rerun(tmp_path, "3", "gigpo", "--iterations", "2") == 1
    out = capsys.readouterr().out
    missing = [ln for ln in out.splitlines() if ln.startswith("iteration 2")]
    assert len(missing) == len(methods.TRAIN_KEYS) and all(
        "rerun                   None  DIFFERS" in ln for ln in missing
    )
    _block(tmp_path / "block_pilot", {**_entry("gigpo", 0, {1: 0.5}), "config": "broken"})
    assert _rerun(tmp_path, "0", "gigpo") == 2
    err = capsys.readouterr().err
    assert f"in {(tmp_path / 'block_pilot' / 'progpo_effect.json').resolve()} is malformed" in err  # names the file
    (tmp_path / "block" / "progpo_effect.json").write_text(json.dumps({"runs": {"not": "a list"}}))
    assert _rerun(tmp_path, "3", "gigpo") == 2
    assert "is not a progpo_effect record (TypeError: no list of 'runs')" in capsys.readouterr().err


def test_strict_compare_reads_retired_names_skips_every_clock_and_names_the_first_of_equal_differences():
    old = [{"kind": "train", "iteration": 1, "outcome_mean": 0.5, "time/new_stage_s": 3.0}]
    now = [{"kind": "train", "iteration": 1, "score_mean": 0.5, "time/new_stage_s": 4.0}]
    assert runs.strict_compare(old, now, 1) == (1, None)  # the retired name read as its new one; clocks skipped
    assert runs.strict_compare(old, [{**now[0], "score_mean": 0.25}], 1) == (1, (0.5, "train iteration 1 outcome_mean"))
    both = [{**old[0], "outcome_mean": 0.5}]
    assert runs.strict_compare(both, [{**now[0], "outcome_mean": 0.5, "score_mean": 0.1}], 1) == (
        1,
        None,
    )  # own name first
    two = [{"kind": "train", "iteration": 1, "a": 1.0, "b": 1.0}]
    assert runs.strict_compare(two, [{**two[0], "a": 2.0, "b": 2.0}], 1) == (1, (0.5, "train iteration 1 a"))
    nan_then = [{"kind": "eval", "iteration": 2, "eval/won": [float("nan"), 1.0]}]
    assert runs.strict_compare(nan_then, [{**nan_then[0], "eval/won": [float("nan"), 0.5]}], 2) == (
        1,
        (0.5, "eval iteration 2 eval/won"),
    )  # a NaN both share does not end the list


def test_provenance_reads_a_compute_path_in_any_key_order_and_the_last_record_s_machine():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        recs = [
            {
                "kind": "provenance",
                "commit": "a" * 40,
                "compute": {"threads": 1, "batch": "on"},
                "cpu": "old",
                "versions": {"torch": "1"},
            },
            {
                "kind": "provenance",
                "commit": "a" * 40,
                "compute": {"batch": "on", "threads": 1},
                "cpu": "new",
                "versions": {"torch": "2"},
            },
        ]
        (folder / "provenance.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
        assert runs.provenance_of(folder) == {
            "commit": "a" * 40,
            "compute": {"batch": "on", "threads": 1},
            "cpu": "new",
            "versions": {"torch": "2"},
        }


def test_runs_that_played_one_panel_pair():
    entries = [{"method": m, "seed": 0, "eval": [{"eval/panel": "p"}, {"eval/panel": "p"}]} for m in ("gigpo", "grpo")]
    assert runs.panel_problem(entries) is None
    assert runs.panel_problem([*entries, {"method": "grpo", "seed": 1, "eval": [{"eval/panel": "q"}]}]) is None


def test_the_analysis_reads_the_last_evaluation_and_a_metric_not_logged_as_missing():
    from trainers.lab.analysis import final_success, series

    run = run_with_evals("gigpo", 0, [(0, 0.1), (15, 0.2), (30, 0.4)])
    assert final_success(run) == 0.4
    got = series([{"train": [{"x": 1}, {"x": None}, {}]}, {"train": [{"x": 2.5}, {"x": 3}, {"x": 0}]}], "train", "x")
    assert np.array_equal(got, np.array([[1.0, np.nan, np.nan], [2.5, 3.0, 0.0]]), equal_nan=True)


def test_two_seeds_make_a_family_member_and_disjoint_seeds_decide_nothing():
    from trainers.lab.analysis import ValidityCriteria, multiplicity, validity

    by = {
        m: [run_with_evals(m, s, [(0, 0.0), (30, y + 0.1 * s)]) for s in (0, 1)]
        for m, y in (("gigpo", 0.2), ("planpo", 0.3))
    }
    assert [r["seeds"] for r in multiplicity(by, ["planpo"])] == [2]
    apart = {
        "gigpo": [run_with_evals("gigpo", 0, [(0, 0.0), (30, 0.5)])],
        "grpo": [run_with_evals("grpo", 1, [(0, 0.0), (30, 0.1)])],
    }
    v = validity(apart, ValidityCriteria(trap_min=0.5, room_min=0.1, seeds=1))
    assert (
        v["seeds"] == 0 and v["gigpo_minus_grpo"] is None and v["verdict"] == "not decided: fewer than 1 paired seeds"
    )


def test_only_a_preregistered_block_has_a_primary():
    from trainers.lab.analysis import registered_primary

    confirm = ROOT_CONFIGS / "credit_lab_confirm.yaml"
    assert registered_primary("confirm", confirm).alpha == 0.05
    assert registered_primary("alfworld", confirm) is None and registered_primary(None, confirm) is None


def test_a_preregistered_block_runs_the_arms_and_seeds_its_config_registers(tmp_path, monkeypatch, capsys):
    """The design is written once, in the registration: the block's methods and seeds are read
    from it; a block whose registration is not in the checkout is refused with one line."""
    for lab, name in (("confirm", "credit_lab_confirm.yaml"), ("tree", "credit_lab_tree.yaml")):
        registered = yaml.safe_load((ROOT_CONFIGS / name).read_text())["notes"]["preregistration"]
        args = cli.parse(["--lab", lab])
        assert args.methods == registered["arms"] and args.seeds == registered["seeds"]
    config = tmp_path / "registered.yaml"
    config.write_text("notes:\n  preregistration:\n    arms: [grpo, gigpo]\n    seeds: [3, 4]\n")
    assert methods._registered_arms(str(config)) == {"methods": ("grpo", "gigpo"), "seeds": (3, 4)}
    assert methods._registered_arms(str(tmp_path / "absent.yaml")) == {}
    monkeypatch.setitem(methods.LAB_PRESETS, "tree", {"config": "absent.yaml", "preregistered": True})
    monkeypatch.setattr(cli, "LAB_PRESETS", methods.LAB_PRESETS)
    with pytest.raises(SystemExit):
        cli.parse(["--lab", "tree"])
    assert "--lab tree: its registration absent.yaml is not in this checkout" in capsys.readouterr().err


def test_a_dynamic_runs_entry_reads_what_it_sampled_and_its_evals_carry_the_episodes_spent():
    dyn = {
        "dynamic/sampled_success": 0.1,
        "dynamic/sampled_all_failed_frac": 0.9,
        "dynamic/first_all_failed_frac": 0.875,
    }
    records = [
        {"kind": "eval", "iteration": 0, "eval/success": 0.1, "eval/episodes": 4},
        {"kind": "train", "iteration": 1, "success": 0.6, "all_failed_frac": 0.0, "budget/episodes": 320.0,
         "dynamic/gen_batches": 5.0, **dyn},
        {"kind": "train", "iteration": 2, "success": 0.5, "all_failed_frac": 0.0, "budget/episodes": 704.0,
         "dynamic/gen_batches": 6.0, **dyn},
        {"kind": "eval", "iteration": 2, "eval/success": 0.3, "eval/episodes": 4},
    ]  # fmt: skip
    entry = runs.run_record("gigpo+dynamic", 3, "canonical", records, {"dynamic_sampling": True})
    first = entry["train"][0]
    # the kept groups' success (0.6) is biased up by construction: the row reads every sampled episode
    assert (first["train/success"], first["all_failed_fraction"], first["first_collection"]) == (0.1, 0.9, 0.875)
    assert [e["sampled_episodes"] for e in entry["eval"]] == [0.0, 704.0]
    assert [r["sampled_episodes"] for r in entry["train"]] == [320.0, 704.0]


def test_a_plugin_registered_after_the_lab_was_imported_has_its_acted_entry_in_the_runs_entry():
    import numpy as np

    from trainers.advantages.registry import register_estimator, unregister

    @register_estimator("late-plugin", help="a late plug-in", acted={"late steps": "adv/late_frac"}, replace=True)
    def _late(ctx):
        return np.zeros(ctx.traj.size)

    try:
        records = [
            {"kind": "train", "iteration": 1, "success": 0.1, "adv/late_frac": 0.25},
            {"kind": "eval", "iteration": 1, "eval/success": 0.2, "eval/episodes": 4},
        ]
        entry = runs.run_record("late-plugin", 0, "canonical", records, {})
        assert entry["acted"] == [{"iteration": 1, "late steps": 0.25}]
        assert methods.acted_by()["late steps"] == "late-plugin" and "late steps" in methods.ACTED_KEYS
    finally:
        unregister("late-plugin")
    assert "late steps" not in methods.acted_keys()
