"""The learning run, shortened: RL must move held-out success up from where the warm start left it.

`python -m trainers.progpo` with its defaults (behaviour-cloning warm start on `easy-train`, then
ProGPO(GiGPO) on `easy-train`, evaluated on the held-out `easy-valid` games) but 4 RL iterations
instead of 12 and no random-policy or `valid` evaluations. Everything is seeded (seed 0, one torch
thread), so the run is reproducible; the assertion is the direction only (end > start), not the
size of the gain that `make run` reports.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trainers.cli.train import main
from trainers.runs.metrics import read_metrics

pytest.importorskip("transformers", reason="training extra [train] not installed")


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_shortened_default_run_raises_held_out_success(tmp_path, capsys, alfworld_engine_available):
    out = tmp_path / "run"
    rc = main(
        [
            *(
                "--iterations 4 --eval-extra-split none --no-baseline-random --no-tensorboard --no-progress-bars "
                "--output-dir"
            ).split(),
            str(out),
        ]
    )
    assert rc == 0
    records = read_metrics(out / "metrics.jsonl")
    init = [r for r in records if r["kind"] == "init"]
    evals = [r for r in records if r["kind"] == "eval"]
    assert init and init[0]["init"] == "bc"
    assert [e["iteration"] for e in evals] == [0, 4]
    assert all(e["eval/split"] == "easy-valid" and e["eval/episodes"] >= 144 for e in evals)
    start, end = evals[0]["eval/success"], evals[-1]["eval/success"]
    assert end > start, f"held-out success {start:.3f} -> {end:.3f} after 4 RL iterations"
    printed = capsys.readouterr().out
    assert f"easy-valid: success {start:.3f} -> {end:.3f}" in printed


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_shortened_webshop_demo_raises_held_out_mean_score(tmp_path, capsys):
    """configs/webshop_cpu_demo.yaml with 12 RL iterations and 100 held-out goals instead of 40 and
    200: the direction of the held-out mean score (end > start at seed 0), not the size of the gain."""
    out = tmp_path / "ws"
    config = Path(__file__).resolve().parents[2] / "configs" / "webshop_cpu_demo.yaml"
    rc = main(
        [
            "--config",
            str(config),
            *(
                "--iterations 12 --eval-episodes 100 --bc-episodes 150 --no-baseline-random --no-tensorboard "
                "--no-progress-bars --output-dir"
            ).split(),
            str(out),
        ]
    )
    assert rc == 0
    evals = [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "eval"]
    assert [e["iteration"] for e in evals] == [0, 12] and all(e["eval/episodes"] == 100 for e in evals)
    start, end = (sum(e["eval/score"]) / 100 for e in evals)
    assert end > start, f"held-out mean score {start:.3f} -> {end:.3f} after 12 RL iterations"
    assert f"test: mean score {start:.3f} -> {end:.3f}" in capsys.readouterr().out
