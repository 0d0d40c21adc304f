"""A run owns its output dir: a fresh run never destroys an earlier one, two runs never share one,
pruning never deletes the checkpoint just written, and lost metrics are rebuilt on resume."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainers.cli.train import main
from trainers.runs.checkpoint import latest_checkpoint, save_checkpoint
from trainers.runs.run_dir import RunDirError, claim_run_dir

ROOT = Path(__file__).resolve().parents[2]
FLAGS = (
    "--env rooms --model tiny --num-groups 1 --group-size 2 --max-steps 3 --eval-episodes 0 "
    "--no-progress-bars --no-tensorboard --warm-start none --torch-threads 1 --no-baseline-random"
).split()


def _iterations(run: Path) -> list[int]:
    return [json.loads(line)["iteration"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def _error_line(capsys) -> str:
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, lines
    return lines[0]


def test_fresh_run_refuses_a_used_dir_and_keeps_its_data(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*FLAGS, "--iterations", "2", "--output-dir", str(out)]) == 0
    before = (out / "metrics.jsonl").read_bytes()
    ckpt = latest_checkpoint(out)
    assert main([*FLAGS, "--iterations", "1", "--output-dir", str(out)]) == 2
    line = _error_line(capsys)
    assert "already holds a run" in line and "--overwrite" in line and "--resume" in line
    assert (out / "metrics.jsonl").read_bytes() == before and latest_checkpoint(out) == ckpt

    assert main([*FLAGS, "--iterations", "1", "--output-dir", str(out), "--overwrite"]) == 0
    assert _iterations(out) == [1]  # the old run's records are gone, the new one's are whole
    assert latest_checkpoint(out).name == "iter_000001.pt"  # pruning kept the file just written
    assert sorted(p.name for p in (out / "checkpoints").glob("iter_*.pt")) == ["iter_000001.pt"]
    assert main([*FLAGS, "--iterations", "2", "--output-dir", str(out), "--resume"]) == 0
    assert _iterations(out) == [1, 2]


def test_resume_and_overwrite_together_are_refused(tmp_path, capsys):
    assert main([*FLAGS, "--output-dir", str(tmp_path / "r"), "--resume", "--overwrite"]) == 2
    assert "pass one" in _error_line(capsys)


def test_pruning_never_deletes_the_checkpoint_just_written(tmp_path):
    save_checkpoint(tmp_path, 5, {"history": []})
    path = save_checkpoint(tmp_path, 1, {"history": []})  # an older run left iter 5 behind
    assert path.is_file() and latest_checkpoint(tmp_path) == path
    assert not (tmp_path / "checkpoints" / "iter_000005.pt").exists()


def test_second_process_on_the_same_dir_is_refused_with_the_holders_pid(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from trainers.runs.run_dir import claim_run_dir; "
            f"lock = claim_run_dir({str(tmp_path)!r}, resume=False); print('held', flush=True); time.sleep(60)",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunDirError, match=rf"in use by another run \(pid {holder.pid}\)"):
            claim_run_dir(tmp_path, resume=True)
        proc = subprocess.run(
            [sys.executable, "-m", "trainers.progpo", *FLAGS, "--output-dir", str(tmp_path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2 and f"(pid {holder.pid})" in proc.stderr
        assert "Traceback" not in proc.stderr
    finally:
        holder.kill()
        holder.wait()
    claim_run_dir(tmp_path, resume=True).release()  # the lock died with its holder


def test_resume_with_metrics_deleted_rebuilds_them_from_the_checkpoint(tmp_path):
    out = tmp_path / "run"
    assert main([*FLAGS, "--iterations", "1", "--output-dir", str(out)]) == 0
    (out / "metrics.jsonl").unlink()
    with pytest.warns(UserWarning, match="rebuilt it from the checkpoint's history"):
        assert main([*FLAGS, "--iterations", "2", "--output-dir", str(out), "--resume"]) == 0
    assert _iterations(out) == [1, 2]


@pytest.mark.slow
def test_sigterm_stops_the_run_and_says_how_to_resume(tmp_path):
    from sigterm_run import sigterm_when

    out = tmp_path / "run"
    # iteration 0's checkpoint: the loop runs
    returncode, err = sigterm_when(
        [*FLAGS, "--iterations", "200", "--output-dir", str(out)], out / "checkpoints" / "latest", poll=0.2
    )
    assert returncode == 143, err
    assert "terminated (SIGTERM)" in err and "--resume" in err and "Traceback" not in err


def test_weights_files_round_trip_and_bad_ones_are_one_line(tmp_path):
    """save_weights / load_weights: a warm start shared by several runs (--weights-file)."""
    import torch

    from trainers.runs.checkpoint import CheckpointError, load_weights, save_weights

    a, b = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    path = save_weights(a, tmp_path / "deep" / "er" / "w.pt")  # folders made as needed
    assert path == tmp_path / "deep" / "er" / "w.pt" and path.is_file()
    load_weights(b, path, "linear")
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    with pytest.raises(CheckpointError, match=r"^weights_file .*nope\.pt does not exist$"):
        load_weights(b, tmp_path / "nope.pt")
    other = save_weights(torch.nn.Linear(4, 2), tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match=r"cannot be loaded into model 'linear' \(RuntimeError: "):
        load_weights(b, other, "linear")
    (tmp_path / "bad.pt").write_bytes(b"not a weights file")
    with pytest.raises(CheckpointError, match=r"bad\.pt cannot be loaded into model 'm' \("):
        load_weights(b, tmp_path / "bad.pt", "m")


class _Payload:
    """Unpickling it runs code (writes a file): what a weights file from elsewhere may carry."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (Path(self.marker), "ran"))


