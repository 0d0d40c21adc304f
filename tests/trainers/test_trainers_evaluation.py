"""Held-out evaluation: fixed episode plans, paired bootstrap, the RL-gain headline, baseline policy."""

from __future__ import annotations

import json
import re
import threading

import numpy as np
import pytest
from tiny_config import QUIET, config_from_flags

from trainers.envs import make_env_fn
from trainers.rollouts.eval_episodes import EvalPlan, random_baseline, run_eval
from trainers.runs.summary import rl_gain, write_report
from trainers.statistics import paired_bootstrap_ci


def test_plan_spreads_episodes_evenly_over_tasks():
    plan = EvalPlan.for_episodes("easy-valid", ["a", "b", "c"], 7, seed=3)
    assert plan.episodes_per_task == 3 and plan.num_episodes == 9 >= 7
    assert plan.episodes() == ["a"] * 3 + ["b"] * 3 + ["c"] * 3
    seeds_only = EvalPlan.for_episodes("x", [], 4, seed=0)
    assert seeds_only.num_episodes == 4


def test_paired_bootstrap_ci():
    rng = np.random.default_rng(0)
    start = (rng.random(144) < 0.2).astype(int)
    same = paired_bootstrap_ci(start, start, seed=0)
    assert same == (0.0, 0.0, 0.0)
    better = start.copy()
    better[np.flatnonzero(start == 0)[:30]] = 1  # 30 more wins out of 144
    diff, lo, hi = paired_bootstrap_ci(start, better, seed=0)
    assert diff == pytest.approx(30 / 144) and 0 < lo < diff < hi
    noisy = (rng.random(144) < 0.2).astype(int)  # an independent draw at the same rate
    _, lo, hi = paired_bootstrap_ci(start, noisy, seed=0)
    assert lo < 0 < hi
    with pytest.raises(ValueError, match="equal-length"):
        paired_bootstrap_ci([1, 0], [1])


def test_rl_gain_reads_start_and_last_eval(tmp_path):
    start = [0] * 100 + [1] * 44
    end = [1] * 30 + [0] * 70 + [1] * 44
    recs = [
        {
            "iteration": 0,
            "kind": "eval",
            "eval/split": "easy-valid",
            "eval/episodes": 144,
            "eval/success": np.mean(start),
            "eval/won": start,
        },
        {"iteration": 0, "kind": "baseline", "eval/split": "easy-valid", "eval/episodes": 144, "eval/success": 0.02},
        {"iteration": 1, "kind": "train", "success": 0.3, "all_failed_frac": 0.5, "coverage_rate": 0.4},
        {
            "iteration": 1,
            "kind": "eval",
            "eval/split": "easy-valid",
            "eval/episodes": 144,
            "eval/success": np.mean(end),
            "eval/won": end,
        },
    ]
    g = rl_gain(recs)
    assert g["start"] == pytest.approx(44 / 144) and g["end"] == pytest.approx(74 / 144)
    assert g["diff"] == pytest.approx(30 / 144) and g["ci"][0] > 0
    summary = write_report(tmp_path, recs, {"estimator": "progpo-grpo", "env": "alfworld"}).read_text()
    assert "What RL changed" in summary and "excludes 0: RL improved" in summary and "random" in summary
    assert (tmp_path / "curves.png").stat().st_size > 0
    assert rl_gain(recs[:1]) is None  # a single evaluation: nothing to compare


def test_the_report_gives_the_mean_score_where_partial_credit_exists(tmp_path):
    start, end = [0.0, 0.5, 0.0, 1.0], [0.25, 0.75, 0.0, 1.0]  # WebShop-like scores: partial purchases count
    recs = [
        {
            "iteration": i,
            "kind": "eval",
            "eval/split": "valid",
            "eval/episodes": 4,
            "eval/success": np.mean([x == 1.0 for x in sc]),
            "eval/won": [int(x == 1.0) for x in sc],
            "eval/score": sc,
        }
        for i, sc in ((0, start), (3, end))
    ]
    g = rl_gain(recs)
    assert g["score"]["start"] == pytest.approx(0.375) and g["score"]["diff"] == pytest.approx(0.125)
    lo, hi = g["score"]["ci"]
    summary = write_report(tmp_path, recs, {"estimator": "gigpo", "env": "webshop"}).read_text()
    assert (
        f"- Mean score (partial credit counts): 0.375 -> 0.500, difference **+0.125** (95% paired bootstrap CI "
        f"[{lo:+.3f}, {hi:+.3f}])."
    ) in summary
    whole = [{**r, "eval/score": [float(w) for w in r["eval/won"]]} for r in recs]  # scores are the wins: no line
    assert "Mean score" not in write_report(tmp_path, whole, {"estimator": "gigpo", "env": "rooms"}).read_text()


