"""Verified checkpoints, strict state-dict loading, config validation, env step timeouts
and worker-restart metrics in the trainer. Every failure ends in one ``error:`` line, exit 2."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import zipfile
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from fake_policy import FakeScoringPolicy
from tiny_config import config_for_tests

from trainers.cli.train import main
from trainers.config import TrainConfig
from trainers.config_flags import parse_args
from trainers.loop.trainer import Trainer
from trainers.runs.checkpoint import CheckpointError, checksum_path, load_checkpoint, save_checkpoint

RUN_FLAGS = (
    "--env rooms --model tiny --lora --num-groups 1 --group-size 2 --max-steps 3 --eval-episodes 0 "
    "--no-progress-bars --no-tensorboard --warm-start none --torch-threads 1"
).split()


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    lines = [
        ln for ln in err.splitlines() if not ln.lstrip().startswith(("warnings.warn", "/")) and "Warning" not in ln
    ]
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    return lines[0]


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory) -> Path:
    """A one-iteration LoRA run of the tiny model, made through the CLI (its checkpoint is real)."""
    out = tmp_path_factory.mktemp("run") / "run"
    assert main([*RUN_FLAGS, "--iterations", "1", "--output-dir", str(out)]) == 0
    return out


def _copy(run: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(run, dst)
    return dst


def _resume(run: Path) -> int:
    return main([*RUN_FLAGS, "--iterations", "2", "--output-dir", str(run), "--resume"])


def _flip_tensor_bytes(path: Path, n: int = 512) -> None:
    """Flip ``n`` bytes in the middle of the largest tensor record of a torch zip checkpoint."""
    with zipfile.ZipFile(path) as z:
        info = max((i for i in z.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    raw = bytearray(path.read_bytes())
    name_len = int.from_bytes(raw[info.header_offset + 26 : info.header_offset + 28], "little")
    extra_len = int.from_bytes(raw[info.header_offset + 28 : info.header_offset + 30], "little")
    start = info.header_offset + 30 + name_len + extra_len + info.file_size // 4
    n = min(n, info.file_size // 2)
    for k in range(start, start + n):
        raw[k] ^= 0xFF
    path.write_bytes(bytes(raw))


# ----------------------------------------------------------------------------- checkpoints
def test_flipped_tensor_bytes_are_caught_by_checksum_and_by_zip_crc(tmp_path):
    ckpt = save_checkpoint(tmp_path, 1, {"model": {"w": torch.arange(4096, dtype=torch.float32)}})
    assert checksum_path(ckpt).is_file()
    _flip_tensor_bytes(ckpt)
    # torch.load alone accepts the damage: this is why the checks exist
    damaged = torch.load(ckpt, weights_only=True)["model"]["w"]
    assert not torch.equal(damaged, torch.arange(4096, dtype=torch.float32))
    with pytest.raises(CheckpointError, match="corrupt.*SHA-256"):
        load_checkpoint(ckpt)
    checksum_path(ckpt).unlink()  # a checkpoint from before checksums: the zip CRCs still catch it
    with pytest.raises(CheckpointError, match="corrupt.*CRC"):
        load_checkpoint(ckpt)


class _SignalMidWrite:
    """A file whose third write sends this process ``sig``: the signal lands inside torch's zip writer."""

    def __init__(self, fh, sig):
        self.fh, self.sig, self.writes = fh, sig, 0

    def write(self, data):
        self.writes += 1
        if self.writes == 3:
            signal.raise_signal(self.sig)
        return self.fh.write(data)

    def __getattr__(self, name):
        return getattr(self.fh, name)


@pytest.mark.parametrize("sig, kind", [(signal.SIGTERM, "Terminated"), (signal.SIGINT, "KeyboardInterrupt")])
def test_a_stop_that_comes_while_a_checkpoint_is_written_lands_after_it(tmp_path, monkeypatch, sig, kind):
    """Unheld, the handler's exception inside torch's writer became "unexpected pos": the checkpoint
    was lost and the stop read as a full disk. Held, the checkpoint completes and the stop follows."""
    from trainers import stop_request
    from trainers.runs.checkpoint import latest_checkpoint

    real_save = torch.save
    monkeypatch.setattr(torch, "save", lambda obj, fh: real_save(obj, _SignalMidWrite(fh, sig)))
    with stop_request.stops_recorded(), pytest.raises(KeyboardInterrupt) as stopped:  # the run's own handlers
        save_checkpoint(tmp_path, 4, {"model": {"w": torch.arange(4096, dtype=torch.float32)}})
    assert type(stopped.value).__name__ == kind
    ckpt = latest_checkpoint(tmp_path)
    assert ckpt.name == "iter_000004.pt" and load_checkpoint(ckpt)["model"]["w"][-1] == 4095
    assert sorted(p.name for p in ckpt.parent.iterdir()) == ["iter_000004.pt", "iter_000004.pt.sha256", "latest"]


