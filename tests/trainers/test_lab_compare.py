"""``--compare-with``: two kept copies of a block read run by run (trainers.lab.compare)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from trainers.lab import cli, methods

sys.path.insert(0, str(Path(__file__).parent))
from lab_records import write_kept_run


def _block(root: Path, runs: dict[tuple[str, int], float]) -> Path:
    """A block folder whose runs end at held-out success ``runs[(method, seed)]``."""
    for (method, seed), success in runs.items():
        write_kept_run(root / "runs" / methods.run_name(method, seed, "canonical"), method, seed, success=success)
    return root


def _compare(tmp_path: Path, other: Path, *extra: str) -> int:
    return cli.main(
        [
            "--out",
            str(tmp_path / "new"),
            "--work",
            str(tmp_path / "work"),
            *"--methods grpo gigpo --seeds 0 1 --compare-with".split(),
            str(other),
            *extra,
        ]
    )


def test_identical_copies_are_bit_exact_run_by_run(tmp_path, capsys):
    runs = {("grpo", 0): 0.25, ("gigpo", 0): 0.5, ("grpo", 1): 0.125, ("gigpo", 1): 0.75}
    _block(tmp_path / "new", runs)
    old = _block(tmp_path / "old", runs)
    assert _compare(tmp_path, old) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("| ") and "canonical" in ln]
    assert rows == [
        f"| {methods.run_name(m, s, 'canonical')} | 4 | bit-exact |" for s in (0, 1) for m in ("grpo", "gigpo")
    ]
    assert out.rstrip().endswith("4 of 4 shared runs bit-exact")
    assert not (tmp_path / "work").exists()  # nothing ran


def test_a_changed_field_names_the_run_the_record_and_the_relative_difference(tmp_path, capsys):
    _block(tmp_path / "new", {("grpo", 0): 0.25, ("gigpo", 0): 0.5})
    old = _block(tmp_path / "old", {("grpo", 0): 0.25, ("gigpo", 0): 0.4})
    assert _compare(tmp_path, old / "runs") == 0  # the runs/ folder itself is accepted too
    out = capsys.readouterr().out
    name = methods.run_name("gigpo", 0, "canonical")
    assert f"| {name} | 4 | 0.2 relative (eval iteration 0 eval/success) |" in out
    assert out.rstrip().endswith(f"1 of 2 shared runs bit-exact; differ: {name}")


def test_runs_in_one_copy_only_are_named_and_not_compared(tmp_path, capsys):
    _block(tmp_path / "new", {("grpo", 0): 0.25, ("gigpo", 0): 0.5})
    old = _block(tmp_path / "old", {("grpo", 0): 0.25, ("grpo", 1): 0.5})
    assert _compare(tmp_path, old) == 0
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last == (
        "1 of 1 shared runs bit-exact; in one copy only (not compared): "
        f"{methods.run_name('gigpo', 0, 'canonical')}, {methods.run_name('grpo', 1, 'canonical')}"
    )


def test_a_record_one_run_lacks_is_a_difference(tmp_path, capsys):
    _block(tmp_path / "new", {("grpo", 0): 0.25})
    old = _block(tmp_path / "old", {("grpo", 0): 0.25})
    metrics = old / "runs" / methods.run_name("grpo", 0, "canonical") / "metrics.jsonl"
    recs = [json.loads(ln) for ln in metrics.read_text().splitlines()]
    metrics.write_text("".join(json.dumps(r) + "\n" for r in recs if not (r["kind"] == "eval" and r["iteration"] == 2)))
    assert _compare(tmp_path, old) == 0
    out = capsys.readouterr().out
    assert "| 0 | inf relative (eval iteration 2 in one run only) |" in out
    assert "0 of 1 shared runs bit-exact" in out


def test_an_unreadable_run_is_a_row_not_a_traceback(tmp_path, capsys):
    _block(tmp_path / "new", {("grpo", 0): 0.25})
    old = _block(tmp_path / "old", {("grpo", 0): 0.25})
    (old / "runs" / methods.run_name("grpo", 0, "canonical") / "metrics.jsonl").write_text(
        "[1, 2]\n"
    )  # JSON, not a record
    assert _compare(tmp_path, old) == 0
    out = capsys.readouterr().out
    assert "line 1 is JSON but not a record (list)" in out and "0 of 1 shared runs bit-exact" in out


@pytest.mark.parametrize("what", ["missing", "nothing shared"])
def test_nothing_to_compare_is_one_line(tmp_path, capsys, what):
    _block(tmp_path / "new", {("grpo", 0): 0.25})
    other = tmp_path / "missing" if what == "missing" else _block(tmp_path / "old", {("gigpo", 1): 0.5})
    assert _compare(tmp_path, other) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --compare-with:") and "\n" not in err


def test_a_block_compared_with_its_own_folder_is_refused(tmp_path, capsys):
    _block(tmp_path / "new", {("grpo", 0): 0.25})
    assert _compare(tmp_path, tmp_path / "new") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --compare-with:") and "this block's own folder" in err


def _edit(block: Path, method: str, edit) -> None:
    metrics = block / "runs" / methods.run_name(method, 0, "canonical") / "metrics.jsonl"
    recs = [json.loads(ln) for ln in metrics.read_text().splitlines()]
    metrics.write_text("".join(json.dumps(edit(r)) + "\n" for r in recs))


@pytest.mark.parametrize(
    "edit, said",
    [
        (
            lambda r: {**r, "eval/panel": "forged"} if r["kind"] == "eval" else r,
            "eval/panel (not a number, and not equal)",
        ),
        (lambda r: {**r, "eval/task_id": ["x", "y"]} if r["kind"] == "eval" else r, "eval/task_id"),
    ],
)
def test_a_forged_text_field_or_a_field_one_copy_alone_has_is_a_difference(tmp_path, capsys, edit, said):
    _block(tmp_path / "new", {("grpo", 0): 0.25})
    old = _block(tmp_path / "old", {("grpo", 0): 0.25})
    _edit(
        tmp_path / "new",
        "grpo",
        lambda r: {**r, "eval/panel": "p", "eval/task_id": ["a", "b"]} if r["kind"] == "eval" else r,
    )
    _edit(old, "grpo", lambda r: {**r, "eval/panel": "p", "eval/task_id": ["a", "b"]} if r["kind"] == "eval" else r)
    _edit(old, "grpo", edit)
    assert _compare(tmp_path, old) == 0
    out = capsys.readouterr().out
    assert said in out and "0 of 1 shared runs bit-exact" in out


def test_random_bytes_as_records_are_a_difference_not_zero_records(tmp_path, capsys):
    _block(tmp_path / "new", {("grpo", 0): 0.25})
    old = _block(tmp_path / "old", {("grpo", 0): 0.25})
    for block in (tmp_path / "new", old):
        (block / "runs" / methods.run_name("grpo", 0, "canonical") / "metrics.jsonl").write_bytes(bytes(range(256)) * 4)
    assert _compare(tmp_path, old) == 0
    out = capsys.readouterr().out
    assert "line 1 is not JSON" in out and "0 of 1 shared runs bit-exact" in out


def test_a_field_one_copy_alone_holds_is_named_and_not_counted_as_bit_exact(tmp_path, capsys):
    _block(tmp_path / "new", {("grpo", 0): 0.25, ("gigpo", 0): 0.5})
    old = _block(tmp_path / "old", {("grpo", 0): 0.25, ("gigpo", 0): 0.5})
    _edit(old, "grpo", lambda r: {**r, "extra/field": 1.0} if r["kind"] == "train" else r)
    assert _compare(tmp_path, old) == 0
    out = capsys.readouterr().out
    name = methods.run_name("grpo", 0, "canonical")
    assert f"| {name} | 4 | bit-exact in the fields both hold; in one copy only: extra/field (the other copy) |" in out
    assert out.rstrip().endswith(
        f"1 of 2 shared runs bit-exact; 1 more bit-exact in every field both copies hold, "
        f"with fields one copy alone has ({name})"
    )


@pytest.mark.parametrize("where", ["file", "under_file", "new"])
def test_report_out_is_checked_and_a_new_folder_is_not_made_for_a_refused_report(tmp_path, capsys, where):
    (tmp_path / "file").write_text("x")
    out = {"file": tmp_path / "file", "under_file": tmp_path / "file" / "x", "new": tmp_path / "new" / "lab"}[where]
    assert cli.main(["--report", "--out", str(out), "--methods", "grpo", "--seeds", "0"]) == 2
    err = capsys.readouterr().err.strip()
    said = "is a file, not a folder" if where != "new" else "no finished run of grpo"
    assert err.startswith("error:") and said in err and "\n" not in err
    assert not (tmp_path / "new").exists() and (tmp_path / "file").read_text() == "x"
