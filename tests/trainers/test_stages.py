"""The loop's stages, each on its own with fake collaborators: the numbers each hands on.

credit (the shuffled-coverage control's permutation per iteration), updater (which steps take a
loss; the KL reference after the warm start), collector (each shard's slice of the task schedule),
evaluator (the random baseline's figure does not depend on the eval streams), records (the run's
tau_R reaches the metrics), HGPO's history clusters at the largest state id.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from trainers.loop.sections import credit_section, eval_section, rollout_section, update_section

sys.path.insert(0, str(Path(__file__).parent))

from fake_rollouts import TablePolicy, step_record
from tiny_config import config_for_tests

from trainers import distributed
from trainers.rollouts.rollout import Rollout, Trajectory


def _rollout(outcomes: list[list[float]], lengths: list[list[int]], fresh: list[list[int]] | None = None) -> Rollout:
    """Groups of members with these outcomes and lengths, each member's first ``fresh`` steps
    reaching a state first (all of them by default)."""
    trajs, steps = [], []
    fresh = fresh or lengths
    for g, (outs, lens, news) in enumerate(zip(outcomes, lengths, fresh)):
        for m, (outcome, n, new) in enumerate(zip(outs, lens, news)):
            j = len(trajs)
            trajs.append(
                Trajectory(
                    group=g, member=m, task_id=f"t{g}", task_type="pick", outcome=outcome, length=n, won=outcome >= 1.0
                )
            )
            states = [f"g{g}m{m}s{t}" for t in range(n + 1)]
            rewards = [outcome if t == n - 1 else 0.0 for t in range(n)]
            steps += [step_record(j, t, states[t], states[t + 1], t < new, rewards[t]) for t in range(n)]
    return Rollout(steps=steps, trajectories=trajs)


# ----------------------------------------------------------------------------- credit
def test_the_shuffled_coverage_control_draws_a_new_permutation_each_iteration():
    from trainers.loop.credit import CreditAssigner

    cfg = config_for_tests(estimator="progpo-gigpo", shuffle_coverage=True, group_size=6, num_groups=1)
    # all failed: the progress term acts, on coverage shuffled within the group
    rollout = _rollout([[0.0] * 6], [[6] * 6], [[1, 2, 3, 4, 5, 6]])
    credit = CreditAssigner(credit_section(cfg))
    by_iteration = [credit.assign(rollout, it).steps for it in range(1, 7)]
    np.testing.assert_array_equal(credit.assign(rollout, 3).steps, by_iteration[2])  # the same iteration: the same
    assert len({a.tobytes() for a in by_iteration}) > 1  # another iteration: another permutation
    other_seed = CreditAssigner(credit_section(dataclasses.replace(cfg, seed=cfg.seed + 1)))
    assert any(not np.array_equal(other_seed.assign(rollout, it).steps, a) for it, a in enumerate(by_iteration, 1))


# ----------------------------------------------------------------------------- updater
def _updater(**overrides):
    from trainers.loop.updater import Updater

    cfg = config_for_tests(**overrides)
    policy = SimpleNamespace(model=torch.nn.Linear(3, 2))
    return Updater(update_section(cfg), policy, distributed.DistInfo(), torch.device("cpu"))


@pytest.mark.parametrize(
    "overrides, kept",
    [
        ({"skip_zero_advantage": True}, [1, 3]),
        ({"skip_zero_advantage": True, "entropy_coef": 0.01}, [0, 1, 2, 3]),  # entropy acts on every step
        ({"skip_zero_advantage": True, "kl_coef": 0.1}, [0, 1, 2, 3]),  # so does the KL term
        ({"skip_zero_advantage": False}, [0, 1, 2, 3]),
    ],
)
def test_zero_advantage_steps_are_skipped_only_when_no_other_term_acts_on_them(overrides, kept):
    assert _updater(**overrides)._chosen(np.array([0.0, 0.5, 0.0, -0.2]), None) == kept


def test_the_kl_reference_is_the_policy_after_the_warm_start(tmp_path):
    """RL starts from the cloned policy: iteration 1's first pass has KL 0 to its reference."""
    from trainers.loop.trainer import Trainer

    flags = "--env alfworld --warm-start bc --bc-steps 3 --bc-lr 5e-2 --kl-coef 0.1 --eval-episodes 0 --max-steps 6"
    cfg = config_for_tests(flags, output_dir=str(tmp_path / "run"))
    trainer = Trainer(cfg)
    try:
        before = {k: v.clone() for k, v in trainer.updater.ref_model.state_dict().items()}
        trainer.warm_start()
        model, ref = trainer.updater.model.state_dict(), trainer.updater.ref_model.state_dict()
        assert any(not torch.equal(before[k], model[k]) for k in model)  # the warm start moved the policy
        assert all(torch.equal(model[k], ref[k]) for k in model)  # and the reference followed it
    finally:
        trainer.close()


# ----------------------------------------------------------------------------- collector
def test_shards_play_disjoint_slices_whose_union_is_the_unsharded_schedule():
    from trainers.loop.collector import Rollouts
    from trainers.seeds import task_seeds

    cfg = config_for_tests(num_groups=6, group_size=2)
    played: dict[int, list[int]] = {}

    class Fake:
        def collect(self, envs, policy, tasks, seed, on_step):
            played[seed] = list(tasks)
            return Rollout()

    envs = SimpleNamespace(worker_restarts=0, member_errors=0, close=lambda: None)
    rollouts = Rollouts(
        rollout_section(cfg),
        SimpleNamespace(model=torch.nn.Linear(1, 1)),
        lambda: None,
        distributed.DistInfo(),
        range(6),
        lambda: torch.autocast("cpu", enabled=False),
    )
    rollouts.collector, rollouts.envs = Fake(), envs
    for k in range(3):
        rollouts.rollout(3, distributed.shard_groups(6, 3, k), k)
    whole = list(task_seeds(cfg.seed, 3, 6))
    slices = list(played.values())
    assert len(slices) == 3 and slices[0] + slices[1] + slices[2] == whole  # in order, each group once
    assert [len(s) for s in slices] == [2, 2, 2]