def test_intact_checkpoint_without_checksum_file_still_loads(tmp_path):
    ckpt = save_checkpoint(tmp_path, 2, {"model": {"w": torch.ones(3)}})
    checksum_path(ckpt).unlink()
    assert load_checkpoint(ckpt)["iteration"] == 2


def test_corrupt_checkpoint_is_a_one_line_cli_error(lora_run, tmp_path, capsys):
    run = _copy(lora_run, tmp_path)
    _flip_tensor_bytes(run / "checkpoints" / "iter_000001.pt")
    assert _resume(run) == 2
    assert "corrupt" in _one_line_error(capsys)


@pytest.mark.parametrize(
    "damage, match",
    [
        (lambda d: d.pop("iteration"), "no valid 'iteration'"),
        (lambda d: d.pop("history"), "no valid 'history'"),
        (lambda d: d.update(history="x"), "no valid 'history'"),
        (lambda d: d.update(model={"foo": torch.zeros(2)}), "does not match.*missing key"),
    ],
)
def test_incomplete_or_foreign_checkpoint_is_a_one_line_cli_error(lora_run, tmp_path, capsys, damage, match):
    run = _copy(lora_run, tmp_path)
    ckpt = run / "checkpoints" / "iter_000001.pt"
    data = torch.load(ckpt, weights_only=True)
    damage(data)
    # rewritten properly (fresh checksum): only the content is wrong
    payload = {k: v for k, v in data.items() if k not in ("format", "iteration")}
    tmp = ckpt.with_suffix(".pt.tmp")
    torch.save(
        {"format": data["format"], **({"iteration": data["iteration"]} if "iteration" in data else {}), **payload}, tmp
    )
    os.replace(tmp, ckpt)
    checksum_path(ckpt).unlink()
    assert _resume(run) == 2
    import re

    assert re.search(match, _one_line_error(capsys))


def test_lora_state_with_wrong_shape_is_rejected(lora_run, tmp_path, capsys):
    run = _copy(lora_run, tmp_path)
    ckpt = run / "checkpoints" / "iter_000001.pt"
    data = torch.load(ckpt, weights_only=True)
    key = next(iter(data["model"]))
    data["model"][key] = torch.zeros(1)
    save_checkpoint(run, 1, {k: v for k, v in data.items() if k not in ("format", "iteration")})
    assert _resume(run) == 2
    assert "expected shape" in _one_line_error(capsys)


def _records(run: Path) -> list[tuple]:
    import json

    return [
        (r.get("kind"), r.get("iteration")) for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
    ]


@pytest.fixture(scope="module")
def two_iteration_run(tmp_path_factory) -> Path:
    """A two-iteration run evaluated after each iteration: eval0 train1 eval1 train2 eval2."""
    out = tmp_path_factory.mktemp("run2") / "run"
    assert (
        main(
            [
                *RUN_FLAGS,
                *"--iterations 2 --eval-episodes 2 --eval-every 1 --no-baseline-random --output-dir".split(),
                str(out),
            ]
        )
        == 0
    )
    return out