def test_run_eval_is_reproducible_and_random_policy_skips_passive_commands():
    fn = make_env_fn("rooms", "valid", max_steps=6)
    plan = EvalPlan.for_episodes("valid", [], 5, seed=1)
    a = run_eval(random_baseline(0), fn, plan, batch=2)
    b = run_eval(random_baseline(0), fn, plan, batch=2)
    assert len(a.trajectories) == 5
    assert [t.won for t in a.trajectories] == [t.won for t in b.trajectories]
    assert [s.action for s in a.steps] == [s.action for s in b.steps]
    out = random_baseline(0).act(
        ["o"] * 20, [{"admissible_commands": ["look", "inventory", "examine x", "go to a"]}] * 20
    )
    assert {o.action for o in out} == {"go to a"}


class _ObservationPolicy:
    """Chooses from the observation alone (so its episodes do not depend on sampling seeds) and
    records the threads it acts in."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.threads: set[str] = set()
        self.calls, self.fail_after = 0, fail_after

    def act(self, observations, infos, histories=None, seed=None):
        from agents.contract import StepOutput

        self.threads.add(threading.current_thread().name)
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise RuntimeError("policy broke")
        return [
            StepOutput(action=sorted(i["admissible_commands"])[len(o) % len(i["admissible_commands"])])
            for o, i in zip(observations, infos)
        ]


def _thread_recording(fn, seen):
    import gymnasium as gym

    class Recorder(gym.Wrapper):
        def step(self, action):
            seen.add(threading.current_thread().name)
            return self.env.step(action)

        def reset(self, **kw):
            seen.add(threading.current_thread().name)
            return self.env.reset(**kw)

    return lambda: Recorder(fn())


def test_run_eval_in_streams_plays_the_same_episodes_with_env_calls_on_the_calling_thread():
    """Two streams: each plays its share of every chunk in a thread of its own, every env call
    runs in the calling thread (where a step timeout can be enforced), and the episodes are those
    of one stream, in plan order."""
    seen: set[str] = set()
    fn = _thread_recording(make_env_fn("rooms", "valid", max_steps=6), seen)
    plan = EvalPlan.for_episodes("valid", [], 7, seed=1)
    one, two = _ObservationPolicy(), _ObservationPolicy()
    a = run_eval(one, fn, plan, batch=4)
    seen_one = set(seen)
    seen.clear()
    b = run_eval(two, fn, plan, batch=4, streams=2)
    assert len(b.trajectories) == 7 and [t.group for t in b.trajectories] == list(range(7))
    assert [(t.task_id, t.won, t.length) for t in a.trajectories] == [
        (t.task_id, t.won, t.length) for t in b.trajectories
    ]
    assert sorted((s.traj, s.t, s.action) for s in a.steps) == sorted((s.traj, s.t, s.action) for s in b.steps)
    assert seen == seen_one == {threading.main_thread().name}
    assert one.threads == {threading.main_thread().name}
    assert len(two.threads) == 2 and threading.main_thread().name not in two.threads


def test_streams_are_dealt_the_episodes_of_a_chunk_in_turn(monkeypatch):
    """Episode i of a chunk goes to stream i mod streams (the copies of one task, which cost
    alike, spread over the streams); one stream plays each chunk in plan order."""
    from trainers.rollouts import eval_episodes as evaluation

    dealt: list[tuple[int, list[int]]] = []
    play = evaluation._EvalLane.play

    def spy(lane, indices):
        dealt.append((id(lane), list(indices)))
        return play(lane, indices)

    monkeypatch.setattr(evaluation._EvalLane, "play", spy)
    fn = make_env_fn("rooms", "valid", max_steps=6)
    plan = EvalPlan.for_episodes("valid", [], 7, seed=1)
    out = run_eval(_ObservationPolicy(), fn, plan, batch=2, streams=2)  # chunks of 4 episodes
    lanes: dict[int, list[int]] = {}
    for lane, indices in dealt:
        lanes.setdefault(lane, []).extend(indices)
    assert sorted(lanes.values()) == [[0, 2, 4, 6], [1, 3, 5]]
    assert [t.group for t in out.trajectories] == list(range(7))
    dealt.clear()
    run_eval(_ObservationPolicy(), fn, plan, batch=3)
    assert [indices for _, indices in dealt] == [[0, 1, 2], [3, 4, 5], [6]]


def test_run_eval_in_streams_raises_the_error_of_a_stream():
    fn = make_env_fn("rooms", "valid", max_steps=6)
    plan = EvalPlan.for_episodes("valid", [], 6, seed=1)
    with pytest.raises(RuntimeError, match="policy broke"):
        run_eval(_ObservationPolicy(fail_after=3), fn, plan, batch=6, streams=2)
    with pytest.raises(ValueError, match="streams must be >= 1"):
        run_eval(_ObservationPolicy(), fn, plan, streams=0)
    assert run_eval(_ObservationPolicy(), fn, EvalPlan("valid", (), 1, seed=0), streams=2).trajectories == []
    assert (
        len(run_eval(_ObservationPolicy(), fn, EvalPlan.for_episodes("valid", [], 1, seed=0), streams=3).trajectories)
        == 1
    )


def test_streams_split_the_torch_threads_and_an_env_error_reaches_the_stream_that_called(monkeypatch):
    """Each of two streams gets half the caller's torch threads (an int) and the caller gets its
    own back; an env call that raises on the calling thread raises that error in the stream that
    made it, and so out of run_eval."""
    import gymnasium as gym
    import torch

    class Threads(_ObservationPolicy):
        def act(self, observations, infos, histories=None, seed=None):
            self.threads.add(torch.get_num_threads())
            return super().act(observations, infos, histories, seed)

    before = torch.get_num_threads()
    torch.set_num_threads(4)
    try:
        policy = Threads()
        run_eval(
            policy,
            make_env_fn("rooms", "valid", max_steps=3),
            EvalPlan.for_episodes("valid", [], 4, seed=1),
            batch=4,
            streams=2,
        )
        assert {t for t in policy.threads if isinstance(t, int)} == {2} and torch.get_num_threads() == 4
    finally:
        torch.set_num_threads(before)

    class Broken(gym.Wrapper):
        def reset(self, **kw):
            raise ValueError("the env broke")

    fn = make_env_fn("rooms", "valid", max_steps=3)
    with pytest.raises(ValueError, match="the env broke"):
        run_eval(
            _ObservationPolicy(),
            lambda: Broken(fn()),
            EvalPlan.for_episodes("valid", [], 4, seed=1),
            batch=4,
            streams=2,
        )


def _pid_recording(fn, seen):
    import os

    import gymnasium as gym

    class Recorder(gym.Wrapper):
        def step(self, action):
            seen.append(os.getpid())
            return self.env.step(action)

    return lambda: Recorder(fn())


def test_run_eval_in_processes_plays_what_threads_play_and_counts_every_step():
    """Streams in forked processes: the same episodes and actions as streams in threads (and
    as one stream, for a policy that ignores sampling seeds); the first stream plays here, the
    other in a process of its own, whose steps still reach ``on_step``."""
    import os

    seen: list[int] = []
    fn = _pid_recording(make_env_fn("rooms", "valid", max_steps=6), seen)
    plan = EvalPlan.for_episodes("valid", [], 7, seed=1)
    threads = run_eval(_ObservationPolicy(), fn, plan, batch=4, streams=2)
    seen.clear()
    counted: list[int] = []
    policy = _ObservationPolicy()
    procs = run_eval(policy, fn, plan, batch=4, streams=2, processes=True, on_step=counted.append)
    assert [t.group for t in procs.trajectories] == list(range(7))
    assert [(t.task_id, t.won, t.length, t.outcome) for t in threads.trajectories] == [
        (t.task_id, t.won, t.length, t.outcome) for t in procs.trajectories
    ]
    assert [(s.traj, s.t, s.action, s.reward) for s in threads.steps] == [
        (s.traj, s.t, s.action, s.reward) for s in procs.steps
    ]
    assert set(seen) == {os.getpid()}  # the other stream's env calls were made in its own process
    assert sum(counted) == sum(t.length for t in procs.trajectories)
    assert policy.threads == {threading.main_thread().name}


class _FailElsewhere(_ObservationPolicy):
    """Breaks in any process but the one it was made in: ``how`` says how."""

    def __init__(self, how: str) -> None:
        import os

        super().__init__()
        self.home, self.how = os.getpid(), how

    def act(self, observations, infos, histories=None, seed=None):
        import os

        if os.getpid() != self.home:
            if self.how == "exit":
                os._exit(3)
            if self.how == "unpicklable":
                raise _Unpicklable("a", "b")
            raise ValueError("bad policy input")
        return super().act(observations, infos, histories, seed)


class _Unpicklable(Exception):
    def __init__(self, a, b):  # two arguments: pickle rebuilds it with one and fails
        super().__init__(f"{a}{b}")


@pytest.mark.parametrize(
    "how, error, match",
    [
        ("raise", ValueError, "bad policy input"),
        ("unpicklable", RuntimeError, "_Unpicklable: ab"),
        ("exit", RuntimeError, r"evaluation stream 1 ended \(exit code 3\)"),
    ],
)
def test_run_eval_in_processes_raises_what_broke_a_stream(how, error, match):
    import multiprocessing

    fn = make_env_fn("rooms", "valid", max_steps=6)
    plan = EvalPlan.for_episodes("valid", [], 6, seed=1)
    with pytest.raises(error, match=match):
        run_eval(_FailElsewhere(how), fn, plan, batch=6, streams=2, processes=True)
    assert multiprocessing.active_children() == []


def test_trainer_streams_in_processes_keep_the_records_of_streams_in_threads(tmp_path, alfworld_engine_available):
    """A real ALFWorld evaluation by the tiny model in score mode (tree passes): two streams in
    forked processes (the trainer's choice on the CPU) give the records of two streams in threads."""
    from trainers.loop.trainer import Trainer

    flags = "--model tiny --num-groups 2 --group-size 2 --max-steps 5 --eval-episodes 12 --batch-decisions tree"
    cfg = config_from_flags(f"{flags} {QUIET} --torch-threads 2 --eval-streams 2", output_dir=str(tmp_path))
    trainer = Trainer(cfg)
    assert trainer.evaluator.in_processes()
    in_processes = trainer.evaluate(0)
    trainer.evaluator.in_processes = lambda: False
    in_threads = trainer.evaluate(0)
    trainer.close()
    assert in_processes["eval/episodes"] == in_threads["eval/episodes"] >= 12
    for key in ("eval/won", "eval/score", "eval/success", "eval/coverage_rate", "eval/repeated_action_rate"):
        assert in_processes[key] == in_threads[key], key


@pytest.mark.slow
def test_trainer_logs_start_and_end_evals_with_bc(tmp_path, alfworld_engine_available):
    """The default pipeline, shrunk: bc warm start -> iteration-0 evals -> RL -> final evals."""
    from trainers.loop.trainer import Trainer

    flags = "--model tiny --iterations 1 --num-groups 2 --group-size 2 --max-steps 6 --bc-steps 5 --eval-episodes 6"
    cfg = config_from_flags(f"{flags} --eval-extra-episodes 3 {QUIET}", output_dir=str(tmp_path))
    report = Trainer(cfg).train()
    recs = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    kinds = [(r["iteration"], r["kind"]) for r in recs]
    assert kinds == [
        (0, "init"),
        (0, "baseline"),
        (0, "eval"),
        (0, "eval_extra"),
        (1, "train"),
        (1, "eval"),
        (1, "eval_extra"),
    ]
    evals = [r for r in recs if r["kind"] == "eval"]
    for r in evals:
        assert r["eval/split"] == "easy-valid" and r["eval/episodes"] == 36 and 0 <= r["eval/success"] <= 1
        assert len(r["eval/won"]) == 36
    assert [r["eval/split"] for r in recs if r["kind"] == "eval_extra"] == ["valid", "valid"]
    assert recs[0]["bc/demos"] > 100 and recs[0]["bc/expert_success"] > 0  # 6 steps: the expert wins a few
    assert "What RL changed" in report.read_text()


def test_cpu_demo_yaml_is_the_default():
    """configs/alfworld_cpu_demo.yaml writes out exactly what `python -m trainers.progpo` runs."""
    from pathlib import Path

    from trainers.config import TrainConfig, load_yaml

    yaml_cfg = TrainConfig.from_dict(load_yaml(Path(__file__).resolve().parents[2] / "configs/alfworld_cpu_demo.yaml"))
    default = TrainConfig()
    assert yaml_cfg.splits == default.splits == ("easy-train", "easy-valid")
    assert yaml_cfg.resolved_warm_start == default.resolved_warm_start == "bc"
    assert yaml_cfg.resolved_template == default.resolved_template == "alfworld-notes"
    assert yaml_cfg.resolved_eval_extra_split == default.resolved_eval_extra_split == "valid"
    auto = {"train_split", "eval_split", "warm_start", "template", "eval_extra_split"}
    differ = {k for k, v in yaml_cfg.to_dict().items() if k not in auto and v != getattr(default, k)}
    assert not differ, differ
    assert default.eval_episodes >= 144


def test_every_evaluation_of_a_run_plays_one_panel_and_records_it(tmp_path):
    """The start and end evaluations are paired episode by episode: each records the panel it
    played (split, task ids, task seeds), the same at every iteration, and the plan's own."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from tiny_config import config_for_tests

    from trainers import seeds
    from trainers.loop.trainer import Trainer

    cfg = config_for_tests(
        iterations=2,
        eval_every=1,
        eval_episodes=6,
        output_dir=str(tmp_path / "run"),
        warm_start="none",
        eval_extra_split="none",
    )
    trainer = Trainer(cfg)
    trainer.train()
    evals = [r for r in trainer.history if r.get("kind") == "eval"]
    assert [r["iteration"] for r in evals] == [0, 1, 2]
    expected = EvalPlan.for_env(
        make_env_fn("rooms", cfg.splits[1], cfg.max_steps), cfg.splits[1], 6, seed=seeds.eval_plan(cfg.seed)
    ).panel()
    assert {r["eval/panel"] for r in evals} == {expected}
    assert rl_gain(trainer.history)["ci"] is not None  # paired


def test_a_paired_comparison_refuses_evaluations_of_different_panels(tmp_path):
    from trainers.rollouts.eval_episodes import PanelMismatch

    plan = EvalPlan("valid", ("a", "b"), 2, seed=1)
    other = EvalPlan("valid", ("a", "b"), 2, seed=2)
    start = {"iteration": 0, "kind": "eval", "eval/success": 0.25, "eval/won": [0, 1, 0, 0], "eval/panel": plan.panel()}
    end = {"iteration": 3, "kind": "eval", "eval/success": 0.5, "eval/won": [1, 1, 0, 0], "eval/panel": other.panel()}
    with pytest.raises(PanelMismatch, match="different episodes"):
        rl_gain([start, end])
    summary = write_report(tmp_path, [start, end], {"estimator": "gigpo", "env": "rooms"}).read_text()
    assert "Not compared:" in summary and "different episodes" in summary
    assert rl_gain([start, {**end, "eval/panel": plan.panel()}])["ci"] is not None


def test_example_episodes_pick_the_first_won_and_lost_and_abridge_them():
    from types import SimpleNamespace as S

    from trainers.rollouts.eval_episodes import example_episodes

    trajs = [
        S(won=False, task_id="t0", task_type="pick", outcome=0.0, length=3),
        S(won=True, task_id="t1", task_type="heat", outcome=1.0, length=14),
        S(won=False, task_id="t2", task_type="cool", outcome=0.0, length=1),
        S(won=True, task_id="t3", task_type="pick", outcome=1.0, length=1),
    ]
    steps = [S(traj=1, t=k, action=f"a{k}", next_obs=f"o{k}") for k in reversed(range(14))]  # any order
    steps += [S(traj=0, t=k, action=f"b{k}", next_obs="x" * 300 if k == 2 else "y") for k in range(3)]
    ex = example_episodes(S(trajectories=trajs, steps=steps), max_actions=5, max_chars=10)
    assert set(ex) == {"won", "lost"}
    won, lost = ex["won"], ex["lost"]
    assert (won["episode"], won["task_id"], won["task_type"], won["outcome"], won["steps"]) == (
        1,
        "t1",
        "heat",
        1.0,
        14,
    )
    assert won["actions"] == ["a0", "a1", "a2", "a3", "a4"] and won["last_observation"] == "o13"
    assert (lost["episode"], lost["actions"], lost["steps"]) == (0, ["b0", "b1", "b2"], 3)
    assert lost["last_observation"] == "x" * 10 + "..."
    only_lost = example_episodes(S(trajectories=trajs[:1], steps=[]))
    assert (
        list(only_lost) == ["lost"]
        and only_lost["lost"]["actions"] == []
        and only_lost["lost"]["last_observation"] == ""
    )


def test_play_episodes_plays_the_panels_episodes_it_is_given():
    from agents.contract import StepOutput
    from trainers.rollouts.eval_episodes import play_episodes

    class First:
        def act(self, observations, infos, histories=None, *, seed=None):
            return [StepOutput(action=sorted(i["admissible_commands"])[0]) for i in infos]

    fn = make_env_fn("rooms", "valid", 3)
    plan = EvalPlan.for_env(fn, "valid", 6, seed=11)
    rollout = play_episodes(First(), fn, plan, [4, 1])
    alone = [play_episodes(First(), fn, plan, [i]).trajectories[0].task_id for i in (4, 1)]
    assert [t.task_id for t in rollout.trajectories] == alone  # episode i is its task seed's task, wherever played
    assert all(0 < t.length <= 3 for t in rollout.trajectories)
    again = play_episodes(First(), fn, plan, [4, 1])
    assert [s.action for s in again.steps] == [s.action for s in rollout.steps]  # the same task seeds


def test_panels_differ_with_the_split_tasks_order_or_seed_and_an_unrecorded_panel_passes():
    from trainers.rollouts.eval_episodes import PanelMismatch, check_same_panel

    base = EvalPlan("valid", ("a", "b"), 2, seed=3)
    others = [
        EvalPlan("test", ("a", "b"), 2, seed=3),
        EvalPlan("valid", ("b", "a"), 2, seed=3),
        EvalPlan("valid", ("a", "b"), 3, seed=3),
        EvalPlan("valid", ("a", "b"), 2, seed=4),
    ]
    assert len({base.panel(), *(o.panel() for o in others)}) == 5 and len(base.panel()) == 16
    check_same_panel({"eval/panel": base.panel()}, {})  # a record from before panels: nothing to check
    check_same_panel({}, {"eval/panel": base.panel()})
    with pytest.raises(
        PanelMismatch, match=re.escape(f"the start and the end played different episodes (panel {base.panel()} vs")
    ):
        check_same_panel({"eval/panel": base.panel()}, {"eval/panel": others[0].panel()}, "the start and the end")
    plan = EvalPlan.for_episodes("valid", [], 3, seed=1)  # an env without task ids: distinct seeds
    assert plan.episodes() == ["", "", ""] and plan.num_episodes == 3


def test_a_panel_is_the_task_seeds_played_so_a_changed_seeding_scheme_changes_it(monkeypatch):
    from trainers import seeds

    plan = EvalPlan("valid", ("a", "b"), 2, seed=3)
    before = plan.panel()
    original = seeds.eval_task
    monkeypatch.setattr(seeds, "eval_task", lambda seed, i: original(seed, i) + 1)  # same plan, other episodes
    assert plan.panel() != before


def test_a_plan_for_an_env_takes_its_task_ids_and_an_env_without_them_gets_distinct_seeds():
    from types import SimpleNamespace as S

    closed: list[str] = []

    def env_fn(ids):
        return lambda: S(unwrapped=S(task_ids=ids), close=lambda: closed.append("x"))

    plan = EvalPlan.for_env(env_fn(["kitchen-1", "bath-2", "bed-3"]), "valid", 5, seed=4)
    assert (plan.split, plan.task_ids, plan.episodes_per_task, plan.seed) == (
        "valid",
        ("kitchen-1", "bath-2", "bed-3"),
        2,
        4,
    )
    assert plan.episodes()[:3] == ["kitchen-1", "kitchen-1", "bath-2"] and plan.num_episodes == 6
    bare = EvalPlan.for_env(env_fn(None), "valid", 5, seed=4)
    assert bare.task_ids == ("",) * 5 and bare.episodes_per_task == 1
    assert closed == ["x", "x"]  # the probe env is closed


def test_a_panel_mismatch_says_what_differs_and_why_it_matters():
    from trainers.rollouts.eval_episodes import PanelMismatch, check_same_panel

    with pytest.raises(PanelMismatch) as err:
        check_same_panel({"eval/panel": "ab"}, {"eval/panel": "cd"})
    assert str(err.value) == (
        "the two evaluations played different episodes (panel ab vs cd): a paired difference needs "
        "the same tasks and task seeds on both sides"
    )


def test_episode_records_keep_each_episodes_task_outcome_and_win():
    from types import SimpleNamespace as S

    from trainers.rollouts.eval_episodes import episode_records

    rollout = S(
        trajectories=[
            S(task_id="t0", won=True, outcome=1.0),
            S(task_id="t1", won=False, outcome=0.25),
            S(task_id="t0", won=np.bool_(False), outcome=0),
        ]
    )
    assert episode_records(rollout) == {"task_id": ["t0", "t1", "t0"], "won": [1, 0, 0], "score": [1.0, 0.25, 0.0]}
    assert all(type(v) is int for v in episode_records(rollout)["won"])


def test_example_episodes_default_abridgement_and_a_second_win_before_the_first_loss():
    from types import SimpleNamespace as S

    from trainers.rollouts.eval_episodes import example_episodes

    trajs = [
        S(won=True, task_id="w0", task_type="pick", outcome=1.0, length=13),
        S(won=True, task_id="w1", task_type="pick", outcome=1.0, length=1),
        S(won=False, task_id="l2", task_type="cool", outcome=0.0, length=1),
    ]
    steps = [S(traj=0, t=k, action=f"a{k}", next_obs="z" * 160) for k in range(13)]
    steps += [S(traj=1, t=0, action="b", next_obs="y"), S(traj=2, t=0, action="c", next_obs="q" * 161)]
    ex = example_episodes(S(trajectories=trajs, steps=steps))
    assert ex["won"]["actions"] == [f"a{k}" for k in range(12)]  # the first 12 actions
    assert ex["won"]["last_observation"] == "z" * 160  # 160 characters: kept whole
    assert ex["lost"]["episode"] == 2 and ex["lost"]["last_observation"] == "q" * 160 + "..."


def test_the_random_baseline_never_picks_a_passive_command_and_sends_a_no_op_when_nothing_else_is_left():
    from agents.contract import StepOutput

    policy = random_baseline()
    infos = [
        {"admissible_commands": ["look", "inventory", "go to desk 1", "examine desk 1"]},
        {"admissible_commands": []},
    ]
    out = policy.act(["o", "o"], infos)
    assert all(isinstance(o, StepOutput) for o in out)
    assert out[0].action == "go to desk 1" and out[1].action == ""
    only_passive = policy.act(["o"], [{"admissible_commands": ["look", "inventory"]}], seed=3)[0].action
    assert only_passive in ("look", "inventory")  # nothing else admissible: a passive one, not the no-op
    many = [{"admissible_commands": [f"go to {k}" for k in range(50)]}]
    draws = [random_baseline().act(["o"], many)[0].action for _ in range(2)]
    assert draws[0] == draws[1] == random_baseline(0).act(["o"], many)[0].action  # seeded, by default with 0
    assert random_baseline(7).act(["o"], many)[0].action != draws[0]  # the seed given is the seed used


@pytest.mark.parametrize("processes", [False, True])
def test_three_streams_play_each_episode_once(processes):
    """Each stream plays the episodes dealt to it and no other: every step is counted once."""
    fn = make_env_fn("rooms", "valid", max_steps=6)
    plan = EvalPlan.for_episodes("valid", [], 7, seed=1)
    counted: list[int] = []
    out = run_eval(_ObservationPolicy(), fn, plan, batch=3, streams=3, processes=processes, on_step=counted.append)
    one = run_eval(_ObservationPolicy(), fn, plan, batch=3)
    assert [t.group for t in out.trajectories] == list(range(7))
    assert sum(counted) == sum(t.length for t in out.trajectories) == sum(t.length for t in one.trajectories)
    assert len(out.steps) == sum(t.length for t in out.trajectories)


def test_play_episodes_cuts_a_hung_step_off_at_its_step_timeout():
    """A step that hangs past ``step_timeout`` ends its episode (a crashed member), as in training;
    without the timeout the same episode plays on to its step limit."""
    import time

    import gymnasium as gym

    from agents.contract import StepOutput
    from trainers.rollouts.eval_episodes import play_episodes

    class HangsOnce(gym.Wrapper):
        def step(self, action):
            if not getattr(self, "hung", False):
                self.hung = True
                time.sleep(3)
            return self.env.step(action)

    class First:
        def act(self, observations, infos, histories=None, *, seed=None):
            return [StepOutput(action=sorted(i["admissible_commands"])[0]) for i in infos]

    base = make_env_fn("rooms", "valid", 3)
    plan = EvalPlan.for_env(base, "valid", 1, seed=5)
    cut = play_episodes(First(), lambda: HangsOnce(base()), plan, [0], step_timeout=0.3)
    assert cut.trajectories[0].length == 1 and cut.trajectories[0].outcome == 0.0
    whole = play_episodes(First(), base, plan, [0], step_timeout=0.3)
    assert whole.trajectories[0].length > 1  # the episode itself is longer than its hung step


class _TaskEnv:
    """A one-step env with a list of task ids that plays the task its reset is asked for (as the
    ALFWorld and WebShop envs do), waiting ``reset_s`` / ``step_s`` in each call."""

    task_ids = ["t0", "t1", "t2"]

    def __init__(self, reset_s: float = 0.0, step_s: float = 0.0) -> None:
        import gymnasium as gym

        self.observation_space, self.action_space = gym.spaces.Text(100), gym.spaces.Text(100)
        self.metadata, self.render_mode, self.spec = {}, None, None
        self.reset_s, self.step_s, self.task = reset_s, step_s, None

    @property
    def unwrapped(self):
        return self

    def reset(self, *, seed=None, options=None):
        import time

        time.sleep(self.reset_s)
        self.task = (options or {}).get("task_id") or "random"
        return f"task {self.task}", {"task_id": self.task, "admissible_commands": ["finish"]}

    def step(self, action):
        import time

        time.sleep(self.step_s)
        return "done", 1.0, True, False, {"task_id": self.task, "won": True, "admissible_commands": []}

    def close(self):
        pass


class _Answering(_ObservationPolicy):
    """Answers with three response tokens per step."""

    def act(self, observations, infos, histories=None, seed=None):
        outs = super().act(observations, infos, histories, seed)
        for o in outs:
            o.response_ids = [1, 2, 3]
        return outs


def test_an_evaluation_plays_its_panels_tasks_and_sums_every_chunk():
    """The env is asked for the plan's task of each episode, in plan order; with more episodes than
    a chunk holds, the result's rows, tokens and seconds add up over every chunk."""
    fn = lambda: _TaskEnv(reset_s=0.01, step_s=0.02)  # noqa: E731 - a one-line callable, read where it is passed
    plan = EvalPlan.for_env(fn, "valid", 7, seed=3)
    n = plan.num_episodes
    assert plan.episodes() == ["t0"] * 3 + ["t1"] * 3 + ["t2"] * 3  # 7 asked: 3 per task
    out = run_eval(_Answering(), fn, plan, batch=2)  # five chunks
    assert [t.task_id for t in out.trajectories] == plan.episodes()
    assert len(out.steps) == n and out.response_tokens == 3 * n
    assert sorted(out.rows) == sorted((s.traj, i) for i, s in enumerate(out.steps))
    assert sorted(s.traj for s in out.steps) == list(range(n))
    assert out.env_seconds >= n * 0.02 * 0.9 and out.reset_seconds >= n * 0.01 * 0.9
    assert out.seconds >= out.env_seconds + out.reset_seconds * 0.9
