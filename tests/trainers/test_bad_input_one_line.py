"""Bad input gets one line and loses no data: configs past any sane size, panels past any
memory, damaged files met twice, an export killed mid-write, a progress count past its guess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trainers.cli.evaluate import MAX_EPISODES
from trainers.cli.export import clear_stale_temps
from trainers.runs.console import LineProgress
from trainers.runs.metrics import MetricsFileError, read_metrics, restore_for_resume
from trainers.strict_yaml import MAX_DEPTH, StrictYAMLError, load_strict

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "text, said",
    [
        ("ppo: {<<: {lr: 0.1}, <<: {lr: 0.2}}\n", "line 1: YAML merge keys (<<) are not accepted"),
        ("a: &x {lr: 0.1}\nppo:\n  <<: {lr: 0.2}\n", "line 3: YAML merge keys (<<)"),
        ("notes: " + "[" * 900 + "]" * 900 + "\n", f"nested more than {MAX_DEPTH} levels deep"),
        ("seed: " + "9" * 5000 + "\n", "an integer of 5000 digits"),
        ("notes: {a: [" + "7" * 4400 + "]}\n", "an integer of 4400 digits"),
    ],
    ids=["merge-twice", "merge-once", "deep", "huge-int", "huge-int-in-list"],
)
def test_strict_yaml_refuses_merges_deep_nesting_and_huge_ints_in_one_line(text, said):
    with pytest.raises(StrictYAMLError, match=re.escape(said)) as err:
        load_strict(text)
    assert "\n" not in str(err.value)


def test_strict_yaml_still_reads_a_config_of_ordinary_depth_and_numbers():
    text = "a: {b: {c: [1, {d: 2}]}}\nseed: 4294967295\nlr: 1.0e-6\n" + "x: " + "[" * 20 + "]" * 20 + "\n"
    data = load_strict(text)
    assert data["a"]["b"]["c"][1] == {"d": 2} and data["seed"] == 2**32 - 1


@pytest.mark.slow  # a trainer or script in a subprocess
@pytest.mark.parametrize("text", ["[" * 900 + "]" * 900, "9" * 5000, "{<<: {lr: 0.1}, <<: {lr: 0.2}}"])
def test_the_trainer_says_a_bad_config_in_one_line_even_when_it_names_plugins(tmp_path, text):
    config = tmp_path / "bad.yaml"
    config.write_text(f"plugins: []\nnotes: {{x: {text}}}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "trainers.progpo", "--config", str(config)],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: config {config}")


@pytest.mark.slow  # a trainer or script in a subprocess
@pytest.mark.parametrize("tool", ["evaluate", "play"])
def test_a_panel_past_any_memory_is_one_line_before_anything_loads(tool, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", f"trainers.{tool}", str(tmp_path / "no-run"), "--episodes", str(10**12)],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr
    assert (
        proc.stderr.strip() == f"error: --episodes {10**12} is over {MAX_EPISODES:,}, more than any panel here can hold"
    )


def test_a_second_damage_keeps_the_first_copy_and_a_folder_in_the_way_loses_nothing(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    history = [{"iteration": 1, "kind": "train"}]
    metrics.write_text('{"iteration": 1, "kind": "train"}\n{first damage\n')
    said, first = restore_for_resume(metrics, history, 1)
    assert first is not None and first.name == "metrics.jsonl.damaged" and "first damage" in first.read_text()
    metrics.write_text('{"iteration": 1, "kind": "train"}\n{second damage\n')
    _, second = restore_for_resume(metrics, history, 1)
    assert second is not None and second.name == "metrics.jsonl.damaged.1" and "second damage" in second.read_text()
    assert "first damage" in first.read_text()  # never overwritten
    first.unlink()
    first.mkdir()  # a folder where the copy would go: the copy goes beside it
    metrics.write_text("{third damage\n")
    _, third = restore_for_resume(metrics, history, 1)
    assert third is not None and third.name == "metrics.jsonl.damaged.2" and "third damage" in third.read_text()
    assert read_metrics(metrics) == history


def test_a_metrics_file_that_is_a_folder_is_one_line():
    with pytest.raises(MetricsFileError, match="is not a regular file"):
        restore_for_resume(Path(__file__).parent, [], 0)


def test_an_export_killed_mid_write_leaves_a_temp_folder_the_next_export_removes(tmp_path):
    out = tmp_path / "exported"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no longer runs: its export was killed
    stale = tmp_path / f".exported.{dead.pid}.abc123.tmp"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"partial")
    live = tmp_path / f".exported.{os.getpid()}.def456.tmp"  # an export still writing: left alone
    live.mkdir()
    other = tmp_path / ".exported-2.999999.x.tmp"  # another OUT's: not this export's to touch
    other.mkdir()
    assert clear_stale_temps(out) == [stale]
    assert not stale.exists() and live.is_dir() and other.is_dir()


def test_a_progress_line_whose_total_is_a_guess_never_shows_a_percentage_over_100(capsys):
    ticks = iter([0.0, 31.0, 62.0])
    bar = LineProgress(14, "update 1", clock=lambda: next(ticks), file=sys.stdout, estimated=True)
    bar.update(14)
    bar.update(3)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["update 1: 14 (about 14 expected), 31 s", "update 1: 17 (about 14 expected), 62 s"]
    assert not any("%" in line for line in lines)


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


def _run_script(script: Path, text: str) -> subprocess.CompletedProcess:
    """``text`` written to ``script`` and run as a user runs a script, from its folder."""
    script.write_text(text)
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=script.parent,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=600,
    )


@pytest.mark.slow  # a trainer or script in a subprocess
@pytest.mark.parametrize("doc", ["README.md", "docs/getting-started.md"])
def test_the_wrappers_block_runs_as_a_script(doc, tmp_path):
    block = next(b for b in _python_blocks(ROOT / doc) if "GroupVectorEnv(" in b)
    proc = _run_script(tmp_path / "wrappers_block.py", block)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.slow  # a trainer or script in a subprocess
def test_an_unguarded_async_script_is_told_where_the_cause_is(tmp_path):
    proc = _run_script(
        tmp_path / "unguarded.py",
        "import gymnasium as gym\n"
        "from wrappers import GroupVectorEnv\n"
        "envs = GroupVectorEnv(lambda: gym.make('CartPole-v1'), num_groups=1, group_size=2, backend='async', seed=0)\n"
        "envs.close()\n",
    )
    assert proc.returncode != 0
    assert 'put that code under `if __name__ == "__main__":`' in proc.stderr, proc.stderr[-3000:]