@pytest.mark.parametrize("damage", ["garbled", "not a record", "torn last"])
def test_resume_rebuilds_a_damaged_metrics_file_from_the_checkpoint_and_keeps_the_damaged_copy(
    two_iteration_run, tmp_path, damage
):
    run = _copy(two_iteration_run, tmp_path)
    whole = _records(run)
    assert whole[:5] == [("eval", 0), ("train", 1), ("eval", 1), ("train", 2), ("eval", 2)]
    lines = (run / "metrics.jsonl").read_text().splitlines(keepends=True)
    if damage == "garbled":
        lines[1] = "{not json at all\n"
    elif damage == "not a record":
        lines[1] = "[1, 2]\n"
    else:
        lines[-1] = lines[-1][: len(lines[-1]) // 2]  # a torn last line whose record the checkpoint holds
    found = "".join(lines)
    (run / "metrics.jsonl").write_text(found)
    with pytest.warns(UserWarning, match="rebuilt its .* records up to iteration 2 from the checkpoint's history"):
        assert (
            main(
                [
                    *RUN_FLAGS,
                    *"--iterations 3 --eval-episodes 2 --eval-every 1 --no-baseline-random --output-dir".split(),
                    str(run),
                    "--resume",
                ]
            )
            == 0
        )
    assert _records(run) == whole + [("train", 3), ("eval", 3)]  # nothing dropped, nothing twice
    assert (run / "metrics.jsonl.damaged").read_text() == found


def test_resume_with_metrics_jsonl_a_directory_is_one_line(lora_run, tmp_path, capsys):
    run = _copy(lora_run, tmp_path)
    (run / "metrics.jsonl").unlink()
    (run / "metrics.jsonl").mkdir()
    assert _resume(run) == 2
    assert "metrics.jsonl is not a regular file" in _one_line_error(capsys)


def test_intact_lora_run_resumes(lora_run, tmp_path):
    import warnings

    run = _copy(lora_run, tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _resume(run) == 0
    assert not [w for w in caught if "rebuilt" in str(w.message)]  # an intact metrics.jsonl is kept as it is
    assert not (run / "metrics.jsonl.damaged").exists()
    assert load_checkpoint(run / "checkpoints" / "iter_000002.pt")["iteration"] == 2


# ----------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    "text, match",
    [
        ("1: 2\n", "keys must be field names, got 1"),
        ("~: 2\n", "keys must be field names, got None"),
        ("notes: 5\n", "notes must be a mapping"),
        ("ppo: {lr: .nan}\n", "lr must be a finite number"),
        ("advantage: {gamma: .nan}\n", "gamma must be a finite number"),
        ("ppo: {max_grad_norm: .inf}\n", "max_grad_norm must be a finite number"),
        ("advantage: {gama: 0.9}\n", "advantage: has no key 'gama'; did you mean gamma?"),
        ("advantage: {gamma: 0.9}\ngamma: 0.8\n", "gamma is set twice"),
        ("step_timeout: -1\n", "step_timeout must be a finite number >= 0"),
        # sizes that would end in a MemoryError after the run dir is claimed
        ("eval_episodes: 1000000000\n", "eval_episodes 1000000000 is over 100,000"),
        ("lora: true\nlora_r: 1000000000\n", "lora_r 1000000000 is over 8,192"),
        # a key set twice keeps the last value in plain YAML: refused at any depth
        (
            "advantage: {estimator: grpo}\nadvantage: {gamma: 0.9}\n",
            "line 2: key 'advantage' is set twice in one mapping",
        ),
        ("notes:\n  run: {a: 1, a: 2}\n", "line 2: key 'a' is set twice in one mapping"),
        ("lr: 0.1\nppo: {lr: 0.2}\nlr: 0.3\n", "line 3: key 'lr' is set twice in one mapping (first on line 1)"),
        # nested aliases under notes: would expand to gigabytes when the config is written back
        (
            "notes:\n  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
            + "".join(
                f"  a{i}: &a{i} {{" + ", ".join(f"k{j}: *a{i - 1}" for j in range(10)) + "}\n" for i in range(1, 9)
            ),
            "line 3: YAML aliases (*a0) are not accepted in a config",
        ),
    ],
)
def test_bad_yaml_is_one_line_error_before_the_model_loads(tmp_path, capsys, monkeypatch, text, match):
    def no_model(*a, **k):
        raise AssertionError("the model must not be loaded for a bad config")

    monkeypatch.setattr("trainers.loop.trainer.build_policy", no_model)
    p = tmp_path / "k.yaml"
    p.write_text(text)
    out = tmp_path / "out"
    assert main(["--config", str(p), "--output-dir", str(out)]) == 2
    assert match in _one_line_error(capsys)
    assert not out.exists()  # nothing claimed: the corrected rerun needs no --overwrite


def test_nan_from_the_cli_is_rejected_and_notes_in_extra_still_work(tmp_path, capsys):
    assert main(["--lr", "nan"]) == 2
    assert "lr must be a finite number" in _one_line_error(capsys)
    p = tmp_path / "ok.yaml"
    p.write_text("extra: {note: baseline}\nstep_timeout: 30\n")
    cfg, _ = parse_args(["--config", str(p)])
    assert cfg.notes == {"note": "baseline"} and cfg.resolved_step_timeout == 30.0
    assert TrainConfig().resolved_step_timeout == "auto"


# ----------------------------------------------------------------------------- timeouts + restarts
def test_trainer_sets_step_timeout_and_logs_worker_restarts(tmp_path):
    cfg = config_for_tests(
        output_dir=str(tmp_path), env_backend="async", num_groups=1, group_size=2, max_steps=3, step_timeout=45.0
    )
    trainer = Trainer(cfg, policy=FakeScoringPolicy(seed=0))
    try:
        trainer.envs = trainer.rollouts.make_envs()
        assert trainer.envs.step_timeout == 45.0
        rec = trainer.train_iteration(1)
        assert rec["rollout/worker_restarts"] == 0.0 and rec["rollout/worker_errors"] == 0.0
        os.kill(trainer.envs.worker_pids[1], signal.SIGKILL)
        rec = trainer.train_iteration(2)
        assert rec["rollout/worker_restarts"] == 1.0
    finally:
        trainer.close()
    auto = Trainer(config_for_tests(output_dir=str(tmp_path / "b")), policy=FakeScoringPolicy(seed=0))
    try:
        envs = auto.rollouts.make_envs()
        from wrappers.group import DEFAULT_STEP_TIMEOUT

        assert envs.step_timeout == DEFAULT_STEP_TIMEOUT  # rooms declares none; sync backend times out too
        envs.close()
    finally:
        auto.close()


class _RunsCode:
    """Unpickling this runs ``open(marker, "w")``: what a crafted run dir would do."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("with_checksum", [True, False])
def test_gpu_check_loads_run_weights_without_running_pickled_code(tmp_path, with_checksum):
    """``benchmarks/gpu_check.py fsdp`` reads two run dirs' weights: a crafted checkpoint is refused, unexecuted."""
    import hashlib
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "gpu_check", Path(__file__).parents[2] / "benchmarks" / "gpu_check.py"
    )
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    marker = tmp_path / "code-ran"
    ckpt_dir = tmp_path / "run" / "checkpoints"
    ckpt_dir.mkdir(parents=True)
    ckpt = ckpt_dir / "iter_000001.pt"
    torch.save({"format": "progpo-checkpoint-v1", "iteration": 1, "model": {"w": _RunsCode(str(marker))}}, ckpt)
    (ckpt_dir / "latest").write_text(ckpt.name + "\n")
    if with_checksum:  # a matching checksum does not make it safe either
        checksum_path(ckpt).write_text(hashlib.sha256(ckpt.read_bytes()).hexdigest() + "  " + ckpt.name + "\n")
    with pytest.raises(CheckpointError):
        gpu_check._weights(str(tmp_path / "run"))
    assert not marker.exists()
    good = save_checkpoint(tmp_path / "good", 1, {"model": {"w": torch.ones(2)}})
    assert torch.equal(gpu_check._weights(str(good.parents[1]))["w"], torch.ones(2))


