"""Multi-process training: 2 gloo ranks under torchrun vs 1 process on the same global batch.

The reference is one process that collects the same two group shards one after the other
(shard k sampled with ``shard_seed(..., k)``, exactly what rank k does) and updates on their
union. Rollouts, advantages and metrics are then equal; the parameters after the update differ
only by the order of floating-point sums (each rank sums its own micro-batches, then the
all-reduce adds the two partial gradients): a relative difference of ~1e-7 in the gradient.
AdamW's first step moves each weight by ``lr * g / (|g| + eps)``, so a gradient entry that is
itself at rounding level could move by up to ``2 * lr`` in the worst case; every
parameter was measured within 2e-6 of the reference (lr 1e-3: 0.2% of one step's size), and the
test uses ``atol=1e-5`` (1% of one step): far below a step, far above the measured rounding. Both sides score one
decision per forward pass (``--batch-decisions off``): packed passes group a rank's steps
differently from the single process's, which changes the rounding of every logit, not just the
order of the gradient sums this test bounds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_rollouts import step_record

from trainers.config_flags import parse_args
from trainers.distributed import shard_groups, shard_seed
from trainers.loop.trainer import Trainer
from trainers.runs.checkpoint import load_checkpoint
from trainers.runs.metrics import TIMING_KEYS, read_metrics
from trainers.sharding import merge_rollouts

ROOT = Path(__file__).resolve().parents[2]
ARGS = (
    "--env rooms --model tiny --iterations 1 --num-groups 4 --group-size 2 --max-steps 4 "
    "--eval-episodes 0 --no-progress-bars --no-tensorboard --device cpu --no-lora --history-k 2 --lr "
    "1e-3 --env-backend sync --no-baseline-random --num-minibatches 1 --micro-batch-size 2 "
    "--warm-start none --seed 3 --score-norm mean --batch-decisions off"
).split()


class ShardedReference(Trainer):
    """One process playing the shards of ``world`` ranks one after the other, then one update."""

    world = 2

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rollouts.shard = shard_groups(self.cfg.num_groups, self.world, 0)  # the envs hold one shard's groups

    def rollout(self, iteration):
        parts = [
            self.rollouts.rollout(iteration, shard_groups(self.cfg.num_groups, self.world, r), r)
            for r in range(self.world)
        ]
        return merge_rollouts(parts)


def test_shard_helpers():
    assert [list(shard_groups(4, 2, r)) for r in range(2)] == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="multiple of the number of processes"):
        shard_groups(3, 2, 0)
    assert shard_seed(7, 0) == 7 and len({shard_seed(7, r) for r in range(4)}) == 4


def test_merged_shards_number_groups_members_and_steps_past_the_previous_shards():
    from trainers.rollouts.rollout import Rollout, Trajectory

    def shard(n_groups: int, seconds: float) -> Rollout:
        trajs = [
            Trajectory(group=g, member=2 * g + m, task_id=f"t{g}", task_type="x")
            for g in range(n_groups)
            for m in range(2)
        ]
        steps = [step_record(i, 0) for i in range(len(trajs))]
        return Rollout(steps=steps, trajectories=trajs, seconds=seconds, response_tokens=5)

    out = merge_rollouts([shard(2, 3.0), shard(1, 4.0)])
    assert [t.group for t in out.trajectories] == [0, 0, 1, 1, 2, 2]
    assert [t.member for t in out.trajectories] == [0, 1, 2, 3, 4, 5]  # one vector env's members, as on one rank
    assert [s.traj for s in out.steps] == list(range(6)) and out.rows == [(i, i) for i in range(6)]
    assert out.seconds == 4.0 and out.response_tokens == 10  # the slowest shard's time, every shard's tokens


@pytest.mark.slow
def test_two_gloo_ranks_match_one_process_on_the_same_global_batch(tmp_path):
    run = tmp_path / "ddp"
    # PYTHONFAULTHANDLER: a rank that aborts in C++ (std::terminate) prints where its threads were
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        OMP_NUM_THREADS="1",
        GLOO_SOCKET_IFNAME="lo",
        MASTER_ADDR="127.0.0.1",
        PYTHONFAULTHANDLER="1",
    )
    cmd = [
        sys.executable,
        *"-m torch.distributed.run --standalone --nproc-per-node 2 -m trainers.progpo".split(),
        *ARGS,
        "--output-dir",
        str(run),
    ]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[:4000] + "\n...\n" + out.stderr[-1500:]  # the ranks' own lines come first
    assert out.stdout.count("report:") == 1  # rank 0 alone reports

    cfg, _ = parse_args([*ARGS, "--output-dir", str(tmp_path / "ref")])
    ref = ShardedReference(cfg)
    ref.train()
    ref_state = {k: v.detach().clone() for k, v in ref.model.state_dict().items()}

    ddp_state = load_checkpoint(run / "checkpoints" / "iter_000001.pt")["model"]
    assert ddp_state.keys() == ref_state.keys()
    worst = max(float((ddp_state[k].float() - ref_state[k].float()).abs().max()) for k in ref_state)
    print(f"max |ddp - reference| over all parameters: {worst:.3g}")
    assert worst < 1e-5, worst
    initial = ShardedReference(cfg).model.state_dict()  # the update really moved the weights
    assert max(float((initial[k] - ref_state[k]).abs().max()) for k in ref_state) > 1e-4

    ddp_rec = [r for r in read_metrics(run / "metrics.jsonl") if r.get("kind") == "train"]
    ref_rec = [r for r in read_metrics(tmp_path / "ref" / "metrics.jsonl") if r.get("kind") == "train"]
    assert len(ddp_rec) == len(ref_rec) == 1
    a, b = (
        {k: v for k, v in r.items() if k not in TIMING_KEYS and not k.startswith("time/")}
        for r in (ddp_rec[0], ref_rec[0])
    )
    assert a.keys() == b.keys()
    for key in a:
        if (
            isinstance(a[key], float)
            and key.startswith("update/")
            and key != "update/steps"
            and key != "update/optimizer_steps"
        ):
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), key  # summed in another order
        else:
            assert a[key] == b[key], key
    assert a["update/steps"] > 0 and a["env_steps"] == b["env_steps"]
    # only rank 0 wrote files; resume needs the same world size
    assert sorted(p.name for p in run.iterdir()) == sorted(p.name for p in (tmp_path / "ref").iterdir())
    one_proc = subprocess.run(
        [sys.executable, "-m", "trainers.progpo", *ARGS, "--iterations", "2", "--output-dir", str(run), "--resume"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert one_proc.returncode == 2 and "written by 2 process(es)" in one_proc.stderr, one_proc.stderr[-2000:]


def test_rollout_streams_play_what_ranks_would_play(tmp_path, monkeypatch):
    """``--rollout-streams 2``: block 1 of the groups in a forked process, block 0 here, merged
    in order: over two iterations the records and the weights are those of the one-process
    reference that plays both blocks itself (each sampled as its rank would)."""
    import os

    import torch

    import trainers.forked

    def train(out, extra, cls):
        cfg, _ = parse_args([*ARGS, "--iterations", "2", "--output-dir", str(tmp_path / out), *extra])
        trainer = cls(cfg)
        trainer.train()
        state = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
        recs = [
            {k: v for k, v in r.items() if k not in TIMING_KEYS and not k.startswith("time/")}
            for r in read_metrics(tmp_path / out / "metrics.jsonl")
            if r.get("kind") == "train"
        ]
        return state, recs

    forked_pids = []
    run_forked = trainers.forked.run_forked

    def recording(jobs, **kw):  # run_forked, noting the process each share ran in
        def pid_of(job):
            return lambda step: (job(step), os.getpid())

        out = run_forked([pid_of(j) for j in jobs], **kw)
        forked_pids.append([pid for _, pid in out])
        return [r for r, _ in out]

    monkeypatch.setattr(trainers.forked, "run_forked", recording)
    streamed, streamed_recs = train("streams", ["--rollout-streams", "2"], Trainer)
    monkeypatch.undo()
    reference, reference_recs = train("ref", [], ShardedReference)
    assert len(forked_pids) == 2 and all(p[0] == os.getpid() != p[1] for p in forked_pids)
    assert streamed_recs == reference_recs and len(streamed_recs) == 2
    assert all(torch.equal(streamed[k], reference[k]) for k in reference)


def test_rollout_streams_are_refused_where_they_cannot_run():
    from trainers.config import ConfigError, TrainConfig

    for kwargs, match in [
        ({"num_groups": 3}, "multiple of it"),
        ({"env_backend": "async"}, "env-backend sync"),
        ({"policy_mode": "generate", "warm_start": "none"}, "score mode"),
        ({"rollout": "tree"}, "tree rollout"),
        ({"device": "cuda"}, "cannot use CUDA"),
    ]:
        with pytest.raises(ConfigError, match=match):
            TrainConfig(rollout_streams=2, **kwargs)
    assert TrainConfig(rollout_streams=2, num_groups=4).rollout_streams == 2