# ----------------------------------------------------------------------------- evaluator
def test_the_random_baselines_figure_does_not_depend_on_the_eval_streams():
    from trainers.envs import make_env_fn
    from trainers.loop.evaluator import Evaluator

    def baseline(streams: int) -> dict:
        cfg = config_for_tests(eval_episodes=12, eval_streams=streams, max_steps=5)
        fn = make_env_fn(cfg.env, cfg.splits[1], cfg.max_steps, cfg.state_key)
        ev = Evaluator(
            eval_section(cfg),
            SimpleNamespace(model=torch.nn.Linear(1, 1)),
            fn,
            distributed.DistInfo(),
            torch.device("cpu"),
            lambda: torch.autocast("cpu", enabled=False),
        )
        return ev.random_baseline(0)

    one, two = baseline(1), baseline(2)
    assert one["eval/won"] == two["eval/won"] and one["eval/success"] == two["eval/success"]
    assert one["eval/panel"] == two["eval/panel"] and one["kind"] == "baseline"


# ----------------------------------------------------------------------------- records
@pytest.mark.parametrize("tau_r, failed", [(1.0, 1.0), (0.4, 0.0)])
def test_the_runs_tau_r_reaches_the_recorded_metrics(tau_r, failed):
    from trainers.loop.credit import CreditAssigner
    from trainers.loop.train_record import train_record

    cfg = config_for_tests(tau_r=tau_r, num_groups=1)
    rollout = _rollout([[0.5, 0.5]], [[2, 3]])  # partial scores: all-failed only under tau_r above 0.5
    credit = CreditAssigner(credit_section(cfg)).assign(rollout, 1)
    rec = train_record(
        cfg,
        CreditAssigner(credit_section(cfg)).adv_cfg,
        1,
        rollout,
        credit,
        {},
        {},
        (0.0, 0.0, 0.0),
        distributed.DistInfo(),
        torch.device("cpu"),
    )
    assert rec["all_failed_frac"] == failed
    assert bool(credit.all_failed[0]) == bool(failed)


# ----------------------------------------------------------------------------- HGPO's clusters
def test_history_clusters_never_collide_at_the_largest_state_id():
    """Two histories that differ only in holding the largest state id (or not) stay apart at every
    depth: a key's offset for the previous state runs 1..max+1 and 0 is the invalid history's, so
    the id space needs max+1 slots per level (see scripts/mutation_equivalent.txt)."""
    from trainers.advantages.hgpo import history_clusters

    # one group; trajectory 0 goes 0 -> 2 (the largest id) -> 1, trajectory 1 goes 0 -> 1 -> 1,
    # trajectory 2 goes 2 -> 0 -> 1: at t = 2 all three stand on state 1 with other histories
    traj = np.repeat([0, 1, 2], 3)
    t = np.tile([0, 1, 2], 3)
    states = np.array([0, 2, 1, 0, 1, 1, 2, 0, 1])
    c = history_clusters(np.zeros(9, int), traj, t, states, depth=2)
    last = [2, 5, 8]
    assert len(set(c.ids[0, last])) == 1  # depth 0: the same state
    assert len(set(c.ids[1, last])) == 3 and len(set(c.ids[2, last])) == 3  # their pasts differ: apart
    # brute force: two steps share a depth-k cluster exactly when their last k + 1 states match
    for k in range(3):
        for i in range(9):
            for j in range(9):
                if c.ids[k, i] < 0 or c.ids[k, j] < 0:
                    continue
                hist = [tuple(states[(traj == traj[x]) & (t >= t[x] - k) & (t <= t[x])]) for x in (i, j)]
                assert (c.ids[k, i] == c.ids[k, j]) == (hist[0] == hist[1])


def test_the_update_moves_each_step_by_its_advantage_and_reports_what_it_trained_on():
    from trainers.loop.updater import Updater

    policy = TablePolicy()
    flags = "--lr 0.1 --ppo-epochs 1 --num-minibatches 1 --skip-zero-advantage --loss-agg token-mean --clip-eps 10"
    cfg = config_for_tests(f"{flags} --batch-decisions off")
    updater = Updater(update_section(cfg), policy, distributed.DistInfo(), torch.device("cpu"))
    outputs = [policy.recorded(prompt, chosen) for prompt, chosen in ((0, 0), (1, 1), (2, 2))]
    steps = [SimpleNamespace(output=o, traj=j) for j, o in enumerate(outputs)]
    before = [float(policy.compute_logprobs_and_entropy([o])[0][0]) for o in outputs]
    stats = updater.update(steps, np.array([1.0, -1.0, 0.0]), iteration=1)
    after = [float(policy.compute_logprobs_and_entropy([o])[0][0]) for o in outputs]
    assert after[0] > before[0] and after[1] < before[1]  # up with a positive advantage, down with a negative
    assert after[2] == before[2]  # a zero-advantage step skipped: its row untouched
    assert stats["update/steps"] == 2.0 and stats["update/optimizer_steps"] == 1.0
    assert stats["update/input_tokens"] == 2 * (1 + 3) and stats["update/lr"] == pytest.approx(0.1)
    assert policy.synced == 1  # the sampler follows the new weights