def test_every_rng_stream_survives_a_checkpoint_round_trip(tmp_path):
    """Python's, numpy's global and torch's generators: saved in a checkpoint, then drawn from,
    then restored from the file, each draws the same numbers again (a resumed run samples the same
    tasks, shuffles and actions)."""
    import random

    import numpy as np
    import torch

    from trainers.runs.checkpoint import capture_rng, latest_checkpoint, load_checkpoint, restore_rng, save_checkpoint

    random.seed(11)
    np.random.seed(12)
    torch.manual_seed(13)
    np.random.normal()  # a cached Gaussian: part of numpy's state too
    save_checkpoint(tmp_path, 1, {"rng": capture_rng()})

    def draws():
        return (
            random.random(),
            random.gauss(0, 1),
            np.random.random(3).tolist(),
            np.random.normal(),
            torch.rand(3).tolist(),
        )

    first = draws()
    draws()  # move every stream on
    restore_rng(load_checkpoint(latest_checkpoint(tmp_path))["rng"])
    assert draws() == first


# ----------------------------------------------------------------------------- said, not silent
@pytest.mark.parametrize(
    "text, match",
    [
        ("advantage: grpo\n", "advantage: is a section, a mapping of its keys (e.g. advantage: {estimator: 'grpo'})"),
        ("tree: {gamma: 0.9}\n", "tree: has no key 'gamma'; gamma goes under advantage: {gamma: ...}"),
    ],
)
def test_a_section_written_wrong_says_where_its_keys_go(tmp_path, capsys, text, match):
    p = tmp_path / "k.yaml"
    p.write_text(text)
    assert main(["--config", str(p), "--output-dir", str(tmp_path / "out")]) == 2
    assert match in _one_line_error(capsys) and not (tmp_path / "out").exists()


