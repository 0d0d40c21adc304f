"""The run-dir stages and the rest of the loop's stages, each on its own: what it writes, what it
hands on, what it refuses.

Records (:class:`trainers.runs.records.RunRecorder`): the files a run starts with, a resume's rebuilt
metrics, the bar and the per-iteration line, the teacher's samples, the report's end line, and a
non-main process that writes nothing. Run checkpoints (:class:`trainers.runs.run_checkpoints.RunCheckpoints`):
what a checkpoint holds, a round trip of weights, optimizer, RNG and teacher, and each reason a
resume is refused. Updater, collector and evaluator: the recomputed old log-probs and their
mismatch, gradient checkpointing, the rollout streams' blocks, the tree collector's seed and an
evaluation record's fields.
"""

from __future__ import annotations

import dataclasses
import json
import random
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import yaml

sys.path.insert(0, str(Path(__file__).parent))

from fake_rollouts import TablePolicy, step_record
from tiny_config import config_for_tests

from trainers import distributed, seeds
from trainers.loop.sections import eval_section, rollout_section, run_section, update_section
from trainers.rollouts.rollout import Rollout, Trajectory
from trainers.runs.checkpoint import CheckpointError, checkpoint_files, load_checkpoint, save_checkpoint
from trainers.runs.metrics import read_metrics
from trainers.runs.provenance import read_provenance
from trainers.runs.run_dir import RunManifest

MAIN, OTHER_RANK = distributed.DistInfo(), distributed.DistInfo(rank=1, world_size=2)


# ----------------------------------------------------------------------------- records
class _Bar:
    """A progress bar that keeps what it was made with and shown."""

    def __init__(self, total, desc, enabled, leave=False, lines=True) -> None:
        self.made = (total, desc, enabled, leave, lines)
        self.n, self.postfix, self.closed = 0, None, False

    def update(self, n=1) -> None:
        self.n += n

    def set_postfix(self, **kw) -> None:
        self.postfix = kw

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def bars(monkeypatch):
    import trainers.runs.records

    monkeypatch.setattr(trainers.runs.records, "progress_bar", _Bar)


def _recorder(tmp_path: Path, main: bool = True, **overrides):
    from trainers.runs.records import RunRecorder

    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    cfg = config_for_tests(output_dir=str(run), **overrides)
    return RunRecorder(run_section(cfg), main), RunManifest.create(run), run


def test_a_fresh_run_starts_its_config_metrics_and_provenance_and_lists_them(tmp_path, bars):
    recorder, manifest, run = _recorder(tmp_path, iterations=5)
    recorder.start(manifest, [], None)
    assert (
        yaml.safe_load((run / "config.yaml").read_text())
        == config_for_tests(output_dir=str(run), iterations=5).to_sections()
    )
    (prov,) = read_provenance(run)
    assert prov["kind"] == "provenance" and prov["iteration"] == 0
    assert {"metrics.jsonl", "config.yaml", "provenance.jsonl"} <= RunManifest.load(run).files
    assert recorder.bar.n == 0 and recorder.bar.made == (5, "iterations", False, True, False)
    recorder.log({"iteration": 1, "kind": "train", "success": 0.5})
    recorder.close()
    assert read_metrics(run / "metrics.jsonl") == [{"iteration": 1, "kind": "train", "success": 0.5}]


def test_tensorboard_files_are_the_runs_own(tmp_path):
    recorder, manifest, run = _recorder(tmp_path, tensorboard=True)
    recorder.start(manifest, [], None)
    recorder.log({"iteration": 1, "kind": "train", "success": 0.5})
    recorder.close()
    events = [f for f in RunManifest.load(run).files if "tfevents" in f]
    assert len(events) == 1 and (run / events[0]).is_file()


def test_a_resume_rebuilds_missing_metrics_and_its_bar_and_provenance_start_at_the_checkpoint(tmp_path, bars):
    recorder, manifest, run = _recorder(tmp_path, iterations=6)
    history = [{"iteration": 1, "kind": "train"}, {"iteration": 2, "kind": "train"}]
    with pytest.warns(UserWarning, match="was missing; rebuilt it from the checkpoint's history"):
        recorder.start(manifest, history, 2)
    recorder.close()
    assert read_metrics(run / "metrics.jsonl") == history
    assert recorder.bar.n == 2 and recorder.bar.made[0] == 6 and recorder.bar.closed
    assert [(p["kind"], p["iteration"]) for p in read_provenance(run)] == [("resume", 2), ("provenance", 2)]


def test_a_damaged_metrics_copy_kept_by_a_resume_is_listed_as_the_runs(tmp_path):
    recorder, manifest, run = _recorder(tmp_path)
    history = [{"iteration": 1, "kind": "train"}]
    (run / "metrics.jsonl").write_text('{"iteration": 1, "kind": "train"}\n{garbled\n')
    with pytest.warns(UserWarning):
        recorder.start(manifest, history, 1)
    recorder.close()
    assert "metrics.jsonl.damaged" in RunManifest.load(run).files and (run / "metrics.jsonl.damaged").is_file()
    assert read_metrics(run / "metrics.jsonl") == history


def test_each_iteration_advances_the_bar_and_prints_one_line_where_no_bar_is_drawn(tmp_path, capsys, bars):
    recorder, manifest, run = _recorder(tmp_path, iterations=4, progress_bars=True)
    recorder.start(manifest, [], None)
    recorder.iteration_done(
        {"iteration": 1, "success": 0.5, "all_failed_frac": 0.25, "coverage_rate": 0.125, "time/iteration_s": 2.0}
    )
    recorder.iteration_done({"iteration": 2})
    recorder.close()
    assert recorder.bar.n == 2 and recorder.bar.made[2] is True  # asked for (drawn where stderr is a terminal)
    assert capsys.readouterr().err.splitlines() == [
        "iteration 1/4: success 0.500, all-failed 0.250, coverage rate 0.125, 2.0 s",
        "iteration 2/4: success 0.000, all-failed 0.000, coverage rate 0.000, 0.0 s",
    ]


def test_the_bars_postfix_shows_success_and_all_failed(tmp_path, bars):
    recorder, manifest, _ = _recorder(tmp_path)
    recorder.start(manifest, [], None)
    recorder.iteration_done({"iteration": 1, "success": 0.5, "all_failed_frac": 0.25})
    assert recorder.bar.postfix == {"success": "0.50", "all_failed": "0.25"}
    recorder.iteration_done({"iteration": 2})
    assert recorder.bar.postfix == {"success": "0.00", "all_failed": "0.00"}
    recorder.close()


