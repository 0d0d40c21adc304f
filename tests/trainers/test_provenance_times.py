"""A run's provenance says when and where it ran and whether its code was clean: each run records
its start and end (UTC) and host beside the commit, ``dirty`` counts untracked files git does not
ignore, and a pre-registered block's report states when its registration was committed and when
its first and last runs started, refusing runs that started before it."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from trainers.cli.train import main
from trainers.lab import runs
from trainers.lab.report import _timing_lines
from trainers.runs import provenance

UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
RUN_FLAGS = (
    "--env rooms --model tiny --num-groups 1 --group-size 2 --max-steps 3 --eval-episodes 0 "
    "--no-progress-bars --no-tensorboard --warm-start none --torch-threads 1"
).split()


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args],
        cwd=root,
        check=True,
        capture_output=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
            "PATH": "/usr/bin:/bin",
        },
    )


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("ignored/\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "one")
    return tmp_path


def test_an_untracked_file_git_does_not_ignore_makes_the_checkout_dirty(repo):
    assert provenance.git_state(repo)[1] is False
    (repo / "ignored").mkdir()
    (repo / "ignored" / "out.txt").write_text("a run's output")
    assert provenance.git_state(repo)[1] is False  # ignored files are not code
    (repo / "new_module.py").write_text("y = 2\n")
    assert provenance.git_state(repo)[1] is True
    (repo / "new_module.py").unlink()
    (repo / "a.py").write_text("x = 2\n")
    assert provenance.git_state(repo)[1] is True


def test_a_finished_run_records_its_start_end_and_host_in_utc(tmp_path):
    out = tmp_path / "run"
    assert main([*RUN_FLAGS, "--iterations", "1", "--output-dir", str(out)]) == 0
    recs = provenance.read_provenance(out)
    assert [r["kind"] for r in recs] == ["provenance", "end"]
    start, end = recs
    assert UTC.match(start["started"]) and UTC.match(end["ended"]) and start["started"] <= end["ended"]
    assert start["host"] and end["host"] == start["host"] and end["iteration"] == 1
    kept = runs.provenance_of(out)
    assert (kept["started"], kept["ended"], kept["hosts"]) == (start["started"], end["ended"], [start["host"]])
    # a resume that runs more iterations keeps the first start and ends later
    assert main([*RUN_FLAGS, "--iterations", "2", "--output-dir", str(out), "--resume"]) == 0
    again = provenance.read_provenance(out)
    assert [r["kind"] for r in again] == ["provenance", "end", "resume", "end"] and again[-1]["iteration"] == 2
    assert again[2]["iteration"] == 1 and UTC.match(again[2]["started"])  # every resume leaves its trace
    assert runs.provenance_of(out)["started"] == start["started"]
    assert runs.provenance_of(out)["ended"] == again[-1]["ended"]


def test_a_stopped_run_records_no_end(tmp_path, monkeypatch):
    from trainers import stop_request

    calls = {"n": 0}

    def stop_on_second(*a, **k):
        calls["n"] += 1
        if calls["n"] > 1:
            raise stop_request.Terminated()

    monkeypatch.setattr(stop_request, "raise_if_requested", stop_on_second)
    out = tmp_path / "run"
    assert main([*RUN_FLAGS, "--iterations", "3", "--output-dir", str(out)]) != 0
    assert [r["kind"] for r in provenance.read_provenance(out)] == ["provenance"]
    assert "ended" not in runs.provenance_of(out)


def _entries(started: list[str | None], commit: str) -> list[dict]:
    return [
        {
            "method": "gigpo+tree",
            "seed": 24 + i,
            "provenance": {"commit": commit, "compute": {}, **({"started": s} if s else {})},
        }
        for i, s in enumerate(started)
    ]


def test_a_registered_block_refuses_runs_that_started_before_its_registration(monkeypatch, tmp_path):
    sha = "b" * 40
    monkeypatch.setattr(runs, "registration", lambda config: (sha, "2026-12-06T17:00:00Z"))
    config = tmp_path / "block.yaml"
    assert (
        runs.preregistered_commit_problem(config, _entries(["2026-12-06T17:00:00Z", "2026-12-07T01:00:00Z"], sha))
        is None
    )
    problem = runs.preregistered_commit_problem(config, _entries(["2026-12-06T16:59:59Z", "2026-12-07T01:00:00Z"], sha))
    assert problem.startswith("1 run(s) started before block.yaml was registered at 2026-12-06T17:00:00Z")
    assert "gigpo+tree seed 24 (2026-12-06T16:59:59Z)" in problem
    assert runs.preregistered_commit_problem(config, _entries([None], sha)) is None  # no time recorded: not judged
    assert "not made on bbbbbbbbbbbb" in runs.preregistered_commit_problem(config, _entries([None], "c" * 40))


def test_registration_is_the_commit_that_added_the_config_and_its_utc_time(repo, monkeypatch):
    (repo / "block.yaml").write_text("seeds: [1]\n")
    _git(repo, "add", "block.yaml")
    _git(repo, "commit", "-q", "-m", "register")
    (repo / "block.yaml").write_text("seeds: [1, 2]\n")
    _git(repo, "commit", "-q", "-am", "edit")
    monkeypatch.setattr(runs, "ROOT", repo)
    sha, when = runs.registration(repo / "block.yaml")
    added = subprocess.run(
        ["git", "log", "--format=%H", "--diff-filter=A", "--", "block.yaml"], cwd=repo, capture_output=True, text=True
    ).stdout.split()
    assert sha == added[-1] and UTC.match(when)
    assert runs.registration(repo / "never.yaml") is None


def test_the_report_states_the_registration_and_the_first_and_last_start(tmp_path):
    args = argparse.Namespace(config=tmp_path / "credit_lab_tree.yaml", registration=("d" * 40, "2026-12-06T17:00:00Z"))
    entries = _entries(["2026-12-06T18:00:00Z", "2026-12-06T17:05:00Z", None], "d" * 40)
    line = _timing_lines(args, entries)[0]
    assert line == (
        "Registration: credit_lab_tree.yaml committed at dddddddddddd on 2026-12-06T17:00:00Z; its first "
        "run started 2026-12-06T17:05:00Z and its last 2026-12-06T18:00:00Z (2 of 3 runs record a start)."
    )
    assert _timing_lines(argparse.Namespace(config=args.config), entries) == []  # not a registered block
    assert "record no start time" in _timing_lines(args, _entries([None], "d" * 40))[0]
    json.dumps(entries)  # entries stay JSON for credit_lab.json
