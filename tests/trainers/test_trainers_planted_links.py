"""A run never writes, truncates or deletes through a symlink planted in its output dir.

Each case plants a link under a name the run writes (``.lock``, the manifest's temp file, a
checkpoint's temp file, ``checkpoints/``, ``metrics.jsonl`` on resume) pointing at a file outside
the dir, then runs the trainer: the outside file must keep its bytes, and the run either goes on
without the link or stops with one ``error:`` line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from trainers.cli.train import main
from trainers.runs.checkpoint import save_checkpoint
from trainers.runs.run_dir import MANIFEST_NAME, RunDirError, RunManifest, claim_run_dir
from trainers.runs.run_files import LinkedPathError, create_fresh, open_nofollow, real_dir, write_atomic

FLAGS = (
    "--env rooms --model tiny --num-groups 1 --group-size 2 --max-steps 3 --eval-episodes 0 "
    "--no-progress-bars --no-tensorboard --warm-start none --torch-threads 1 --no-baseline-random"
).split()
SECRET = b"a user's notes, not the run's\n"


@pytest.fixture()
def outside(tmp_path: Path) -> Path:
    """A file outside the run dir that a planted link points at."""
    victim = tmp_path / "elsewhere" / "notes.txt"
    victim.parent.mkdir()
    victim.write_bytes(SECRET)
    return victim


def _errors(capsys) -> list[str]:
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]


def test_a_planted_lock_link_is_refused_and_its_target_kept(tmp_path, outside, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").symlink_to(outside)
    assert main([*FLAGS, "--iterations", "1", "--output-dir", str(run)]) == 2
    errors = _errors(capsys)
    assert len(errors) == 1 and ".lock" in errors[0] and "symbolic link" in errors[0]
    assert outside.read_bytes() == SECRET


def test_resume_on_a_dir_whose_lock_became_a_link_is_refused(tmp_path, outside, capsys):
    run = tmp_path / "run"
    assert main([*FLAGS, "--iterations", "1", "--output-dir", str(run)]) == 0
    (run / ".lock").unlink()
    (run / ".lock").symlink_to(outside)
    assert main([*FLAGS, "--iterations", "2", "--output-dir", str(run), "--resume"]) == 2
    assert ".lock" in _errors(capsys)[0]
    assert outside.read_bytes() == SECRET


def test_the_manifest_temp_file_link_is_replaced_not_written_through(tmp_path, outside):
    run = tmp_path / "run"
    run.mkdir()
    (run / (MANIFEST_NAME + ".tmp")).symlink_to(outside)
    claim_run_dir(run, resume=False).release()
    assert outside.read_bytes() == SECRET
    assert RunManifest.load(run) is not None and not (run / (MANIFEST_NAME + ".tmp")).exists()


def test_a_checkpoint_temp_file_link_is_replaced_not_written_through(tmp_path, outside):
    (tmp_path / "checkpoints").mkdir()
    for name in ("iter_000001.pt.tmp", "iter_000001.pt.sha256.tmp", "latest.tmp"):
        (tmp_path / "checkpoints" / name).symlink_to(outside)
    save_checkpoint(tmp_path, 1, {"history": []})
    assert outside.read_bytes() == SECRET
    assert (tmp_path / "checkpoints" / "iter_000001.pt").is_file()


def test_a_checkpoints_folder_that_is_a_link_is_refused(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "iter_000000.pt").write_bytes(SECRET)  # pruning would delete it through the link
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoints").symlink_to(elsewhere, target_is_directory=True)
    assert main([*FLAGS, "--iterations", "1", "--output-dir", str(run)]) == 2
    errors = _errors(capsys)
    assert len(errors) == 1 and "checkpoints" in errors[0] and "symbolic link" in errors[0]
    assert sorted(p.name for p in elsewhere.iterdir()) == ["iter_000000.pt"]
    assert (elsewhere / "iter_000000.pt").read_bytes() == SECRET


def test_resume_never_appends_metrics_through_a_link(tmp_path, outside, capsys):
    run = tmp_path / "run"
    assert main([*FLAGS, "--iterations", "1", "--output-dir", str(run)]) == 0
    records = (run / "metrics.jsonl").read_text()
    (run / "metrics.jsonl").unlink()
    outside.write_text(records)
    (run / "metrics.jsonl").symlink_to(outside)
    assert main([*FLAGS, "--iterations", "2", "--output-dir", str(run), "--resume"]) == 0
    assert outside.read_text() == records  # the link was replaced by the run's own file
    assert not (run / "metrics.jsonl").is_symlink()
    assert [json.loads(ln)["iteration"] for ln in (run / "metrics.jsonl").read_text().splitlines()][-1] == 2


def test_overwrite_never_deletes_through_a_linked_folder(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "vialink").write_bytes(SECRET)
    run = tmp_path / "run"
    run.mkdir()
    (run / "link").symlink_to(elsewhere, target_is_directory=True)
    RunManifest.create(run).record("link/vialink", "metrics.jsonl")
    (run / "metrics.jsonl").write_text('{"iteration": 0}\n')
    said: list[str] = []
    claim_run_dir(run, resume=False, overwrite=True, say=said.append).release()
    assert (elsewhere / "vialink").read_bytes() == SECRET
    assert not (run / "metrics.jsonl").exists() and said and "metrics.jsonl" in said[0]


def test_a_manifest_that_is_a_folder_is_refused_before_anything_is_deleted(tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*FLAGS, "--iterations", "1", "--output-dir", str(run)]) == 0
    (run / MANIFEST_NAME).unlink()
    (run / MANIFEST_NAME).mkdir()
    before = sorted(p.relative_to(run).as_posix() for p in run.rglob("*"))
    assert main([*FLAGS, "--iterations", "1", "--output-dir", str(run), "--overwrite"]) == 2
    errors = _errors(capsys)
    assert len(errors) == 1 and "a folder" in errors[0]
    assert sorted(p.relative_to(run).as_posix() for p in run.rglob("*")) == before


def test_an_oversized_manifest_is_refused_unread(tmp_path, monkeypatch):
    import trainers.runs.run_dir as run_dir

    monkeypatch.setattr(run_dir, "MANIFEST_MAX_BYTES", 1024)
    (tmp_path / MANIFEST_NAME).write_text(
        json.dumps({"format": "progpo-run-v1", "run_id": "x", "files": ["f%06d" % i for i in range(200)]})
    )
    with pytest.raises(RunDirError, match="over"):
        RunManifest.load(tmp_path)
    import tracemalloc

    with open(tmp_path / MANIFEST_NAME, "wb") as fh:  # 64 MiB, sparse: read whole, it would be held in memory
        fh.truncate(64 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(RunDirError, match="over"):
            RunManifest.load(tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_the_run_file_calls_refuse_links_fifos_and_linked_folders(tmp_path, outside):
    link = tmp_path / "link.txt"
    link.symlink_to(outside)
    for mode in ("w", "a", "r+", "ab"):
        with pytest.raises(LinkedPathError) as info:
            open_nofollow(link, mode)
        assert str(info.value) == (
            f"{link}: is a symbolic link, which a run never writes through (it could point "
            "outside the run dir); remove it and run again"
        )
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(LinkedPathError, match="not a regular file"):
        open_nofollow(fifo, "a")  # never blocks waiting for a reader
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # with a reader the open succeeds: the file type refuses it
    try:
        with pytest.raises(LinkedPathError, match="not a regular file"):
            open_nofollow(fifo, "w")
    finally:
        os.close(reader)
    with pytest.raises(LinkedPathError):
        real_dir(link)
    with create_fresh(link) as fh:  # the link itself is replaced
        fh.write(b"new")
    write_atomic(tmp_path / "x.txt", "x")
    assert outside.read_bytes() == SECRET and link.read_bytes() == b"new" and not link.is_symlink()


def test_create_fresh_replaces_a_file_refuses_a_folder_and_a_link_planted_after_the_unlink(
    tmp_path, outside, monkeypatch
):
    """What was there goes first (a file, a link); a folder is refused by name; a link planted
    between that removal and the exclusive create is refused, its target untouched; the new file
    is readable by all, writable by its owner (0o644 under umask 022)."""
    target = tmp_path / "f.tmp"
    target.write_bytes(b"old")
    old_mask = os.umask(0o022)
    try:
        with create_fresh(target) as fh:
            fh.write(b"new")
    finally:
        os.umask(old_mask)
    assert target.read_bytes() == b"new" and (target.stat().st_mode & 0o777) == 0o644
    (tmp_path / "d").mkdir()
    with pytest.raises(LinkedPathError) as info:
        create_fresh(tmp_path / "d")
    assert str(info.value) == (
        f"{tmp_path / 'd'}: is a folder, which a run never writes through (it could point "
        "outside the run dir); remove it and run again"
    )
    real_unlink = type(target).unlink

    def unlink_then_plant(self, missing_ok=False):
        real_unlink(self, missing_ok=missing_ok)
        self.symlink_to(outside)

    monkeypatch.setattr(type(target), "unlink", unlink_then_plant)
    with pytest.raises(LinkedPathError) as info:
        create_fresh(target)
    assert str(info.value).startswith(
        f"{target}: is a file that appeared while it was being replaced, which a run never"
    )
    assert outside.read_bytes() == SECRET


def test_a_run_file_name_planted_as_a_link_in_a_dir_without_manifest_is_not_taken_for_the_runs(tmp_path):
    from trainers.runs.run_dir import earlier_run_files

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    record = tmp_path / "elsewhere.jsonl"  # looks like a run's metrics, but lives outside the dir
    record.write_text(json.dumps({"iteration": 1, "kind": "train"}) + "\n")
    (run_dir / "metrics.jsonl").symlink_to(record)
    ours, foreign = earlier_run_files(run_dir)
    assert ours == [] and foreign == [run_dir / "metrics.jsonl"]  # named to the user, never removed as the run's


def test_a_manifest_entry_outside_the_run_dir_is_never_listed_nor_deleted(tmp_path):
    """A hand-edited manifest that names ``../x``, an absolute path or an empty path: those entries
    are dropped on load, so --overwrite deletes nothing outside the run dir; recording them is a
    no-op too."""
    import json

    from trainers.runs.run_dir import MANIFEST_NAME, RunManifest

    run = tmp_path / "run"
    run.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(SECRET)
    (run / "metrics.jsonl").write_text('{"iteration": 0}\n')
    manifest = RunManifest.create(run)
    manifest.record("../victim.txt", str(victim), "", "metrics.jsonl")
    assert manifest.files == {"metrics.jsonl"}
    data = json.loads((run / MANIFEST_NAME).read_text())
    data["files"] = ["../victim.txt", str(victim), "", "a/../../victim.txt", "metrics.jsonl"]
    (run / MANIFEST_NAME).write_text(json.dumps(data))
    assert RunManifest.load(run).files == {"metrics.jsonl"}
    claim_run_dir(run, resume=False, overwrite=True, say=lambda line: None).release()
    assert victim.read_bytes() == SECRET and not (run / "metrics.jsonl").exists()


def test_overwrite_with_a_linked_run_folder_neither_lists_nor_empties_what_it_points_to(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "empty").mkdir(parents=True)
    (elsewhere / "theirs.bin").write_bytes(SECRET)
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoints").symlink_to(elsewhere, target_is_directory=True)
    (run / "metrics.jsonl").write_text('{"iteration": 0}\n')
    RunManifest.create(run).record("metrics.jsonl")
    said: list[str] = []
    claim_run_dir(run, resume=False, overwrite=True, say=said.append).release()
    assert said == [f"--overwrite: removing the earlier run's files in {run}: metrics.jsonl"]
    assert (elsewhere / "empty").is_dir() and (elsewhere / "theirs.bin").read_bytes() == SECRET


def test_a_link_planted_where_a_run_folder_was_just_made_is_refused(tmp_path, outside, monkeypatch):
    target = tmp_path / "checkpoints"

    def plant(self, parents=False, exist_ok=False):
        self.symlink_to(outside.parent, target_is_directory=True)

    monkeypatch.setattr(type(target), "mkdir", plant)
    with pytest.raises(LinkedPathError) as info:
        real_dir(target)
    assert str(info.value) == (
        f"{target}: is not a folder, which a run never writes through (it could point outside "
        "the run dir); remove it and run again"
    )


def test_every_manifest_that_is_not_a_runs_is_refused_in_one_line(tmp_path, outside, monkeypatch):
    """By kind (a link, a folder, a FIFO), by size (a manifest of exactly the limit is read, one byte
    more is refused unread), by encoding and syntax, and by content (format, run id, file list)."""
    import trainers.runs.run_dir as run_dir

    path = tmp_path / MANIFEST_NAME
    fix = "remove it or pick another --output-dir"

    def refused() -> str:
        with pytest.raises(RunDirError) as info:
            RunManifest.load(tmp_path)
        return str(info.value)

    path.symlink_to(outside)
    assert refused() == f"{path} is a symbolic link, not a run's manifest; {fix}"
    path.unlink()
    path.mkdir()
    assert refused() == f"{path} is a folder, not a run's manifest; {fix}"
    path.rmdir()
    os.mkfifo(path)
    assert refused() == f"{path} is not a regular file, not a run's manifest; {fix}"
    path.unlink()
    monkeypatch.setattr(run_dir, "MANIFEST_MAX_BYTES", 2 << 20)
    body = json.dumps({"format": "progpo-run-v1", "run_id": "x", "files": ["metrics.jsonl"]})
    path.write_text(body + " " * ((2 << 20) - len(body)))  # exactly the limit
    assert RunManifest.load(tmp_path).files == {"metrics.jsonl"}
    path.write_text(body + " " * ((2 << 20) + 1 - len(body)))
    assert refused() == f"{path} is over 2 MiB, far more than a run's manifest; {fix}"
    for raw, cause in ((b"{not json", "JSONDecodeError"), (b"\xff\xfe{}", "UnicodeDecodeError")):
        path.write_bytes(raw)
        assert refused() == f"{path} is damaged ({cause}); {fix}"
    good = {"format": "progpo-run-v1", "run_id": "x", "files": ["metrics.jsonl"]}
    for bad in (
        [good],
        {**good, "format": "progpo-run-v0"},
        {**good, "run_id": 7},
        {**good, "files": "metrics.jsonl"},
        {**good, "files": ["metrics.jsonl", 3]},
    ):
        path.write_text(json.dumps(bad))
        assert refused() == f"{path} is not a progpo-run-v1 manifest; {fix}"


def test_open_nofollow_opens_text_and_binary_and_refuses_a_link_planted_after_its_check(tmp_path, outside, monkeypatch):
    p = tmp_path / "f.txt"
    with open_nofollow(p) as fh:  # "w", text, UTF-8 by default
        fh.write("é")
    assert p.read_bytes() == "é".encode("utf-8")
    with open_nofollow(p, "w", encoding="latin-1") as fh:
        fh.write("é")
    assert p.read_bytes() == b"\xe9"
    with open_nofollow(p, "wb") as fh:
        fh.write(b"\x00\x01")
    with open_nofollow(p, "ab") as fh:
        fh.write(b"\x02")
    with open_nofollow(p, "r+b") as fh:
        assert fh.read() == b"\x00\x01\x02"
    link = tmp_path / "link"
    link.symlink_to(outside)
    monkeypatch.setattr(type(link), "is_symlink", lambda self: False)  # planted after the check: O_NOFOLLOW holds
    with pytest.raises(LinkedPathError) as info:
        open_nofollow(link, "a")
    assert str(info.value).startswith(f"{link}: is a symbolic link, which a run never writes through")
    assert outside.read_bytes() == SECRET