def test_a_weights_file_is_loaded_as_tensors_only_onto_the_cpu_and_a_failure_quotes_one_line(tmp_path, monkeypatch):
    """A file whose unpickling would run code is refused without running it; tensors are mapped to
    the CPU whatever device wrote them; the refusal quotes the first line of the cause, at most 150
    characters, or nothing when the cause has no message."""
    import torch

    from trainers.runs.checkpoint import CheckpointError, load_weights

    model = torch.nn.Linear(3, 2)
    marker = tmp_path / "marker"
    torch.save({"weight": _Payload(str(marker)), "bias": torch.zeros(2)}, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError, match=r"evil\.pt cannot be loaded into model 'm' \(UnpicklingError: "):
        load_weights(model, tmp_path / "evil.pt", "m")
    assert not marker.exists()

    path = tmp_path / "w.pt"
    torch.save(model.state_dict(), path)
    seen = {}
    real_load = torch.load

    def load(*args, **kwargs):
        seen.update(kwargs)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", load)
    load_weights(model, path)
    assert seen == {"map_location": "cpu", "weights_only": True}

    for cause, quoted in ((ValueError("x" * 200 + "\nsecond line"), "x" * 150), (KeyError(), "")):

        def refuse(state, cause=cause):
            raise cause

        monkeypatch.setattr(model, "load_state_dict", refuse)
        with pytest.raises(CheckpointError) as info:
            load_weights(model, path)
        assert str(info.value) == (
            f"weights_file {path} cannot be loaded into model '' ({type(cause).__name__}: {quoted})"
        )


def test_overwrite_says_what_it_removes_and_keeps_by_folder(tmp_path):
    from trainers.runs.run_dir import RunManifest, claim_run_dir

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "tensorboard").mkdir()
    manifest = RunManifest.create(run)
    for name in ("metrics.jsonl", "checkpoints/iter_000001.pt", "checkpoints/iter_000002.pt", "checkpoints/latest"):
        (run / name).write_text("x")
        manifest.record(name)
    (run / "checkpoints" / "mine.bin").write_text("a user's file")
    (run / "tensorboard" / "events.other").write_text("another tool's")
    said: list[str] = []
    claim_run_dir(run, resume=False, overwrite=True, say=said.append).release()
    assert said == [
        f"--overwrite: removing the earlier run's files in {run}: checkpoints/ (3 files), metrics.jsonl; "
        "keeping files no run wrote: checkpoints/ (1 file), tensorboard/ (1 file)"
    ]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["mine.bin"]
    assert (run / "tensorboard" / "events.other").exists() and not (run / "metrics.jsonl").exists()


def test_a_run_from_before_manifests_is_recognised_by_its_own_formats(tmp_path):
    from trainers.runs.run_dir import earlier_run_files

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"iteration": 0, "kind": "init"}\n')
    (run / "provenance.jsonl").write_text('{"iteration": 0, "kind": "provenance"}\n')
    (run / "summary.md").write_text("# ProGPO run report: gigpo on rooms\n")
    ours, foreign = earlier_run_files(run)
    assert sorted(p.name for p in ours) == ["metrics.jsonl", "provenance.jsonl", "summary.md"] and foreign == []
    (run / "metrics.jsonl").write_text('{"step": 0}\n')  # JSON, but not a run's record
    (run / "provenance.jsonl").write_text('{"kind": "other"}\n')
    (run / "summary.md").write_text("# My notes\n")
    (run / "config.yaml").write_text("lr: 0.1\n")  # a user's short config
    ours, foreign = earlier_run_files(run)
    assert ours == [] and sorted(p.name for p in foreign) == [
        "config.yaml",
        "metrics.jsonl",
        "provenance.jsonl",
        "summary.md",
    ]