def test_without_progress_bars_an_iteration_prints_nothing(tmp_path, capsys):
    recorder, manifest, _ = _recorder(tmp_path, progress_bars=False)
    recorder.start(manifest, [], None)
    recorder.iteration_done({"iteration": 1, "success": 0.5})
    recorder.close()
    assert capsys.readouterr().err == ""


def test_the_teachers_samples_are_appended_and_listed(tmp_path):
    recorder, manifest, run = _recorder(tmp_path)
    recorder.start(manifest, [], None)
    recorder.distill_samples([])
    assert not (run / "distill_samples.jsonl").exists()
    recorder.distill_samples([{"iteration": 1, "context": "a"}, {"iteration": 1, "context": "b"}])
    recorder.distill_samples([{"iteration": 2, "context": "c"}])
    recorder.close()
    lines = (run / "distill_samples.jsonl").read_text().splitlines()
    assert [json.loads(x)["context"] for x in lines] == ["a", "b", "c"]
    assert "distill_samples.jsonl" in RunManifest.load(run).files


def test_the_report_ends_the_provenance_at_the_last_iteration_and_lists_its_files(tmp_path):
    recorder, manifest, run = _recorder(tmp_path)
    recorder.start(manifest, [], None)
    history = [
        {"iteration": 1, "kind": "train", "success": 0.0},
        {"iteration": 3, "kind": "train", "success": 0.5},
        {"iteration": 2, "kind": "eval", "eval/success": 0.5},
        {"iteration": "?", "kind": "note"},
    ]
    path = recorder.report(history)
    recorder.close()
    assert path == run / "summary.md" and path.is_file()
    end = read_provenance(run)[-1]
    assert end["kind"] == "end" and end["iteration"] == 3
    assert {"summary.md", "curves.png"} <= RunManifest.load(run).files


def test_a_report_of_a_run_without_iterations_ends_at_zero(tmp_path):
    recorder, manifest, run = _recorder(tmp_path)
    recorder.start(manifest, [], None)
    recorder.report([])
    recorder.close()
    assert read_provenance(run)[-1]["iteration"] == 0


def test_a_process_other_than_rank_0_writes_nothing(tmp_path, bars):
    recorder, manifest, run = _recorder(tmp_path, main=False, progress_bars=True)
    before = sorted(p.name for p in run.iterdir())
    recorder.start(manifest, [], None)
    recorder.log({"iteration": 1})
    recorder.iteration_done({"iteration": 1})
    recorder.distill_samples([{"context": "a"}])
    assert recorder.report([{"iteration": 1}]) == run / "summary.md"
    recorder.close()
    assert sorted(p.name for p in run.iterdir()) == before and recorder.logger is None
    assert recorder.bar.made[2] is False and recorder.bar.n == 1  # no bar drawn, but it still counts


def test_config_yaml_keeps_the_sections_order_and_writes_no_aliases():
    from trainers.runs.records import config_yaml

    shared = [1, 2]
    text = config_yaml({"run": {"seed": 3}, "advantage": {"a": shared, "b": shared}})
    assert "&" not in text and "*" not in text
    assert list(yaml.safe_load(text)) == ["run", "advantage"] and yaml.safe_load(text)["advantage"]["b"] == [1, 2]


# ----------------------------------------------------------------------------- run checkpoints
class _Teacher:
    """A teacher with an EMA copy, as a checkpoint sees it."""

    def __init__(self) -> None:
        self.ema: torch.nn.Module | None = None

    def ensure_ema(self) -> torch.nn.Module:
        if self.ema is None:
            self.ema = torch.nn.Linear(3, 2)
        return self.ema


def _checkpoints(run: Path, teacher=None, dist=MAIN, shape=(3, 2), **overrides):
    from trainers.runs.run_checkpoints import RunCheckpoints

    cfg = config_for_tests(output_dir=str(run), **overrides)
    model = torch.nn.Linear(*shape)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    return RunCheckpoints(run_section(cfg), model, optimizer, dist, teacher)


def _train_a_step(ck) -> None:
    ck.model(torch.ones(1, 3)).sum().backward()
    ck.optimizer.step()


HISTORY = [{"iteration": 1, "kind": "train", "success": 0.0}, {"iteration": 2, "kind": "train", "success": 0.5}]


def _saved_run(tmp_path, **kw):
    run = tmp_path / "run"
    run.mkdir()
    manifest = RunManifest.create(run)
    ck = _checkpoints(run, **kw)
    _train_a_step(ck)
    path = ck.save(2, HISTORY, manifest)
    return run, manifest, ck, path


def test_a_checkpoint_holds_the_run_its_config_schedule_history_and_state(tmp_path):
    run, manifest, ck, path = _saved_run(tmp_path)
    assert path is not None and path.is_file()
    assert {Path(p).relative_to(run).as_posix() for p in checkpoint_files(run, 2)} <= RunManifest.load(run).files
    data = load_checkpoint(path)
    assert data["run_id"] == manifest.run_id and data["config"] == config_for_tests(output_dir=str(run)).to_dict()
    assert data["env_schedule"] == {"seed": ck.cfg.seed, "next_iteration": 3, "eval_seed": seeds.eval_plan(ck.cfg.seed)}
    assert data["history"] == HISTORY and "teacher_ema" not in data
    assert all(torch.equal(data["model"][k], v) for k, v in ck.model.state_dict().items())
    assert data["optimizer"]["state"][0]["step"] == 1


def test_a_resume_restores_weights_optimizer_rngs_and_the_teacher(tmp_path):
    teacher = _Teacher()
    teacher.ensure_ema()
    run, manifest, ck, _ = _saved_run(tmp_path, teacher=teacher)
    draws = (torch.rand(3), np.random.rand(), random.random())
    saved = {k: v.clone() for k, v in ck.model.state_dict().items()}
    ema = {k: v.clone() for k, v in teacher.ema.state_dict().items()}

    later = _Teacher()
    again = _checkpoints(run, teacher=later)
    history, next_iteration = again.resume("latest")
    assert history == HISTORY and next_iteration == 3 and again.resumed_run_id == manifest.run_id
    assert all(torch.equal(saved[k], v) for k, v in again.model.state_dict().items())
    assert all(torch.equal(ema[k], v) for k, v in later.ema.state_dict().items())
    assert again.optimizer.state_dict()["state"][0]["step"] == 1
    assert torch.equal(torch.rand(3), draws[0]) and np.random.rand() == draws[1] and random.random() == draws[2]