@pytest.mark.parametrize("flags", [["--decode", "static"], ["--rollout-dtype", "bf16"], ["--decode", "loop"]])
def test_generate_mode_engine_flags_in_score_mode_are_refused(tmp_path, capsys, flags):
    assert main([*RUN_FLAGS, *flags, "--output-dir", str(tmp_path / "out")]) == 2
    assert "score mode samples no text" in _one_line_error(capsys) and not (tmp_path / "out").exists()


def test_device_cuda_without_a_gpu_is_refused_before_the_run_dir_is_claimed(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main([*RUN_FLAGS, "--device", "cuda", "--output-dir", str(tmp_path / "out")]) == 2
    assert "no CUDA GPU is visible" in _one_line_error(capsys) and not (tmp_path / "out").exists()


def test_an_empty_config_is_said_before_training_on_the_defaults(tmp_path, capsys, monkeypatch):
    from trainers.config_flags import parse_args

    (tmp_path / "empty.yaml").write_text("# only a comment\n")
    cfg, _ = parse_args(["--config", str(tmp_path / "empty.yaml")])
    assert cfg == TrainConfig()
    assert capsys.readouterr().err.strip() == (
        f"note: config {tmp_path / 'empty.yaml'} sets nothing: every field not given as a flag is at its default"
    )


def test_a_checkpoint_without_a_field_added_since_resumes_when_the_field_is_at_its_default(lora_run, tmp_path):
    """A field the package gained after the checkpoint was written is absent from its config: it
    had its default then, so the resume is accepted (a non-default value for it is still refused)."""
    from trainers.config import EARLIER_VALUES

    run = _copy(lora_run, tmp_path)
    ckpt = run / "checkpoints" / (run / "checkpoints" / "latest").read_text().strip()
    data = load_checkpoint(ckpt)
    newer = next(
        k
        for k, v in TrainConfig().to_dict().items()
        if k not in EARLIER_VALUES
        and k in data["config"]
        and v == data["config"][k]
        and k != "notes"
        and isinstance(v, (int, float))
        and not isinstance(v, bool)
        and v == 0
    )
    del data["config"][newer]
    save_checkpoint(run, int(data["iteration"]), {k: v for k, v in data.items() if k not in ("format", "iteration")})
    assert _resume(run) == 0
    assert load_checkpoint(run / "checkpoints" / "iter_000002.pt")["iteration"] == 2


def test_records_written_after_the_checkpoint_are_dropped_on_resume_without_a_damaged_copy(lora_run, tmp_path):
    """A crash after the checkpoint leaves records past it: the resume drops them quietly (the
    iteration is played again), keeps every record up to the checkpoint, and writes no damaged copy."""
    import json
    import warnings

    run = _copy(lora_run, tmp_path)
    before = (run / "metrics.jsonl").read_text()
    with (run / "metrics.jsonl").open("a") as fh:
        fh.write(json.dumps({"iteration": 2, "kind": "train", "success": 123.0}) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _resume(run) == 0
    assert not [w for w in caught if "rebuilt" in str(w.message)]
    text = (run / "metrics.jsonl").read_text()
    assert text.startswith(before) and "123.0" not in text and not (run / "metrics.jsonl.damaged").exists()
    assert [json.loads(ln)["iteration"] for ln in text.splitlines() if json.loads(ln).get("kind") == "train"] == [1, 2]
