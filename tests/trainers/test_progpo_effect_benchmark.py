"""benchmarks/progpo_effect.py on a toy config: runs, resumes, records and re-runs bit for bit."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("progpo_effect", ROOT / "benchmarks" / "progpo_effect.py")
progpo_effect = importlib.util.module_from_spec(spec)
spec.loader.exec_module(progpo_effect)

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
    assert progpo_effect.mde_80(d, 8) == pytest.approx((2.365 + 0.8416) * sd / np.sqrt(8))


@pytest.mark.slow
def test_runs_record_and_rerun_reproduces_then_catches_a_change(tmp_path, capsys):
    config = tmp_path / "toy.yaml"
    config.write_text(TOY)
    out, work = tmp_path / "out", tmp_path / "work"
    common = ["--config", str(config), "--out", str(out), "--work", str(work), "--iterations", "2", "--workers", "1"]
    assert progpo_effect.main([*common, "--methods", "grpo", "progpo-grpo", "--seeds", "0"]) == 0
    data = json.loads((out / "progpo_effect.json").read_text())
    assert sorted((r["method"], r["seed"], r["state_key"]) for r in data["runs"]) == [
        ("grpo", 0, "canonical"), ("progpo-grpo", 0, "canonical")]
    run = next(r for r in data["runs"] if r["method"] == "progpo-grpo")
    assert [row["iteration"] for row in run["train"]] == [1, 2] and run["config"]["estimator"] == "progpo-grpo"
    assert [e["iteration"] for e in run["eval"]] == [0, 1, 2] and all(e["eval/episodes"] == 4 for e in run["eval"])
    assert set(run["train"][0]) >= {"train/success", "all_failed_fraction", "coverage_rate", "repeat_rate"}
    table = (out / "table.md").read_text()
    assert "| progpo-grpo | 1 |" in table and "progpo-grpo - grpo:" in table and (out / "curves.png").exists()
    assert "(1 seed)" in table and "over 1 seed (no interval)" in table  # one seed gives no interval, not +- 0

    capsys.readouterr()
    assert progpo_effect.main([*common, "--rerun", "0", "progpo-grpo"]) == 0
    assert "every metric reproduced" in capsys.readouterr().out
    run["train"][1]["train/success"] = 0.123456  # a recorded figure that the rerun cannot give
    (out / "progpo_effect.json").write_text(json.dumps(data))
    assert progpo_effect.main([*common, "--rerun", "0", "progpo-grpo"]) == 1
    assert "DIFFERS" in capsys.readouterr().out

    # a finished run is reused: a second invocation starts no trainer and gives the same records
    before = (out / "runs" / "grpo_canonical_seed0" / "metrics.jsonl").read_bytes()
    assert progpo_effect.main([*common, "--methods", "grpo", "--seeds", "0"]) == 0
    assert (out / "runs" / "grpo_canonical_seed0" / "metrics.jsonl").read_bytes() == before

    # --report tables the finished runs alone: the unfinished seed 1 is left out, not started
    assert progpo_effect.main([*common, "--report", "--methods", "grpo", "progpo-grpo", "--seeds", "0", "1"]) == 0
    assert not (out / "runs" / "grpo_canonical_seed1").exists() and not list(work.rglob("grpo_canonical_seed1*"))
    assert sorted(r["seed"] for r in json.loads((out / "progpo_effect.json").read_text())["runs"]) == [0, 0]
    with pytest.raises(SystemExit, match="no finished run"):
        progpo_effect.main([*common, "--report", "--methods", "always", "--seeds", "0"])



def _record(config: dict, train: list) -> dict:
    return {"runs": [{"method": "grpo", "seed": 0, "state_key": "canonical", "config": config, "train": train,
                      "eval": []}]}


ROW = {"iteration": 1, **{k: 0.0 for k in progpo_effect.TRAIN_KEYS}}


@pytest.mark.parametrize("entry, match", [
    (_record("not a mapping", [ROW]), "'config' is not a mapping"),
    (_record({}, []), "'train' is not a non-empty list"),
    (_record({}, [{"iteration": "one"}]), "is not an iteration record"),
    (_record({}, [{"iteration": 1, "train/success": 0.1}]), "iteration 1 lacks"),
    ({"runs": "nope"}, "is not a progpo_effect record"),
])
def test_rerun_of_a_malformed_record_is_one_line(tmp_path, capsys, entry, match):
    out = tmp_path / "out"
    out.mkdir()
    (out / "progpo_effect.json").write_text(json.dumps(entry))
    assert progpo_effect.main(["--out", str(out), "--work", str(tmp_path / "work"), "--rerun", "0", "grpo"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and match in err and "\n" not in err, err


def test_a_failed_rerun_says_why_and_keeps_its_log(tmp_path, capsys):
    import yaml

    out = tmp_path / "out"
    out.mkdir()
    config = {**yaml.safe_load(TOY), "seed": 10**23}  # well-formed record, a config the trainer refuses
    (out / "progpo_effect.json").write_text(json.dumps(_record(config, [ROW])))
    assert progpo_effect.main(["--out", str(out), "--work", str(tmp_path / "work"), "--rerun", "0", "grpo"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "seed must be an integer" in err and "\n" not in err, err
    log = Path(err.rsplit("its log: ", 1)[1])
    assert log.is_file() and "seed must be an integer" in log.read_text()