def test_a_resume_by_path_loads_that_checkpoint(tmp_path):
    run, manifest, ck, path = _saved_run(tmp_path)
    _train_a_step(ck)
    later = ck.save(3, HISTORY + [{"iteration": 3, "kind": "train"}], manifest)
    assert not path.exists()  # a run keeps its newest checkpoint
    history, next_iteration = _checkpoints(run).resume(str(later))
    assert len(history) == 3 and next_iteration == 4
    with pytest.raises(CheckpointError, match="does not exist"):
        _checkpoints(run).resume(str(path))


@pytest.mark.parametrize(
    "change, refused",
    [
        ({"lr": 5e-3}, "lr"),
        ({"lr": 5e-3, "seed": 9}, "lr, seed"),
        ({"iterations": 9, "notes": {"why": "more"}, "save_every": 1}, None),  # a run may go on for longer
    ],
)
def test_a_resume_with_another_config_is_refused_unless_only_compatible_fields_changed(tmp_path, change, refused):
    run, *_ = _saved_run(tmp_path)
    again = _checkpoints(run, **change)
    if refused is None:
        assert again.resume("latest")[1] == 3
        return
    with pytest.raises(CheckpointError, match=rf"different config \({refused} differ\); resume with the same settings"):
        again.resume("latest")


def test_a_checkpoint_for_another_model_is_one_line_that_says_why(tmp_path):
    run, *_ = _saved_run(tmp_path)
    with pytest.raises(
        CheckpointError, match=r"does not match this model/optimizer \(ValueError: weight: expected shape"
    ):
        _checkpoints(run, shape=(4, 2)).resume("latest")


def test_a_checkpoint_whose_config_is_not_a_mapping_is_refused(tmp_path):
    run, *_ = _saved_run(tmp_path)
    data = load_checkpoint(run / "checkpoints" / "iter_000002.pt")
    data["config"] = "lr: 1"
    path = save_checkpoint(run, 4, data)
    with pytest.raises(CheckpointError, match="'config' must be a mapping, got str"):
        _checkpoints(run).resume(str(path))


def test_a_checkpoint_of_more_processes_is_refused_with_their_count(tmp_path):
    run, *_ = _saved_run(tmp_path)
    data = load_checkpoint(run / "checkpoints" / "iter_000002.pt")
    data["distributed"] = {"world_size": 2, "rng": [data["rng"], data["rng"]]}
    path = save_checkpoint(run, 4, data)
    with pytest.raises(CheckpointError, match=r"written by 2 process\(es\); resume it with 2 \(this run has 1\)"):
        _checkpoints(run).resume(str(path))


def test_the_run_ids_decide_whose_checkpoint_it_is(tmp_path):
    run, manifest, *_ = _saved_run(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    theirs = RunManifest.create(other)
    ck = _checkpoints(other)
    data = load_checkpoint(run / "checkpoints" / "iter_000002.pt")
    with pytest.raises(
        CheckpointError,
        match=rf"belongs to another run than the one in {other} \(run id "
        rf"{manifest.run_id[:8]} vs {theirs.run_id[:8]}\); resume it with its own",
    ):
        ck.check_owner(run / "checkpoints" / "iter_000002.pt", data)
    assert ck.resumed_run_id == manifest.run_id
    same = RunManifest(other, manifest.run_id)
    same.save()
    (other / "config.yaml").write_text("lr: 7\n")  # the ids agree: the dir's files are not read
    ck.check_owner(run / "checkpoints" / "iter_000002.pt", data)


def _dir_without_ids(tmp_path: Path, config: dict | None, history: list | None) -> Path:
    d = tmp_path / "dir"
    d.mkdir()
    if config is not None:
        (d / "config.yaml").write_text(yaml.safe_dump(config))
    if history is not None:
        (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in history))
    return d


@pytest.mark.parametrize(
    "config, history, refused",
    [
        (None, None, None),  # an empty dir takes any checkpoint
        ("same", HISTORY, None),
        ("same", HISTORY + [{"iteration": 3, "kind": "train"}], None),  # records after the checkpoint
        ("same", HISTORY[:1], "its history differs from metrics.jsonl"),
        (
            "same",
            [{"iteration": 1, "kind": "train", "success": 1.0}] + HISTORY[1:],
            "its history differs from metrics.jsonl",
        ),
        ("other", HISTORY, "its config differs from config.yaml"),
        (None, HISTORY, None),  # the history alone agrees
    ],
)
def test_without_run_ids_the_dirs_config_and_history_decide(tmp_path, config, history, refused):
    run, manifest, ck, path = _saved_run(tmp_path)
    data = load_checkpoint(path)
    data.pop("run_id")
    cfg = (
        config_for_tests(output_dir=str(run)).to_sections()
        if config == "same"
        else {"lr": 0.5}
        if config == "other"
        else None
    )
    d = _dir_without_ids(tmp_path, cfg, history)
    target = _checkpoints(d)
    if refused is None:
        target.check_owner(path, data)
        assert target.resumed_run_id is None
        return
    with pytest.raises(CheckpointError, match=rf"belongs to another run than the one in {d} \({refused}\)"):
        target.check_owner(path, data)


def test_only_rank_0_judges_ownership_but_every_rank_takes_the_run_id(tmp_path):
    run, manifest, ck, path = _saved_run(tmp_path)
    d = _dir_without_ids(tmp_path, {"lr": 0.5}, HISTORY)
    other_rank = _checkpoints(d, dist=OTHER_RANK)
    other_rank.check_owner(path, load_checkpoint(path))  # rank 1: no refusal (rank 0 refuses for the run)
    assert other_rank.resumed_run_id == manifest.run_id
    with pytest.raises(CheckpointError):
        _checkpoints(d).check_owner(path, load_checkpoint(path))


def test_a_resumed_run_without_a_manifest_starts_one_with_the_checkpoints_id_and_the_earlier_files(tmp_path):
    run, manifest, ck, path = _saved_run(tmp_path)
    d = _dir_without_ids(tmp_path, config_for_tests(output_dir=str(run)).to_sections(), HISTORY)
    target = _checkpoints(d)
    target.check_owner(path, load_checkpoint(path))
    opened = target.open_manifest()
    assert opened.run_id == manifest.run_id and {"config.yaml", "metrics.jsonl"} <= opened.files
    assert RunManifest.load(d).run_id == manifest.run_id
    assert target.open_manifest().run_id == manifest.run_id  # the one written is read back