def test_the_formats_that_recognise_an_earlier_run_read_a_bounded_head_and_refuse_what_does_not_parse(tmp_path, capsys):
    """A file is the run's own only when its start parses as the run wrote it: a first line that is
    not JSON, a record line over 1 MiB, a config that is not YAML or not a mapping, or over 1 MiB,
    a PNG whose Matplotlib mark is past its header, are a user's; recognising a flat config from
    before sections prints no deprecation line."""

    import yaml

    from trainers.config import TrainConfig
    from trainers.runs.run_dir import earlier_run_files

    run = tmp_path / "run"
    run.mkdir()
    flat = {k: v for k, v in TrainConfig().to_dict().items() if isinstance(v, (int, float, str, bool))}
    (run / "config.yaml").write_text(yaml.safe_dump(flat))
    (run / "curves.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40 + b"Software: Matplotlib" + b"\0" * 200)
    ours, foreign = earlier_run_files(run)
    assert sorted(p.name for p in ours) == ["config.yaml", "curves.png"] and foreign == []
    assert capsys.readouterr().err == ""  # the flat config read quietly: the user did not write it
    big = '{"iteration": 0, "kind": "init", "notes": "' + "x" * ((3 << 20) // 2) + '"}\n'
    cases = {
        "metrics.jsonl": ["not json\n", big],
        "config.yaml": [
            "lr: [unclosed\n",
            yaml.safe_dump(list(flat)),
            yaml.safe_dump({**flat, "notes": "n" * ((3 << 20) // 2)}),
        ],
        "curves.png": [b"\x89PNG\r\n\x1a\n" + b"\0" * 300 + b"Software: Matplotlib"],
    }
    for name, contents in cases.items():
        for content in contents:
            for other in run.iterdir():
                other.unlink()
            (run / name).write_bytes(content if isinstance(content, bytes) else content.encode())
            ours, foreign = earlier_run_files(run)
            assert ours == [] and [p.name for p in foreign] == [name], (name, str(content)[:40])


def test_an_os_error_on_the_run_dir_is_named_in_one_line(tmp_path, monkeypatch):
    """A read-only file system is named as such; an error without a message by its type."""
    import errno
    from pathlib import Path as P

    def failing(err):
        def mkdir(self, *a, **k):
            raise err

        return mkdir

    for err, reason in (
        (OSError(errno.EROFS, "Read-only"), "read-only file system"),
        (PermissionError(), "PermissionError"),
    ):
        monkeypatch.setattr(P, "mkdir", failing(err))
        with pytest.raises(RunDirError) as info:
            claim_run_dir(tmp_path / "ro" / "run", resume=False)
        assert (
            str(info.value) == f"cannot use output dir {tmp_path / 'ro' / 'run'}: {reason}; pick another --output-dir"
        )


def test_the_latest_pointer_is_read_whatever_its_bytes_and_must_name_a_file_of_its_own_folder(tmp_path):
    from trainers.runs.checkpoint import CheckpointError

    ckpt = tmp_path / "checkpoints"
    with pytest.raises(CheckpointError) as info:
        latest_checkpoint(tmp_path)
    assert str(info.value) == (
        f"no checkpoint to resume in {ckpt} (no 'latest' file); start without --resume "
        "(plus --overwrite where the dir holds an earlier run's files)"
    )
    (ckpt / "sub").mkdir(parents=True)
    (ckpt / "sub" / "iter_000001.pt").write_bytes(b"x")
    (ckpt / "iter_000002.pt").write_bytes(b"x")
    for content, shown in (
        (b"sub/iter_000001.pt\n", "'sub/iter_000001.pt'"),
        (b"\xff\xfe\n", "'\ufffd\ufffd'"),
        (b"\n", "''"),
        (b"iter_000009.pt", "'iter_000009.pt'"),
    ):
        (ckpt / "latest").write_bytes(content)
        with pytest.raises(CheckpointError) as info:
            latest_checkpoint(tmp_path)
        assert str(info.value) == f"{ckpt / 'latest'} names {shown}, which is not a checkpoint file in {ckpt}"
    (ckpt / "latest").write_bytes(b"iter_000002.pt\n")
    assert latest_checkpoint(tmp_path) == ckpt / "iter_000002.pt"


def test_overwrite_removes_the_emptied_run_folders_deepest_first_and_keeps_those_with_others_files(tmp_path):
    from trainers.runs.run_dir import RunManifest

    run = tmp_path / "run"
    run.mkdir()
    manifest = RunManifest.create(run)
    ours = ["metrics.jsonl", "checkpoints/iter_000001.pt", "tensorboard/a/b/events.1", "tensorboard/a/events.2"]
    for name in ours:
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text("x")
    manifest.record(*ours)
    claim_run_dir(run, resume=False, overwrite=True, say=lambda line: None).release()
    # both folders emptied, so gone, nested ones too (the new run's lock and manifest are there)
    assert sorted(p.name for p in run.iterdir()) == [".lock", ".progpo-run.json"]
    manifest = RunManifest.create(run)
    for name in ours:
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text("x")
    manifest.record(*ours)
    (run / "tensorboard" / "a" / "mine.txt").write_text("a user's")
    claim_run_dir(run, resume=False, overwrite=True, say=lambda line: None).release()
    assert sorted(p.relative_to(run).as_posix() for p in run.rglob("*")) == [
        ".lock",
        ".progpo-run.json",
        "tensorboard",
        "tensorboard/a",
        "tensorboard/a/mine.txt",
    ]


def test_overwrite_never_deletes_below_a_linked_folder_at_any_depth(tmp_path):
    from trainers.runs.run_dir import RunManifest

    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "sub").mkdir(parents=True)
    (elsewhere / "sub" / "f").write_text("kept")
    (elsewhere / "g").write_text("kept")
    run = tmp_path / "run"
    (run / "tensorboard").mkdir(parents=True)
    (run / "tensorboard" / "deep").symlink_to(elsewhere, target_is_directory=True)
    (run / "checkpoints").symlink_to(elsewhere, target_is_directory=True)
    RunManifest.create(run).record("tensorboard/deep/sub/f", "checkpoints/sub/f", "tensorboard/deep/g")
    claim_run_dir(run, resume=False, overwrite=True, say=lambda line: None).release()
    assert (elsewhere / "sub" / "f").read_text() == "kept" and (elsewhere / "g").read_text() == "kept"


def test_a_checkpoint_is_loaded_as_tensors_only_onto_the_cpu(tmp_path, monkeypatch):
    import torch

    from trainers.runs.checkpoint import FORMAT, CheckpointError, load_checkpoint

    with pytest.raises(CheckpointError) as info:
        load_checkpoint(tmp_path / "none.pt")
    assert str(info.value) == f"checkpoint {tmp_path / 'none.pt'} does not exist"
    marker = tmp_path / "marker"
    torch.save({"format": FORMAT, "iteration": 1, "x": _Payload(str(marker))}, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError, match=r"evil\.pt is corrupt or unreadable \(UnpicklingError\); delete it"):
        load_checkpoint(tmp_path / "evil.pt")
    assert not marker.exists()
    torch.save({"format": FORMAT, "iteration": 1}, tmp_path / "ok.pt")
    seen = {}
    real_load = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: seen.update(k) or real_load(*a, **k))
    assert load_checkpoint(tmp_path / "ok.pt")["iteration"] == 1
    assert seen == {"map_location": "cpu", "weights_only": True}


def test_a_checksum_file_that_cannot_be_read_or_does_not_match_is_named_with_the_fix(tmp_path):
    import torch

    from trainers.runs.checkpoint import CheckpointError, checksum_path, verify_file

    p = tmp_path / "iter_000001.pt"
    torch.save({"a": torch.zeros(2)}, p)
    sums = checksum_path(p)
    hint = "delete it (and its .sha256) or resume from another run"
    for content in (b"", b"\xff\xfe not hex\n", b"abc123 iter_000001.pt\n"):
        sums.write_bytes(content)
        with pytest.raises(CheckpointError) as info:
            verify_file(p)
        assert str(info.value) == f"checksum file {sums} is unreadable; {hint}"
    sums.write_text("0" * 64 + "  iter_000001.pt\n")
    with pytest.raises(CheckpointError) as info:
        verify_file(p)
    assert str(info.value) == f"checkpoint {p} is corrupt (SHA-256 differs from {sums.name}); {hint}"
    sums.unlink()
    verify_file(p)  # no checksum file: the zip's own CRCs
    p.write_bytes(b"not a zip")
    with pytest.raises(CheckpointError) as info:
        verify_file(p)
    assert str(info.value) == (
        f"checkpoint {p} is corrupt or unreadable (not a valid zip: File is not a zip file); {hint}"
    )


def test_a_trainable_state_that_does_not_fit_says_how(tmp_path):
    import torch

    from trainers.runs.checkpoint import load_trainable_state

    model = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(3)])
    full = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError) as info:  # missing keys alone
        load_trainable_state(model, {"0.weight": full["0.weight"]}, lora=False)
    assert str(info.value) == "5 missing key(s) ['0.bias', '1.bias', '1.weight'], 0 unexpected key(s) []"
    extra = {**full, **{f"x{i}": torch.zeros(1) for i in range(5)}}
    with pytest.raises(ValueError) as info:  # unexpected keys alone
        load_trainable_state(model, extra, lora=False)
    assert str(info.value) == "0 missing key(s) [], 5 unexpected key(s) ['x0', 'x1', 'x2']"
    for value, got in ((torch.zeros(3, 2), "(3, 2)"), ("weights", "str")):
        with pytest.raises(ValueError) as info:
            load_trainable_state(model, {**full, "1.weight": value}, lora=False)
        assert str(info.value) == f"1.weight: expected shape (2, 2), got {got}"


