"""A run touches only its own files: a checkpoint of one run never resumes into another's dir,
``--overwrite`` removes only what a run wrote (and says so), unusable output dirs and a full disk
end in one ``error:`` line, and the advice after a stop works."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from trainers.cli.train import main
from trainers.runs.checkpoint import CheckpointError, latest_checkpoint, load_checkpoint, save_checkpoint
from trainers.runs.run_dir import MANIFEST_NAME, RunManifest

ROOT = Path(__file__).resolve().parents[2]
FLAGS = (
    "--env rooms --model tiny --num-groups 1 --group-size 2 --max-steps 3 --eval-episodes 0 "
    "--no-progress-bars --no-tensorboard --warm-start none --torch-threads 1 --no-baseline-random"
).split()


def _error_line(capsys) -> str:
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, lines
    return lines[0]


def _snapshot(run: Path) -> dict[str, str]:
    """Every file of ``run`` (but the lock) and its SHA-256."""
    return {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> tuple[Path, Path]:
    """Run A (seed 0, 2 iterations) and run B (seed 1, 1 iteration), each in its own dir."""
    base = tmp_path_factory.mktemp("runs")
    a, b = base / "a", base / "b"
    assert main([*FLAGS, "--iterations", "2", "--output-dir", str(a)]) == 0
    assert main([*FLAGS, "--iterations", "1", "--seed", "1", "--output-dir", str(b)]) == 0
    return a, b


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_a_checkpoint_of_another_run_is_refused_and_nothing_changes(two_runs, tmp_path, capsys):
    a, b = (_copy(p, tmp_path / p.name) for p in two_runs)
    before = _snapshot(b)
    ckpt = a / "checkpoints" / "iter_000002.pt"
    # the same flags as run A (its config), only the output dir is run B's
    assert main([*FLAGS, "--iterations", "3", "--output-dir", str(b), "--resume", str(ckpt)]) == 2
    line = _error_line(capsys)
    assert "belongs to another run" in line and "run id" in line
    assert _snapshot(b) == before


def test_without_run_ids_the_config_and_history_decide(two_runs, tmp_path, capsys):
    a, b = (_copy(p, tmp_path / p.name) for p in two_runs)
    (b / MANIFEST_NAME).unlink()  # a run dir written before manifests
    before = _snapshot(b)
    assert (
        main(
            [*FLAGS, "--iterations", "3", "--output-dir", str(b), "--resume", str(a / "checkpoints" / "iter_000002.pt")]
        )
        == 2
    )
    assert "belongs to another run" in _error_line(capsys)
    assert _snapshot(b) == before


def test_a_checkpoint_continues_in_its_own_dir_and_in_an_empty_one(two_runs, tmp_path):
    a = _copy(two_runs[0], tmp_path / "a")
    ckpt = a / "checkpoints" / "iter_000002.pt"
    run_id = load_checkpoint(ckpt)["run_id"]
    assert run_id == RunManifest.load(a).run_id
    kept = tmp_path / "iter_000002.pt"
    kept.write_bytes(ckpt.read_bytes())  # the resumed run prunes it
    assert main([*FLAGS, "--iterations", "3", "--output-dir", str(a), "--resume", str(ckpt)]) == 0
    fork, ckpt = tmp_path / "fork", kept
    assert main([*FLAGS, "--iterations", "3", "--output-dir", str(fork), "--resume", str(ckpt)]) == 0
    assert RunManifest.load(fork).run_id == run_id  # the same run, continued elsewhere


def test_overwrite_removes_only_the_run_files_and_says_so(two_runs, tmp_path, capsys):
    run = _copy(two_runs[1], tmp_path / "b")
    (run / "checkpoints" / "my_model.bin").write_bytes(b"user weights")
    (run / "tensorboard").mkdir()
    (run / "tensorboard" / "events.out.tfevents.123.other-tool").write_bytes(b"other tool")
    (run / "notes.txt").write_text("mine")
    assert main([*FLAGS, "--iterations", "1", "--output-dir", str(run), "--overwrite"]) == 0
    said = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("--overwrite:")]
    assert len(said) == 1 and "metrics.jsonl" in said[0] and "checkpoints/ (" in said[0]
    assert "keeping files no run wrote" in said[0] and "my_model.bin" not in said[0].split("keeping")[0]
    assert (run / "checkpoints" / "my_model.bin").read_bytes() == b"user weights"
    assert (run / "tensorboard" / "events.out.tfevents.123.other-tool").read_bytes() == b"other tool"
    assert (run / "notes.txt").read_text() == "mine"
    assert latest_checkpoint(run).name == "iter_000001.pt"


def test_overwrite_of_a_run_from_before_manifests_goes_by_the_run_names(two_runs, tmp_path):
    run = _copy(two_runs[1], tmp_path / "b")
    (run / MANIFEST_NAME).unlink()
    (run / "checkpoints" / "iter_best.pt").write_bytes(b"user file named like a checkpoint")
    assert main([*FLAGS, "--iterations", "1", "--output-dir", str(run), "--overwrite"]) == 0
    assert (run / "checkpoints" / "iter_best.pt").read_bytes() == b"user file named like a checkpoint"
    assert sorted(p.name for p in (run / "checkpoints").glob("iter_0*.pt")) == ["iter_000001.pt"]


@pytest.mark.parametrize("name", ["config.yaml", "summary.md"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_a_users_file_is_never_replaced(tmp_path, capsys, name, overwrite):
    run = tmp_path / "run"
    run.mkdir()
    (run / name).write_text("estimator: grpo\n")  # e.g. the config the user passes with --config
    assert main([*FLAGS, "--iterations", "1", "--output-dir", str(run), *(["--overwrite"] * overwrite)]) == 2
    assert "no run of this trainer wrote" in _error_line(capsys)
    assert (run / name).read_text() == "estimator: grpo\n"
    assert sorted(p.name for p in run.iterdir()) == [".lock", name]


def _read_only_dir(tmp_path: Path) -> Path:
    ro = tmp_path / "ro"
    ro.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip("cannot mount a read-only tmpfs here")
    return ro


@pytest.mark.parametrize("case", ["dangling symlink", "under a file", "read-only mount", "sysfs"])
def test_unusable_output_dir_is_one_line(tmp_path, capsys, case):
    if case == "dangling symlink":
        out = tmp_path / "link"
        out.symlink_to(tmp_path / "missing")
        expect = "does not exist"
    elif case == "under a file":
        (tmp_path / "file").write_text("x")
        out, expect = tmp_path / "file" / "run", "not a directory"
    elif case == "read-only mount":
        out, expect = _read_only_dir(tmp_path) / "run", "read-only file system"
    else:
        if not Path("/sys/kernel").is_dir():
            pytest.skip("no /sys")
        out, expect = Path("/sys/kernel/progpo-run"), "cannot use output dir"
    try:
        assert main([*FLAGS, "--iterations", "1", "--output-dir", str(out)]) == 2
        line = _error_line(capsys)
        assert expect in line.lower() and str(out) in line
    finally:
        if case == "read-only mount":
            subprocess.run(["umount", str(out.parent)], check=False)


@pytest.fixture()
def full_disk_at_iteration_2(monkeypatch):
    """Every write of iteration 2's checkpoint fails with ENOSPC (its temp file is created, then
    written through /dev/full), as on a disk that fills up part-way."""
    import trainers.runs.checkpoint as checkpoint

    real = checkpoint.create_fresh

    def create_fresh(path):
        fh = real(path)
        if Path(path).name == "iter_000002.pt.tmp":
            fh.close()
            return open("/dev/full", "wb")  # closed by the caller's with
        return fh

    monkeypatch.setattr(checkpoint, "create_fresh", create_fresh)


def test_full_disk_during_a_checkpoint_write_keeps_the_previous_one(tmp_path, full_disk_at_iteration_2):
    first = save_checkpoint(tmp_path, 1, {"history": []})
    with pytest.raises(CheckpointError, match="disk full"):
        save_checkpoint(tmp_path, 2, {"history": []})
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "iter_000001.pt",
        "iter_000001.pt.sha256",
        "latest",
    ]
    assert latest_checkpoint(tmp_path) == first and load_checkpoint(first)["iteration"] == 1


def test_full_disk_during_a_run_is_one_line_and_the_run_resumes(
    tmp_path, capsys, full_disk_at_iteration_2, monkeypatch
):
    run = tmp_path / "run"
    assert main([*FLAGS, "--iterations", "3", "--output-dir", str(run)]) == 2
    line = _error_line(capsys)
    assert "cannot write checkpoint" in line and "disk full" in line
    assert not (run / "checkpoints" / "iter_000002.pt.tmp").exists()
    assert latest_checkpoint(run).name == "iter_000001.pt"
    monkeypatch.undo()  # space freed
    assert main([*FLAGS, "--iterations", "3", "--output-dir", str(run), "--resume"]) == 0


@pytest.mark.slow
def test_sigterm_before_the_first_checkpoint_gives_advice_that_works(tmp_path):
    run = tmp_path / "run"
    slow_start = [
        *FLAGS[: FLAGS.index("--eval-episodes")],
        *FLAGS[FLAGS.index("--eval-episodes") + 2 :],
        *"--eval-episodes 2000 --iterations 1 --output-dir".split(),
        str(run),
    ]
    from sigterm_run import sigterm_when

    # the run started; its first evaluation is long
    returncode, err = sigterm_when(slow_start, run / "config.yaml", poll=0.1)
    assert returncode == 143 and not (run / "checkpoints" / "latest").exists(), err
    assert "before the first checkpoint" in err and "--overwrite" in err and "--resume" not in err
    advised = [a if a != "2000" else "2" for a in slow_start] + ["--overwrite"]
    assert main(advised) == 0


@pytest.mark.parametrize(
    "env, flag, split",
    [
        ("alfworld", "--train-split", "valid_unseen"),
        ("alfworld", "--eval-extra-split", "nope"),
        ("rooms", "--eval-split", "hard"),
        ("webshop", "--eval-split", "dev"),
    ],
)
def test_unknown_split_is_one_line_before_the_run_writes_anything(tmp_path, capsys, env, flag, split):
    run = tmp_path / "run"
    argv = [*FLAGS[FLAGS.index("--model") :], "--env", env, "--iterations", "1", flag, split, "--output-dir", str(run)]
    assert main(argv) == 2
    line = _error_line(capsys)
    assert repr(split) in line and "split" in line
    assert RunManifest.load(run).files == set()  # nothing of a run: a corrected rerun needs no --overwrite
    assert main([*argv[: argv.index(flag)], *argv[argv.index(flag) + 2 :]]) in (0, 2)  # not refused for the dir
    assert "already holds a run" not in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("sig, code, said", [("SIGTERM", 143, "terminated (SIGTERM)"), ("SIGINT", 130, "interrupted")])
def test_a_stop_signal_swallowed_by_a_finalizer_still_stops_the_run(tmp_path, monkeypatch, capsys, sig, code, said):
    """A handler's exception raised inside ``__del__`` is printed and dropped by the interpreter
    (multiprocessing's finalizers and weakref callbacks run all through a run); the run must stop
    anyway, at its next loop step, with the usual advice. Python's own Ctrl-C handler keeps no
    record: a Ctrl-C landing there used to be lost, and the run went on."""
    import signal

    from trainers import stop_request
    from trainers.loop.trainer import Trainer

    signum = getattr(signal, sig)
    before = signal.getsignal(signum)

    class Finalizer:
        def __del__(self):
            signal.raise_signal(signum)

    played: list[int] = []
    original = Trainer.train_iteration

    def iteration_then_signal(self, it):
        rec = original(self, it)
        played.append(it)
        Finalizer()  # collected at once: "Exception ignored in ..."
        return rec

    monkeypatch.setattr(Trainer, "train_iteration", iteration_then_signal)
    run = tmp_path / "run"
    assert main([*FLAGS, "--iterations", "3", "--output-dir", str(run)]) == code
    err = capsys.readouterr().err
    assert played == [1] and said in err and "--resume" in err, err
    stop_request.raise_if_requested()  # main forgot the stop: the next run in this process is not stopped
    assert signal.getsignal(signum) is before  # and the handler is the one it found


def test_a_checkpoint_written_before_the_renames_resumes(tmp_path, capsys):
    """A run checkpointed with the old field names (init, progress, extra, ...) resumes under the new ones."""
    import yaml

    from trainers.config import RENAMED

    run = tmp_path / "run"
    assert main([*FLAGS, "--iterations", "2", "--save-every", "1", "--output-dir", str(run)]) == 0
    back = {new: old for old, new in RENAMED.items()}
    ckpt = latest_checkpoint(run)
    data = load_checkpoint(ckpt)
    data["config"] = {back.get(k, k): v for k, v in data["config"].items()}  # as an earlier release wrote it
    assert save_checkpoint(run, data.pop("iteration"), {k: v for k, v in data.items() if k != "format"}) == ckpt
    assert "init" in load_checkpoint(ckpt)["config"] and "warm_start" not in load_checkpoint(ckpt)["config"]
    config = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({back.get(k, k): v for k, v in config.items()}, sort_keys=False))
    capsys.readouterr()
    assert main([*FLAGS, "--iterations", "3", "--output-dir", str(run), "--resume"]) == 0, capsys.readouterr().err