def test_claim_locks_the_run_dir_against_a_second_process(tmp_path):
    from trainers.runs.run_dir import RunDirError

    run = tmp_path / "run"
    run.mkdir()
    lock = _checkpoints(run).claim(resume=False, overwrite=False)
    try:
        with pytest.raises(RunDirError):
            _checkpoints(run).claim(resume=True, overwrite=False)
    finally:
        lock.release()


@pytest.mark.parametrize(
    "text, same",
    [
        ("sections", True),
        ("flat", True),
        ("flat+compatible", True),  # iterations and output_dir may differ
        ("flat+lr", False),
        ("[1, 2]", False),
        ("{unclosed", False),
        ("run: 3", False),  # a section written as a scalar
    ],
)
def test_a_dirs_config_yaml_is_the_checkpoints_config_in_sections_or_flat(tmp_path, text, same):
    from trainers.runs.run_checkpoints import _same_config

    cfg = config_for_tests()
    flat = cfg.to_dict()
    written = {
        "sections": yaml.safe_dump(cfg.to_sections()),
        "flat": yaml.safe_dump(flat),
        "flat+compatible": yaml.safe_dump({**flat, "iterations": 99, "output_dir": "elsewhere"}),
        "flat+lr": yaml.safe_dump({**flat, "lr": 0.5}),
    }.get(text, text)
    (tmp_path / "config.yaml").write_text(written)
    assert _same_config(tmp_path / "config.yaml", flat) is same


def test_a_config_yaml_that_cannot_be_read_is_not_the_checkpoints(tmp_path):
    from trainers.runs.run_checkpoints import _same_config

    (tmp_path / "config.yaml").write_bytes(b"\xff\xfe lr: 1")
    assert _same_config(tmp_path / "config.yaml", {"lr": 1}) is False
    assert _same_config(tmp_path / "config.yaml", {}) is True  # nothing to differ in


# ----------------------------------------------------------------------------- updater
class _Recorded(TablePolicy):
    """The three-command table policy that records its forward passes' sizes, with a sampler
    whose log-probs are off by a known amount per step."""

    def __init__(self, offsets=(0.0, 0.0, 0.0)) -> None:
        super().__init__()
        self.backend = SimpleNamespace(model=object())  # a sampler of its own: old log-probs are recomputed
        self.offsets, self.calls = offsets, []

    def compute_logprobs_and_entropy(self, outputs, batch_size=None, with_entropy=True):
        self.calls.append((len(outputs), batch_size, with_entropy))
        return super().compute_logprobs_and_entropy(outputs, batch_size, with_entropy)


def _outputs(policy, offsets):
    return [policy.recorded(prompt, prompt, off) for prompt, off in zip((0, 1, 2), offsets)]


def test_a_sampler_of_its_own_gets_its_old_logprobs_recomputed_and_the_mismatch_logged_per_step():
    from trainers.loop.updater import Updater

    policy = _Recorded()
    cfg = config_for_tests(lr=0.0, ppo_epochs=1, num_minibatches=1, skip_zero_advantage=False, batch_decisions="off")
    updater = Updater(update_section(cfg), policy, distributed.DistInfo(), torch.device("cpu"))
    assert updater.recompute_old
    outputs = _outputs(policy, (0.1, -0.3, 0.2))
    stats = updater.update(
        [SimpleNamespace(output=o, traj=j) for j, o in enumerate(outputs)], np.array([1.0, -1.0, 0.5]), 1
    )
    assert stats["rollout/logprob_mismatch_max"] == pytest.approx(0.3, abs=1e-6)
    assert stats["rollout/logprob_mismatch_mean"] == pytest.approx(0.2, abs=1e-6)
    assert stats["time/old_logprob_s"] >= 0.0


def test_the_same_sampler_and_trainer_use_the_samplers_logprobs():
    from trainers.loop.updater import Updater

    policy = _Recorded()
    policy.backend = SimpleNamespace(model=policy.model)
    cfg = config_for_tests(lr=0.0, ppo_epochs=1, num_minibatches=1, skip_zero_advantage=False)
    updater = Updater(update_section(cfg), policy, distributed.DistInfo(), torch.device("cpu"))
    assert not updater.recompute_old
    outputs = _outputs(policy, (0.1, -0.3, 0.2))
    stats = updater.update(
        [SimpleNamespace(output=o, traj=j) for j, o in enumerate(outputs)], np.array([1.0, -1.0, 0.5]), 1
    )
    assert "rollout/logprob_mismatch_max" not in stats


@pytest.mark.parametrize("batch_decisions, size", [("off", None), ("on", 3)])
def test_with_token_micro_batches_a_micro_batch_is_one_forward_pass(batch_decisions, size):
    from trainers.loop.updater import Updater

    policy = _Recorded()
    cfg = config_for_tests(
        lr=0.0,
        ppo_epochs=1,
        num_minibatches=1,
        skip_zero_advantage=False,
        batch_decisions=batch_decisions,
        entropy_coef=0.01,
    )
    updater = Updater(update_section(cfg), policy, distributed.DistInfo(), torch.device("cpu"))
    outputs = _outputs(policy, (0.0, 0.0, 0.0))
    policy.calls.clear()
    updater.update([SimpleNamespace(output=o, traj=j) for j, o in enumerate(outputs)], np.array([1.0, -1.0, 0.5]), 1)
    assert policy.calls[0] == (3, size, False)  # the old log-probs' pass, no entropy
    assert policy.calls[-1] == (3, size, True)  # the update's pass with the entropy bonus on


def test_gradient_checkpointing_is_enabled_non_reentrant_on_the_base_model_and_lora_inputs_keep_the_graph():
    from trainers.config import ConfigError
    from trainers.loop.updater import enable_gradient_checkpointing

    calls = []
    base = SimpleNamespace(gradient_checkpointing_enable=lambda **kw: calls.append(("base", kw)))
    peft = SimpleNamespace(get_base_model=lambda: base, enable_input_require_grads=lambda: calls.append(("inputs", {})))
    enable_gradient_checkpointing(peft)
    assert calls == [("base", {"gradient_checkpointing_kwargs": {"use_reentrant": False}}), ("inputs", {})]
    calls.clear()
    enable_gradient_checkpointing(base)  # no adapter: the model itself, no input grads
    assert calls == [("base", {"gradient_checkpointing_kwargs": {"use_reentrant": False}})]
    with pytest.raises(ConfigError, match="^gradient_checkpointing: Linear has no gradient_checkpointing_enable$"):
        enable_gradient_checkpointing(torch.nn.Linear(1, 1))