def test_a_gpu_checkpoints_rng_states_are_put_back_on_a_gpu_and_skipped_without_one(monkeypatch):
    import torch

    from trainers.runs.checkpoint import capture_rng, restore_rng

    state = {**capture_rng(), "cuda": ["cuda-state-0"]}
    restored = []
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", restored.append)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    restore_rng(state)
    assert restored == []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    restore_rng(state)
    assert restored == [["cuda-state-0"]]
    restore_rng({k: v for k, v in state.items() if k != "cuda"})  # a CPU checkpoint on a GPU machine
    assert restored == [["cuda-state-0"]]


def test_a_checkpoint_that_cannot_be_used_is_refused_in_one_line_that_names_the_cause(tmp_path, monkeypatch):
    import torch

    from trainers.runs.checkpoint import FORMAT, CheckpointError, load_checkpoint

    def refused(path, **kw):
        with pytest.raises(CheckpointError) as info:
            load_checkpoint(path, **kw)
        return str(info.value)

    p = tmp_path / "c.pt"
    torch.save({"format": FORMAT, "iteration": 0}, p)
    assert load_checkpoint(p)["iteration"] == 0  # the first iteration's checkpoint is valid
    fix = "delete it or resume from another run"
    real_load = torch.load
    for cause, detail in (
        (ValueError("v" * 200 + "\nsecond line"), "ValueError: " + "v" * 120),
        (KeyError(), "KeyError"),
        (__import__("pickle").UnpicklingError("Weights only load failed. Advice..."), "UnpicklingError"),
    ):

        def fail(*a, cause=cause, **k):
            raise cause

        monkeypatch.setattr(torch, "load", fail)
        assert refused(p) == f"checkpoint {p} is corrupt or unreadable ({detail}); {fix}"
    monkeypatch.setattr(torch, "load", real_load)
    for payload, message in (
        ([1, 2], f"{p} is not a {FORMAT} file"),
        ({"format": "other", "iteration": 1}, f"{p} is not a {FORMAT} file"),
        (
            {"format": FORMAT, "iteration": -1},
            f"checkpoint {p} has no valid 'iteration' (got -1); it is damaged or was not written by this trainer",
        ),
        (
            {"format": FORMAT, "iteration": True},
            f"checkpoint {p} has no valid 'iteration' (got True); it is damaged or was not written by this trainer",
        ),
    ):
        torch.save(payload, p)
        assert refused(p) == message
    torch.save({"format": FORMAT, "iteration": 2, "model": {}, "history": [1]}, p)
    assert refused(p, require=("model", "optimizer")) == (
        f"checkpoint {p} has no valid 'optimizer' (a dict is needed, got nothing); it is damaged or was not written by "
        "this trainer"
    )
    assert refused(p, require=("history",)) == f"checkpoint {p}: 'history' must be a list of records (dicts)"
    torch.save({"format": FORMAT, "iteration": 2, "model": [1]}, p)
    assert refused(p, require=("model",)) == (
        f"checkpoint {p} has no valid 'model' (a dict is needed, got list); it is damaged or was not written by this "
        "trainer"
    )