def test_the_mismatch_metrics_carry_the_rollout_prefix():
    from trainers.loop.updater import rollout_mismatch

    m = rollout_mismatch(
        [torch.tensor([-1.0, -2.0]), torch.tensor([-0.5])], [torch.tensor([-1.0, -2.5]), torch.tensor([-0.25])]
    )
    assert m == {"rollout/logprob_mismatch_max": 0.5, "rollout/logprob_mismatch_mean": 0.25}


# ----------------------------------------------------------------------------- collector
def test_rollout_streams_are_refused_in_one_line_where_they_cannot_fork(monkeypatch):
    import trainers.forked
    from trainers.config import ConfigError
    from trainers.loop.collector import check_rollout_streams

    with pytest.raises(
        ConfigError,
        match=r"^rollout_streams 2: a run in several processes already splits its groups; "
        r"use --rollout-streams 1 under torchrun$",
    ):
        check_rollout_streams(2, OTHER_RANK, torch.device("cpu"))
    with pytest.raises(
        ConfigError, match=r"^rollout_streams 3: a forked process cannot use cuda; use it with --device cpu$"
    ):
        check_rollout_streams(3, MAIN, torch.device("cuda"))
    check_rollout_streams(2, MAIN, torch.device("cpu"))
    monkeypatch.setattr(trainers.forked, "can_fork", lambda: False)
    with pytest.raises(
        ConfigError, match=r"^rollout_streams 2: needs the fork start method, which this platform lacks$"
    ):
        check_rollout_streams(2, MAIN, torch.device("cpu"))


class _Envs:
    def __init__(self, restarts: int, errors: int) -> None:
        self.worker_restarts = self.member_errors = 0
        self.per_rollout, self.closed = (restarts, errors), False

    def close(self) -> None:
        self.closed = True


def _one_member_rollout(tasks, tag):
    trajs = [
        Trajectory(group=g, member=0, task_id=f"{tag}{t}", task_type="pick", outcome=0.0, length=1, won=False)
        for g, t in enumerate(tasks)
    ]
    steps = [step_record(j, 0) for j in range(len(trajs))]
    return Rollout(steps=steps, trajectories=trajs)


def test_rollout_streams_play_block_k_as_rank_k_and_merge_the_blocks_in_order(monkeypatch):
    """The forked run is replaced by one that plays the blocks in turn here: block 0 on the
    trainer's envs, block k > 1 on envs of its own (closed after), without a bar; the env
    failures of the blocks summed."""
    import trainers.forked
    from trainers.loop.collector import Rollouts
    from trainers.seeds import task_seeds

    cfg = config_for_tests(num_groups=4, group_size=2, rollout_streams=2, progress_bars=True)
    played, made = [], []

    class Fake:
        def collect(self, envs, policy, tasks, seed, on_step):
            played.append((list(tasks), seed, rollouts.cfg.progress_bars))
            envs.worker_restarts += envs.per_rollout[0]
            envs.member_errors += envs.per_rollout[1]
            return _one_member_rollout(tasks, f"b{len(played)}-")

    def make_envs():
        made.append(_Envs(*[(1, 0), (2, 5)][len(made)]))
        return made[-1]

    def in_turn(jobs, name):
        assert name == "rollout stream"
        return [job(lambda n: None) for job in jobs]

    monkeypatch.setattr(trainers.forked, "run_forked", in_turn)
    rollouts = Rollouts(
        rollout_section(cfg),
        SimpleNamespace(model=torch.nn.Linear(1, 1)),
        lambda: None,
        MAIN,
        range(4),
        lambda: torch.autocast("cpu", enabled=False),
    )
    rollouts.collector, rollouts.make_envs = Fake(), make_envs
    merged = rollouts.rollout(3)
    whole = list(task_seeds(cfg.seed, 3, 4))
    base = seeds.rollout(cfg.seed, 3)
    assert played == [
        (whole[:2], distributed.shard_seed(base, 0), True),
        (whole[2:], distributed.shard_seed(base, 1), False),
    ]
    assert [t.task_id for t in merged.trajectories] == [
        f"b1-{whole[0]}",
        f"b1-{whole[1]}",
        f"b2-{whole[2]}",
        f"b2-{whole[3]}",
    ]
    assert rollouts.env_failures == {"rollout/worker_restarts": 3.0, "rollout/worker_errors": 5.0}
    assert made[1].closed and not made[0].closed and rollouts._trainer_envs is made[0]


def test_the_tree_collector_seeds_each_rollouts_tree_and_passes_the_episode_cap(monkeypatch):
    import trainers.loop.collector as collector

    cfg = config_for_tests(rollout="tree", group_size=4, max_steps=7)
    section = rollout_section(cfg)
    seen = {}

    def fake(envs, policy, tasks, seed, cfg, max_steps, on_step):
        seen.update(envs=envs, policy=policy, tasks=tasks, seed=seed, cfg=cfg, max_steps=max_steps, on_step=on_step)
        return "rollout"

    monkeypatch.setattr(collector, "collect_tree_rollout", fake)
    step = object()
    assert collector.make_collector(section).collect("envs", "policy", [5, 6], 42, step) == "rollout"
    assert seen["cfg"].seed == 42 and seen["cfg"] == dataclasses.replace(section.tree, seed=42)
    assert (seen["envs"], seen["policy"], seen["tasks"], seen["seed"], seen["max_steps"], seen["on_step"]) == (
        "envs",
        "policy",
        [5, 6],
        42,
        7,
        step,
    )


# ----------------------------------------------------------------------------- evaluator
def _evaluator(**overrides):
    from trainers.envs import make_env_fn
    from trainers.loop.evaluator import Evaluator
    from trainers.rollouts.eval_episodes import random_baseline

    cfg = config_for_tests(max_steps=4, **overrides)
    fn = make_env_fn(cfg.env, cfg.splits[1], cfg.max_steps, cfg.state_key)
    policy = random_baseline(5)
    policy.model = torch.nn.Linear(1, 1)
    return (
        Evaluator(
            eval_section(cfg), policy, fn, MAIN, torch.device("cpu"), lambda: torch.autocast("cpu", enabled=False)
        ),
        cfg,
        fn,
    )


def test_an_evaluation_record_holds_the_plans_episodes_in_order_and_its_teachers_label():
    ev, cfg, _ = _evaluator(eval_episodes=3, distill="hindsight")
    rec = ev.evaluate(4)
    plan = ev.plan()
    assert (rec["iteration"], rec["kind"], rec["eval/split"], rec["eval/episodes"]) == (4, "eval", cfg.splits[1], 3)
    assert rec["eval/panel"] == plan.panel() and len(rec["eval/won"]) == 3 and len(rec["eval/score"]) == 3
    assert rec["distill"] == eval_section(cfg).teacher_label and "hindsight" in rec["distill"]
    assert set(rec["eval/examples"]) <= {"won", "lost"} and "eval/success" in rec
    assert "distill" not in ev.evaluate(4, policy=ev.policy)  # a policy of the caller's is not the run's


def test_an_evaluation_on_another_split_plays_that_splits_plan():
    ev, cfg, fn = _evaluator(eval_episodes=2)
    assert ev.split_env_fn(cfg.splits[1]) is fn and ev.split_env_fn(cfg.splits[0]) is not fn
    plan = ev.plan(cfg.splits[0], 5)
    assert (plan.split, plan.num_episodes) == (cfg.splits[0], 5)
    assert ev.plan().num_episodes == 2 and ev.plan().split == cfg.splits[1]
    rec = ev.evaluate(1, split=cfg.splits[0], episodes=5, kind="final")
    assert (rec["eval/split"], rec["eval/episodes"], rec["kind"]) == (cfg.splits[0], 5, "final")
    assert rec["eval/panel"] == plan.panel()


def test_the_random_baseline_says_what_it_is():
    ev, *_ = _evaluator(eval_episodes=2)
    rec = ev.random_baseline(0)
    assert rec["kind"] == "baseline" and rec["baseline"].startswith("random admissible command")


def test_evaluation_streams_fork_only_for_a_model_on_the_cpu(monkeypatch):
    import trainers.forked

    ev, *_ = _evaluator()
    assert ev.in_processes() is True
    monkeypatch.setattr(trainers.forked, "can_fork", lambda: False)
    assert ev.in_processes() is False
    monkeypatch.undo()
    ev.device = torch.device("cuda")
    assert ev.in_processes() is False


def test_an_evaluation_asks_for_each_splits_own_env_and_plays_it_with_the_runs_settings(monkeypatch):
    import trainers.loop.evaluator as evaluator

    ev, cfg, fn = _evaluator(
        eval_episodes=2, eval_streams=2, tau_r=0.7, step_timeout=9.0, progress_bars=True, state_key="exact"
    )
    asked, played, metrics, bars_made = [], [], [], []
    split_env_fn, run_eval, rollout_metrics = ev.split_env_fn, evaluator.run_eval, evaluator.rollout_metrics
    monkeypatch.setattr(ev, "split_env_fn", lambda split: (asked.append(split), split_env_fn(split))[1])
    monkeypatch.setattr(
        evaluator,
        "run_eval",
        lambda *a, **kw: (played.append((a[1], kw)), run_eval(*a, **{**kw, "processes": False}))[1],
    )
    monkeypatch.setattr(
        evaluator, "rollout_metrics", lambda *a, **kw: (metrics.append((a[1:], kw)), rollout_metrics(*a, **kw))[1]
    )
    monkeypatch.setattr(evaluator, "progress_bar", lambda *a: (bars_made.append(_Bar(*a)), bars_made[-1])[1])
    rec = ev.evaluate(3, split=cfg.splits[0], episodes=2)
    assert asked == [cfg.splits[0], cfg.splits[0]]  # the plan's tasks and the env played: that split's
    env_fn, kw = played[0]
    assert env_fn.args == (cfg.env, cfg.splits[0], cfg.max_steps, cfg.state_key)
    assert (kw["streams"], kw["step_timeout"], kw["processes"]) == (2, 9.0, ev.in_processes())
    assert metrics == [((0.7,), {"prefix": "eval/"})]
    (bar,) = bars_made
    assert bar.made[:3] == (2 * cfg.max_steps, f"eval {cfg.splits[0]} 3", True) and bar.closed
    assert bar.n > 0  # the steps played move the bar
    assert rec["iteration"] == 3
    played.clear()
    ev.evaluate(3, policy=ev.policy)
    assert played[0][1]["streams"] == 1  # a caller's policy (the random baseline) plays in one stream


def test_the_random_baseline_draws_with_the_runs_seed_at_its_iteration(monkeypatch):
    import trainers.loop.evaluator as evaluator

    ev, cfg, _ = _evaluator(eval_episodes=2, seed=11)
    seeds_given = []
    real = evaluator.random_baseline
    monkeypatch.setattr(evaluator, "random_baseline", lambda seed: (seeds_given.append(seed), real(seed))[1])
    rec = ev.random_baseline(7)
    assert seeds_given == [11] and rec["iteration"] == 7 and rec["kind"] == "baseline"


@pytest.mark.parametrize("rank", [0, 1])
def test_with_several_processes_rank_0_evaluates_on_full_weights_and_the_others_wait(monkeypatch, rank):
    from contextlib import contextmanager

    ev, cfg, _ = _evaluator(eval_episodes=2, distill="hindsight")
    ev.dist = distributed.DistInfo(rank=rank, world_size=2)
    events = []

    @contextmanager
    def full_weights(model, info):
        events.append(("gather", model is ev.policy.model, info.rank))
        yield
        events.append("release")

    monkeypatch.setattr(distributed, "full_weights", full_weights)
    monkeypatch.setattr(distributed, "barrier", lambda: events.append("barrier"))
    rec = ev.evaluate(5, split=cfg.splits[0], episodes=3, kind="final", policy=None)
    assert events == [("gather", True, rank), "barrier", "release"]
    if rank:
        assert rec == {}
    else:
        assert (rec["iteration"], rec["eval/split"], rec["eval/episodes"], rec["kind"]) == (
            5,
            cfg.splits[0],
            3,
            "final",
        )
        assert rec["distill"] == eval_section(cfg).teacher_label  # the run's own policy, trained with its teacher
        assert "distill" not in ev.evaluate(5, episodes=2, policy=ev.policy)  # a caller's policy is not the run's