def test_a_fresh_run_refuses_a_dir_in_its_way_in_one_line_that_says_what_to_do(tmp_path, monkeypatch):
    import errno

    from trainers.runs.checkpoint import FORMAT, load_checkpoint

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("my own notes\n")
    (run / "provenance.jsonl").write_text('{"iteration": 0, "kind": "train"}\n')  # a record, but not a provenance one
    with pytest.raises(RunDirError) as info:
        claim_run_dir(run, resume=False, overwrite=True)
    assert str(info.value) == (
        f"output dir {run} holds metrics.jsonl, provenance.jsonl, which no run of this trainer "
        "wrote and a run would replace; move it or pick another --output-dir"
    )
    (run / "provenance.jsonl").unlink()
    (run / "metrics.jsonl").write_text('{"iteration": 0, "kind": "init"}\n')
    with pytest.raises(RunDirError) as info:
        claim_run_dir(run, resume=False)
    assert str(info.value) == (
        f"output dir {run} already holds a run (metrics.jsonl); pass --overwrite to replace it, "
        "--resume to continue it, or pick another --output-dir"
    )

    def denied(self, missing_ok=False):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(type(run), "unlink", denied)
    with pytest.raises(RunDirError) as info:
        claim_run_dir(run, resume=False, overwrite=True, say=lambda line: None)
    assert str(info.value) == f"cannot use output dir {run}: Permission denied; pick another --output-dir"
    monkeypatch.undo()
    import torch

    torch.save({"format": FORMAT, "iteration": 1, "notes": 5}, tmp_path / "c.pt")  # an entry outside the known ones
    assert load_checkpoint(tmp_path / "c.pt", require=("notes",))["notes"] == 5