# ----------------------------------------------------------------------------- several processes' checkpoints
def test_with_several_processes_rank_0_writes_every_ranks_rng_and_the_others_write_nothing(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    manifest = RunManifest.create(run)
    waits = []
    monkeypatch.setattr(distributed, "barrier", lambda: waits.append(1))
    other = _checkpoints(run, dist=OTHER_RANK)
    monkeypatch.setattr(distributed, "gather_objects", lambda obj, n: None)  # rank 0 gathers
    assert other.save(2, HISTORY, None) is None and waits == [1]
    assert not (run / "checkpoints").exists()
    sizes = []
    monkeypatch.setattr(distributed, "gather_objects", lambda obj, n: (sizes.append(n), [obj, {"rank": 1}])[1])
    main = _checkpoints(run, dist=distributed.DistInfo(rank=0, world_size=2))
    path = main.save(2, HISTORY, manifest)
    data = load_checkpoint(path)
    assert data["distributed"]["world_size"] == 2 and data["distributed"]["rng"][1] == {"rank": 1}
    assert set(data["distributed"]["rng"][0]) == set(data["rng"]) and waits == [1, 1] and sizes == [2]


def test_each_rank_resumes_its_own_rng_stream(tmp_path, monkeypatch):
    from trainers.runs.checkpoint import capture_rng

    run, manifest, ck, path = _saved_run(tmp_path)
    data = load_checkpoint(path)
    torch.manual_seed(1234)
    rank1 = capture_rng()
    draw1 = torch.rand(2)
    data["distributed"] = {"world_size": 2, "rng": [data["rng"], rank1]}
    path = save_checkpoint(run, 3, data)
    resumed = _checkpoints(run, dist=distributed.DistInfo(rank=1, world_size=2))
    resumed.resume(str(path))
    assert torch.equal(torch.rand(2), draw1)


def test_a_teachers_ema_is_restored_only_where_both_the_run_and_the_checkpoint_have_one(tmp_path):
    run, manifest, ck, path = _saved_run(tmp_path, teacher=None)
    assert "teacher_ema" not in load_checkpoint(path)
    teacher = _Teacher()
    _checkpoints(run, teacher=teacher).resume("latest")
    assert teacher.ema is None  # nothing saved: the teacher starts its own EMA
    data = load_checkpoint(path)
    data["teacher_ema"] = torch.nn.Linear(3, 2).state_dict()
    later = save_checkpoint(run, 3, data)
    assert _checkpoints(run, teacher=None).resume(str(later))[1] == 3  # a run without a teacher ignores it


def test_a_run_id_that_is_not_text_counts_as_none(tmp_path):
    run, manifest, ck, path = _saved_run(tmp_path)
    data = load_checkpoint(path)
    data["run_id"] = 12345
    target = _checkpoints(_dir_without_ids(tmp_path, None, None))
    target.check_owner(path, data)
    assert target.resumed_run_id is None


def test_claim_refuses_a_used_dir_unless_resumed_or_overwritten(tmp_path):
    from trainers.runs.run_dir import RunDirError

    run, manifest, ck, path = _saved_run(tmp_path)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in HISTORY))
    manifest.record(run / "metrics.jsonl")
    with pytest.raises(RunDirError):
        _checkpoints(run).claim(resume=False, overwrite=False)
    _checkpoints(run).claim(resume=True, overwrite=False).release()
    assert (run / "metrics.jsonl").exists()
    _checkpoints(run).claim(resume=False, overwrite=True).release()
    assert not (run / "metrics.jsonl").exists()


def test_an_fsdp2_checkpoint_holds_the_full_state_gathered_from_the_shards(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    full_model, full_optimizer = {"weight": torch.ones(2, 3), "bias": torch.ones(2)}, {"state": {}, "param_groups": []}
    asked = []
    monkeypatch.setattr(
        distributed, "full_state_dicts", lambda m, o: (asked.append((m, o)), (full_model, full_optimizer))[1]
    )
    monkeypatch.setattr(distributed, "gather_objects", lambda obj, n: [obj, obj])
    monkeypatch.setattr(distributed, "barrier", lambda: None)
    ck = _checkpoints(run, dist=distributed.DistInfo(rank=0, world_size=2, strategy="fsdp2"))
    data = load_checkpoint(ck.save(1, HISTORY[:1], RunManifest.create(run)))
    assert asked == [(ck.model, ck.optimizer)]
    assert all(torch.equal(data["model"][k], v) for k, v in full_model.items()) and data["optimizer"] == full_optimizer
    plain = _checkpoints(tmp_path / "plain", dist=distributed.DistInfo(rank=0, world_size=2, strategy="ddp"))
    (tmp_path / "plain").mkdir()
    data = load_checkpoint(plain.save(1, HISTORY[:1], None))
    assert len(asked) == 1 and all(torch.equal(data["model"][k], v) for k, v in plain.model.state_dict().items())


def test_the_per_iteration_line_is_printed_only_where_no_bar_is_drawn_and_flushed_at_once(tmp_path, monkeypatch, bars):
    import trainers.runs.records as records

    class Stderr:
        def __init__(self) -> None:
            self.text, self.flushes = "", 0

        def write(self, s: str) -> int:
            self.text += s
            return len(s)

        def flush(self) -> None:
            self.flushes += 1

    asked = []
    recorder, manifest, _ = _recorder(tmp_path, iterations=2, progress_bars=True)
    recorder.start(manifest, [], None)
    err = Stderr()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(records, "bars_shown", lambda enabled: (asked.append(enabled), False)[1])
    recorder.iteration_done({"iteration": 1})
    assert asked == [True] and err.text.startswith("iteration 1/2:") and err.flushes >= 1
    monkeypatch.setattr(records, "bars_shown", lambda enabled: True)  # a terminal: the bar says it
    recorder.iteration_done({"iteration": 2})
    assert err.text.count("\n") == 1
    recorder.close()


def test_old_field_names_in_a_checkpoint_and_a_flat_config_yaml_resume_without_a_deprecation_line(tmp_path, capsys):
    run, manifest, ck, path = _saved_run(tmp_path)
    data = load_checkpoint(path)
    data.pop("run_id")
    data["config"]["init"] = data["config"].pop("warm_start")  # written before warm_start had its name
    later = save_checkpoint(run, 3, data)
    flat = config_for_tests(output_dir=str(run)).to_dict()
    flat["init"] = flat.pop("warm_start")
    d = _dir_without_ids(tmp_path, flat, HISTORY)  # a run dir of a version before sections and renames
    capsys.readouterr()
    assert _checkpoints(d).resume(str(later))[0] == HISTORY
    assert "deprecated" not in capsys.readouterr().err  # the user's own config was not written in these names


def test_the_history_in_metrics_jsonl_is_compared_whatever_the_order_of_its_keys(tmp_path):
    run, manifest, ck, path = _saved_run(tmp_path)
    data = load_checkpoint(path)
    data.pop("run_id")
    data["history"] = [dict(reversed(list(r.items()))) for r in HISTORY]  # keys in no sorted order
    d = _dir_without_ids(tmp_path, None, None)
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in HISTORY))
    _checkpoints(d).check_owner(path, data)