def test_an_earlier_runs_plot_checkpoints_and_unreadable_files_by_their_formats(tmp_path, monkeypatch):
    """Without a manifest: a plot is a PNG with Matplotlib's mark in its first 200 bytes, a text
    file that names Matplotlib is not; checkpoints by their names; a file that cannot be read is
    left to the user, and the files after it are still looked at."""
    from trainers.runs.run_dir import earlier_run_files

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "iter_000001.pt").write_bytes(b"x")
    (run / "checkpoints" / "notes.txt").write_text("mine")
    mark = b"Matplotlib"
    (run / "curves.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * (200 - 8 - len(mark)) + mark)  # ends at byte 200
    (run / "summary.md").write_text("# ProGPO run report: gigpo on rooms\n")
    ours, foreign = earlier_run_files(run)
    assert sorted(p.relative_to(run).as_posix() for p in ours) == [
        "checkpoints/iter_000001.pt",
        "curves.png",
        "summary.md",
    ]
    (run / "curves.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * (201 - 8 - len(mark)) + mark)  # one byte later
    assert "curves.png" not in [p.name for p in earlier_run_files(run)[0]]
    (run / "curves.png").write_bytes(b"a plot I made with Matplotlib")
    assert "curves.png" not in [p.name for p in earlier_run_files(run)[0]]
    (run / "curves.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40 + mark)
    real_open = type(run).open

    def unreadable(self, *a, **k):
        if self.name == "summary.md":
            raise PermissionError(13, "Permission denied")
        return real_open(self, *a, **k)

    monkeypatch.setattr(type(run), "open", unreadable)
    ours, foreign = earlier_run_files(run)
    assert sorted(p.name for p in ours) == ["curves.png", "iter_000001.pt"] and [p.name for p in foreign] == [
        "summary.md"
    ]


def test_a_gpu_machines_rng_states_are_captured(monkeypatch):
    import torch

    from trainers.runs.checkpoint import capture_rng

    assert "cuda" not in capture_rng()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: ["cuda-state-0"])
    assert capture_rng()["cuda"] == ["cuda-state-0"]


def test_the_files_of_a_checkpoint_and_a_failed_write_in_one_line(tmp_path, monkeypatch):
    """checkpoint_files names what save_checkpoint writes; a write that fails names the cause: the
    OS's words, or the first line of torch's zip writer's (which reports a full disk as a
    RuntimeError), or of an OSError without words."""
    import errno

    import torch

    from trainers.runs.checkpoint import CheckpointError, checkpoint_files, save_checkpoint

    ckpt = tmp_path / "checkpoints"
    assert checkpoint_files(tmp_path, 3) == (ckpt / "iter_000003.pt", ckpt / "iter_000003.pt.sha256", ckpt / "latest")
    save_checkpoint(tmp_path, 3, {"x": 1})
    assert all(p.is_file() for p in checkpoint_files(tmp_path, 3))
    tail = "; is the disk full?); the partial file was removed and the previous checkpoint is kept"
    for cause, reason in (
        (OSError(errno.ENOSPC, "No space left on device"), "No space left on device"),
        (
            RuntimeError("PytorchStreamWriter failed writing file data/0\nmore"),
            "PytorchStreamWriter failed writing file data/0",
        ),
        (OSError("q" * 130 + "\ndetails"), "q" * 120),
    ):

        def fail(*a, cause=cause, **k):
            raise cause

        monkeypatch.setattr(torch, "save", fail)
        with pytest.raises(CheckpointError) as info:
            save_checkpoint(tmp_path, 4, {"x": 1})
        assert str(info.value) == f"cannot write checkpoint {ckpt / 'iter_000004.pt'} ({reason}{tail}"
        assert sorted(p.name for p in ckpt.iterdir()) == ["iter_000003.pt", "iter_000003.pt.sha256", "latest"]


def test_a_failed_atomic_write_leaves_no_temp_file_and_raises_its_own_error(tmp_path, monkeypatch):
    from trainers.runs import run_files
    from trainers.runs.run_files import write_atomic

    target = tmp_path / "manifest.json"
    target.write_text("before")
    with pytest.raises(TypeError):
        write_atomic(target, 12345)  # the write fails after the temp file was made
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"] and target.read_text() == "before"

    def refuse(path):
        raise RuntimeError("no temp file made")

    monkeypatch.setattr(run_files, "create_fresh", refuse)
    with pytest.raises(RuntimeError, match="no temp file made"):  # not a FileNotFoundError about the missing temp file
        write_atomic(target, "after")
    assert target.read_text() == "before"


@pytest.mark.parametrize("keep_last, kept", [(0, [1, 2, 3, 4]), (1, [4]), (2, [3, 4]), (5, [1, 2, 3, 4])])
def test_save_checkpoint_keeps_the_newest_keep_last_and_prunes_one_without_a_checksum(tmp_path, keep_last, kept):
    """keep_last 0 keeps every checkpoint; an old one written without a checksum file is pruned all the same."""
    ckpt = tmp_path / "checkpoints"
    for it in (1, 2, 3):
        save_checkpoint(tmp_path, it, {}, keep_last=0)
    (ckpt / "iter_000001.pt.sha256").unlink()
    save_checkpoint(tmp_path, 4, {}, keep_last=keep_last)
    assert sorted(p.name for p in ckpt.glob("iter_*.pt")) == [f"iter_{i:06d}.pt" for i in kept]
    assert sorted(p.name for p in ckpt.glob("*.sha256")) == [f"iter_{i:06d}.pt.sha256" for i in kept if i != 1]


def test_pruning_takes_only_the_runs_numbered_checkpoints(tmp_path):
    save_checkpoint(tmp_path, 1, {})
    ckpt = tmp_path / "checkpoints"
    mine = [ckpt / "iter_best.pt", ckpt / "iter_000001.pt.bak"]  # a user's copies beside the run's files
    for f in mine:
        f.write_bytes(b"kept by hand")
    save_checkpoint(tmp_path, 2, {}, keep_last=1)
    assert all(f.read_bytes() == b"kept by hand" for f in mine) and not (ckpt / "iter_000001.pt").exists()


def test_a_crash_between_the_checkpoint_and_its_checksum_leaves_no_stale_checksum(tmp_path, monkeypatch):
    """Saving an iteration again (a resume that redoes it) removes the old checksum before the new
    file lands, so a crash in between leaves a file the zip CRCs check, not a false 'corrupt'."""
    import os

    from trainers.runs import checkpoint
    from trainers.runs.checkpoint import checksum_path, load_checkpoint, verify_file

    path = save_checkpoint(tmp_path, 3, {"history": [{"iteration": 1}]})
    real_replace = os.replace

    def crash_at_the_checksum(src, dst):
        if str(dst).endswith(".sha256"):
            raise KeyboardInterrupt  # killed between the two renames
        real_replace(src, dst)

    monkeypatch.setattr(checkpoint.os, "replace", crash_at_the_checksum)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path, 3, {"history": [{"iteration": 1}, {"iteration": 2}]})
    monkeypatch.setattr(checkpoint.os, "replace", real_replace)
    assert not checksum_path(path).exists()
    verify_file(path)
    assert len(load_checkpoint(path)["history"]) == 2


def test_a_checksum_written_in_upper_case_hex_is_read(tmp_path):
    from trainers.runs.checkpoint import checksum_path, verify_file

    path = save_checkpoint(tmp_path, 1, {})
    sums = checksum_path(path)
    digest, name = sums.read_text().split()
    sums.write_text(f"{digest.upper()}  {name}\n")  # as some tools print it
    verify_file(path)


def test_a_run_folder_that_is_a_file_or_a_link_is_refused_word_for_word(tmp_path):
    from trainers.runs.run_files import LinkedPathError, real_dir

    (tmp_path / "afile").write_text("x")
    with pytest.raises(LinkedPathError) as info:
        real_dir(tmp_path / "afile")
    assert str(info.value) == (
        f"{tmp_path / 'afile'}: is not a folder, which a run never writes through (it could "
        "point outside the run dir); remove it and run again"
    )
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(LinkedPathError) as info:
        real_dir(tmp_path / "link")
    assert str(info.value) == (
        f"{tmp_path / 'link'}: is a symbolic link, which a run never writes through (it could "
        "point outside the run dir); remove it and run again (to keep a run's files on another "
        "disk, give that disk's path, or a link to it, as --output-dir)"
    )
    assert real_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b" and (tmp_path / "a" / "b").is_dir()


def test_a_file_where_the_checkpoints_folder_goes_is_one_line_before_any_training(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoints").write_text("a file")
    rc = main(
        [
            *(
                "--env rooms --model tiny --iterations 1 --num-groups 2 --group-size 2 --max-steps 2 "
                "--eval-episodes 0 --output-dir"
            ).split(),
            str(run),
            *"--no-progress-bars --no-tensorboard --no-baseline-random".split(),
        ]
    )
    err = capsys.readouterr().err
    assert rc != 0 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"error: {run / 'checkpoints'}: is not a folder, which a run never writes "
        "through (it could point outside the run dir); remove it and run again"
    )
    assert not (run / "metrics.jsonl").exists() and (run / "checkpoints").read_text() == "a file"


def test_a_config_that_sets_a_field_twice_is_a_users_not_a_runs(tmp_path):

    import yaml

    from trainers.config import TrainConfig
    from trainers.runs.run_dir import earlier_run_files

    run = tmp_path / "run"
    run.mkdir()
    flat = {k: v for k, v in TrainConfig().to_dict().items() if isinstance(v, (int, float, str, bool))}
    (run / "config.yaml").write_text(yaml.safe_dump({**flat, "ppo": {"lr": 0.5}}))  # lr at the top and in its section
    assert earlier_run_files(run) == ([], [run / "config.yaml"])


def test_the_run_dir_lock_names_its_holder_frees_on_release_and_says_why_it_cannot_be_taken(tmp_path, monkeypatch):
    import errno
    import fcntl
    import os

    import trainers.runs.run_dir as run_dir
    from trainers.runs.run_dir import RunDirLock

    run = tmp_path / "run"
    run.mkdir()

    def refused() -> str:
        with pytest.raises(RunDirError) as info:
            RunDirLock(run)
        return str(info.value)

    first = RunDirLock(run)
    assert refused() == (
        f"output dir {run} is in use by another run (pid {os.getpid()}); wait for it to finish "
        "or pick another --output-dir"
    )
    first.release()
    first.release()  # twice is harmless
    RunDirLock(run).release()  # free again
    (run / ".lock").write_text("")
    with open(run / ".lock") as held:  # a holder that has not written its pid yet
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(RunDirError, match=r"in use by another run \(pid unknown\)"):
            RunDirLock(run)
    fix = "pick another --output-dir"

    def flock_fails(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", flock_fails)
    assert refused() == f"cannot use output dir {run}: No locks available; {fix}"
    monkeypatch.undo()

    def open_fails(path, mode):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(run_dir, "open_nofollow", open_fails)
    assert refused() == f"cannot use output dir {run}: Permission denied; {fix}"
    from trainers.runs.run_files import open_nofollow as real_open

    class FullDisk:
        def __init__(self, fh):
            self.fh = fh

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def truncate(self, *a):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(run_dir, "open_nofollow", lambda path, mode: FullDisk(real_open(path, mode)))
    assert refused() == f"cannot use output dir {run}: No space left on device; {fix}"
    monkeypatch.undo()
    RunDirLock(run).release()  # the failed attempt closed its handle: the lock is free