def test_an_existing_manifest_is_kept_with_its_id_and_files(tmp_path):
    d = _dir_without_ids(tmp_path, None, None)
    manifest = RunManifest.create(d, "f" * 32)
    manifest.record(d / "notes.txt")
    target = _checkpoints(d)
    target.resumed_run_id = "0" * 32
    opened = target.open_manifest()
    assert opened.run_id == "f" * 32 and opened.files == {"notes.txt"}


def test_each_refusal_of_a_resume_names_the_checkpoint(tmp_path):
    run, manifest, ck, path = _saved_run(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    RunManifest.create(other)
    with pytest.raises(CheckpointError) as refused:
        _checkpoints(other).resume(str(path))
    assert str(refused.value).startswith(f"checkpoint {path} belongs to another run than the one in {other}")
    with pytest.raises(CheckpointError) as refused:
        _checkpoints(run, shape=(4, 2)).resume(str(path))
    assert str(refused.value).startswith(f"checkpoint {path} does not match this model/optimizer")


def test_a_config_yaml_whose_sections_cannot_be_read_is_not_the_checkpoints(tmp_path):
    from trainers.runs.run_checkpoints import _same_config

    cfg = config_for_tests()
    sections = cfg.to_sections()
    sections["ppo"] = 3  # a section written as a scalar
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(sections))
    assert _same_config(tmp_path / "config.yaml", {"seed": cfg.seed}) is False


@pytest.mark.parametrize("resumed_at", [None, 1])
def test_a_wandb_run_gets_the_runs_config_dir_and_kept_id_and_its_id_file_is_listed(tmp_path, monkeypatch, resumed_at):
    """The W&B path with stand-ins for W&B itself (the extra is optional): what the recorder hands
    the settings and the logger."""
    import trainers.config_checks as checks
    import trainers.runs.records as records

    monkeypatch.setattr(checks, "_check_report_to", lambda cfg: None)  # W&B's extra need not be installed
    seen: dict = {}

    class Logger:
        def __init__(self, run_dir, tensorboard, wandb, config, resume_after) -> None:
            seen["logger"] = (run_dir, tensorboard, wandb, config, resume_after)
            self.files = [run_dir / "metrics.jsonl"]

        def close(self) -> None:
            pass

    monkeypatch.setattr(
        records, "wandb_run_id", lambda run_dir, resuming: (seen.update(id=(run_dir, resuming)), "id7")[1]
    )
    monkeypatch.setattr(
        records,
        "wandb_settings",
        lambda config, run_dir, run_id: (seen.update(settings=(config, run_dir, run_id)), {"mode": "offline"})[1],
    )
    monkeypatch.setattr(records, "MetricsLogger", Logger)
    monkeypatch.setattr(records, "restore_for_resume", lambda *a: (None, None))
    recorder, manifest, run = _recorder(tmp_path, report_to="wandb,tensorboard", tensorboard=True)
    recorder.start(manifest, HISTORY[:1] if resumed_at else [], resumed_at)
    config = config_for_tests(output_dir=str(run), report_to="wandb,tensorboard", tensorboard=True).to_dict()
    assert seen["id"] == (run, resumed_at is not None)
    assert seen["settings"] == (config, run, "id7")
    assert seen["logger"] == (run, True, {"mode": "offline"}, config, resumed_at)
    assert records.WANDB_ID_FILE in RunManifest.load(run).files
    recorder.close()


def test_without_wandb_the_logger_gets_no_wandb_settings(tmp_path, monkeypatch):
    import trainers.runs.records as records

    seen = []
    real = records.MetricsLogger
    monkeypatch.setattr(records, "MetricsLogger", lambda *a, **kw: (seen.append(kw), real(*a, **kw))[1])
    recorder, manifest, run = _recorder(tmp_path, report_to="tensorboard", tensorboard=False)
    recorder.start(manifest, [], None)
    recorder.close()
    assert (
        seen[0]["wandb"] is None
        and seen[0]["tensorboard"] is False
        and records.WANDB_ID_FILE not in RunManifest.load(run).files
    )


def test_a_checkpoint_that_kept_no_config_resumes_under_the_values_it_implies(tmp_path):
    """A checkpoint without its config (as a foreign tool might write it) is compared with what a
    missing field means (its earlier value, else its default): a run on those resumes it, another
    config is refused by name."""
    from trainers.config import EARLIER_VALUES, TrainConfig
    from trainers.runs.run_checkpoints import RunCheckpoints

    run, manifest, ck, path = _saved_run(tmp_path)
    data = load_checkpoint(path)
    data.pop("config")
    data.pop("run_id")
    bare = save_checkpoint(run, 3, data)
    model = torch.nn.Linear(3, 2)
    implied = TrainConfig(output_dir=str(run), **EARLIER_VALUES)
    default = RunCheckpoints(run_section(implied), model, torch.optim.AdamW(model.parameters()), MAIN)
    assert default.resume(str(bare))[0] == HISTORY
    with pytest.raises(CheckpointError, match=r"\(lr differ\)"):
        RunCheckpoints(
            run_section(TrainConfig(output_dir=str(run), lr=0.5, **EARLIER_VALUES)),
            model,
            torch.optim.AdamW(model.parameters()),
            MAIN,
        ).resume(str(bare))


def test_the_sections_carry_what_they_derive_from_the_config():
    from trainers.config import TrainConfig
    from trainers.loop.sections import rollout_section, update_section

    assert rollout_section(TrainConfig(step_timeout=7.0)).step_timeout == 7.0
    assert rollout_section(TrainConfig()).step_timeout == TrainConfig().resolved_step_timeout
    assert update_section(TrainConfig(backend="vllm", policy_mode="generate", warm_start="none")).vllm is True
    assert update_section(TrainConfig()).vllm is False
