"""Teachers (--distill): the losses on hand-made distributions, routing by group, the EMA teacher,
the skill writer's inputs, and 2-iteration runs of each mode on ALFWorld and WebShop."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from fake_rollouts import step_record

from trainers.loop.ppo import Comm, Learner, PPOConfig, UpdateBatch, ppo_update
from trainers.loop.sections import credit_section
from trainers.teachers import (
    HindsightTargets,
    PrivilegedTargets,
    TemplateSkillWriter,
    Transcript,
    ema_update,
    entropy_weights,
    gated_distill,
    symmetric_kl,
    topk_symmetric_kl,
    transcripts_of,
)


# ----------------------------------------------------------------------------- losses, exact values
def test_symmetric_kl_hand_computed():
    t = torch.log(torch.tensor([0.5, 0.5]))
    s = torch.log(torch.tensor([0.9, 0.1]))
    kl_ts = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)
    kl_st = 0.9 * math.log(0.9 / 0.5) + 0.1 * math.log(0.1 / 0.5)
    assert float(symmetric_kl(t, s)) == pytest.approx(0.5 * kl_ts + 0.5 * kl_st, abs=1e-6)
    assert float(symmetric_kl(t, t)) == 0.0


def test_topk_kl_renormalises_on_the_teachers_tokens():
    teacher = torch.log(torch.tensor([[0.6, 0.3, 0.1]]))
    student = torch.log(torch.tensor([[0.2, 0.2, 0.6]]))
    top, idx = teacher.topk(2, dim=-1)  # tokens 0 and 1: teacher 2/3, 1/3; student 1/2, 1/2
    want = symmetric_kl(torch.log(torch.tensor([2 / 3, 1 / 3])), torch.log(torch.tensor([0.5, 0.5])))
    assert float(topk_symmetric_kl(top, idx, student)) == pytest.approx(float(want), abs=1e-6)


def test_entropy_weights_normalised_and_clipped():
    logp = torch.log(torch.tensor([[1.0, 1e-12], [0.5, 0.5]]))  # H = 0 and ln 2
    np.testing.assert_allclose(entropy_weights(logp).numpy(), [1 / 0.75, 0.5 / 0.75], rtol=1e-5)
    sure = [[1.0, 1e-12]]
    flat = [[0.5, 0.5]]
    logp = torch.log(torch.tensor(sure + flat * 6))  # w = 1, then 6 x 0.5: mean 4 / 7
    w = entropy_weights(logp)
    assert float(w[0]) == pytest.approx(1.75, rel=1e-5)  # 1 / (4 / 7): under the clip
    assert float(w[1]) == pytest.approx(0.5 / (4 / 7), rel=1e-5)


def test_entropy_weights_clip():
    logp = torch.log(torch.tensor([[1.0, 1e-12]] + [[0.5, 0.5]] * 6))
    w = entropy_weights(logp, beta=3.0)  # exp(-3 ln 2) = 1/8: mean (1 + 6/8) / 7 = 0.25 -> 4, clipped
    assert float(w[0]) == 2.0 and float(w[1]) == pytest.approx((1 / 8) / 0.25, rel=1e-5)


def test_gate_hand_computed():
    l_theta = torch.tensor([-2.0, -1.0], requires_grad=True)
    l_skill = torch.tensor([-1.0, -3.0], requires_grad=True)
    term, gate = gated_distill(l_theta, l_skill)
    g = [1 / (1 + math.exp(-5.0)), 1 / (1 + math.exp(10.0))]
    np.testing.assert_allclose(gate.detach().numpy(), g, rtol=1e-6)
    np.testing.assert_allclose(term.detach().numpy(), [g[0] * 1.0, g[1] * -2.0], rtol=1e-6)
    term.sum().backward()  # the skill side and the gate carry no gradient: d/d l_theta = -g
    np.testing.assert_allclose(l_theta.grad.numpy(), [-g[0], -g[1]], rtol=1e-6)
    assert l_skill.grad is None  # the skill-conditioned log-probs are a target, never trained toward the student


def test_ema_exact_after_two_steps():
    torch.manual_seed(0)
    student = torch.nn.Linear(3, 2)
    teacher = torch.nn.Linear(3, 2)
    a = teacher.weight.detach().clone()
    b1 = torch.randn(2, 3)
    b2 = torch.randn(2, 3)
    with torch.no_grad():
        student.weight.copy_(b1)
    ema_update(teacher, student, 0.05)
    with torch.no_grad():
        student.weight.copy_(b2)
    ema_update(teacher, student, 0.05)
    want = 0.95 * (0.95 * a + 0.05 * b1) + 0.05 * b2
    torch.testing.assert_close(teacher.weight.detach(), want, rtol=0, atol=1e-7)


# ----------------------------------------------------------------------------- routing in the update
@dataclass
class Pick:
    state: int
    chosen: int


def _toy_update(routed: list[bool], mode: str = "privileged") -> tuple[torch.Tensor, torch.Tensor]:
    """One SGD step (lr 1) over two steps, A (state 0, advantage +5) and B (state 1, advantage +1);
    returns the change of the logits of each state."""
    theta = torch.nn.Parameter(torch.zeros(2, 3))
    steps = [Pick(0, 0), Pick(1, 2)]

    def forward(outputs):
        return [torch.log_softmax(theta[o.state], -1)[o.chosen].reshape(1) for o in outputs], None

    def distributions(outputs):
        return [torch.log_softmax(theta[o.state], -1) for o in outputs]

    teacher = torch.log(torch.tensor([0.1, 0.1, 0.8]))
    old = [torch.log(torch.tensor([1 / 3])), torch.log(torch.tensor([1 / 3]))]
    batch = UpdateBatch(steps, old, None, torch.tensor([5.0, 1.0]), [1, 1], [1.0, 1.0], [1, 1], [(0,), (1,)], 2)
    if mode == "privileged":
        batch.aux = PrivilegedTargets(
            routed=routed,
            teacher=[teacher if r else None for r in routed],
            index=[None, None],
            weight=[torch.ones(1) if r else None for r in routed],
        )
    opt = torch.optim.SGD([theta], lr=1.0)
    ppo_update(
        batch,
        PPOConfig(num_minibatches=1, max_grad_norm=1e9),
        Learner(forward, lambda: [], opt, [theta], distributions=distributions),
        Comm(),
        torch.Generator().manual_seed(0),
    )
    return theta.detach()[0].clone(), theta.detach()[1].clone()


def test_a_routed_step_gets_the_distillation_loss_only_and_the_others_the_rl_loss_only():
    d0, d1 = _toy_update([True, False])
    # state 1 (step B, RL only): -grad of 0.5 * (-ratio * A) at ratio 1 = 0.5 * A * d log pi / d theta
    p = torch.full((3,), 1 / 3)
    want_b = 0.5 * 1.0 * (torch.eye(3)[2] - p)
    torch.testing.assert_close(d1, want_b, rtol=1e-5, atol=1e-6)
    # state 0 (step A, distillation only): its +5 advantage plays no part; the teacher favours token 2
    theta = torch.zeros(3, requires_grad=True)
    kl = symmetric_kl(torch.log(torch.tensor([0.1, 0.1, 0.8])), torch.log_softmax(theta, -1))
    (0.5 * kl).backward()
    torch.testing.assert_close(d0, -theta.grad, rtol=1e-5, atol=1e-6)
    assert int(torch.argmax(d0)) == 2
    # no routing: both steps take the RL loss (A's +5 pushes token 0 of state 0)
    d0_rl, d1_rl = _toy_update([False, False])
    assert int(torch.argmax(d0_rl)) == 0
    torch.testing.assert_close(d1_rl, want_b, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- skills
def test_template_skill_of_a_hand_made_transcript():
    t = Transcript(
        "put a clean mug in the cabinet",
        (
            ("You are in the middle of a room.", "go to countertop 1"),
            ("On the countertop 1, you see a knife 1.", "go to shelf 1"),
            ("On the shelf 1, you see a mug 1.", "examine shelf 1"),
            ("On the shelf 1, you see a mug 1.", "examine shelf 1"),
            ("On the shelf 1, you see a mug 1.", "examine shelf 1"),
            ("On the shelf 1, you see a mug 1.", "go to countertop 1"),
        ),
        "On the countertop 1, you see a knife 1.",
    )
    skill = TemplateSkillWriter().write([t])[0]
    assert skill == (
        'Hindsight from an earlier attempt at this task: "mug" appeared after "go to shelf 1". Going back '
        'to countertop 1 brought nothing new. "examine shelf 1" was repeated 3 times: try something else.'
    )


def test_the_skill_writer_never_sees_the_answer():
    """A WebShop rollout with privileged info on: the transcripts a writer gets hold the
    instruction and the pages the agent saw, never the target product, its options or its asin."""
    from agents.contract import StepOutput
    from trainers.envs import make_env_fn
    from trainers.rollouts.rollout import collect_rollout
    from wrappers import GroupVectorEnv

    class FirstCommand:
        def act(self, observations, infos, histories=None, *, seed=None):
            return [StepOutput(action=sorted(i["admissible_commands"])[-1]) for i in infos]

    envs = GroupVectorEnv(
        make_env_fn("webshop", "train", max_steps=4, privileged_info=True), num_groups=2, group_size=2, seed=0
    )
    try:
        rollout = collect_rollout(envs, FirstCommand(), [3, 4], seed=0)
    finally:
        envs.close()
    assert all(t.privileged.startswith("Target product: ") for t in rollout.trajectories)
    seen: list[Transcript] = []

    class Spy(TemplateSkillWriter):
        def write(self, transcripts):
            seen.extend(transcripts)
            return super().write(transcripts)

    Spy().write(transcripts_of(rollout))
    assert len(seen) == 4 and all(t.goal.startswith("Find me") or t.goal for t in seen)
    for traj, t in zip(rollout.trajectories, seen):
        text = json.dumps([t.goal, t.steps, t.final_observation])
        title = traj.privileged.removeprefix("Target product: ").split(". Options:")[0]
        assert "Target product" not in text and "Expert plan" not in text
        assert title not in text or title in "".join(o for o, _ in t.steps)  # only if the agent saw that page
        assert t.goal == traj.goal and "asin" not in text


# ----------------------------------------------------------------------------- runs
def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("env,mode", [("alfworld", "hindsight"), ("webshop", "privileged"), ("webshop", "hindsight")])
def test_two_iterations_of_each_mode(tmp_path, env, mode, request):
    if env == "alfworld":
        request.getfixturevalue("alfworld_engine_available")
    from trainers.cli.train import main

    args = (
        ["--config", "configs/webshop_cpu_demo.yaml", "--bc-episodes", "20"]
        if env == "webshop"
        else ["--env", "alfworld", "--max-steps", "8", "--eval-extra-split", "none"]
    )
    run = tmp_path / "run"
    assert (
        main(
            [
                *args,
                "--distill",
                mode,
                *"--iterations 2 --num-groups 2 --group-size 4 --bc-steps 5 --eval-episodes 4 --output-dir".split(),
                str(run),
                *"--no-progress-bars --no-tensorboard --no-baseline-random".split(),
            ]
        )
        == 0
    )
    label = "privileged (not pure RL)" if mode == "privileged" else "hindsight (no ground truth)"
    train = [r for r in _records(run) if r.get("kind") == "train"]
    assert len(train) == 2 and all(r["distill"] == label for r in train)
    evals = [r for r in _records(run) if r.get("kind") == "eval"]
    assert [r["iteration"] for r in evals] == [0, 2] and all(r["distill"] == label for r in evals)
    summary = (run / "summary.md").read_text()
    assert label in summary.splitlines()[0] and f"**Teacher: {label}.**" in summary
    samples = [json.loads(line) for line in (run / "distill_samples.jsonl").read_text().splitlines()]
    assert samples and all(s["mode"] == mode for s in samples)
    if mode == "privileged":
        assert all(s["context"].startswith(("Expert plan:", "Target product:")) for s in samples)
        # routed steps exactly where groups failed completely (both ways), and their loss logged
        assert all((r["distill/steps"] > 0) == (r["all_failed_frac"] > 0) for r in train), train
        assert all("distill/kl" in r for r in train if r["distill/steps"] > 0)
    else:
        assert all(s["context"].startswith("Hindsight from an earlier attempt") for s in samples)
        assert all(0.0 < r["distill/gate"] < 1.0 for r in train)


@pytest.mark.slow
def test_a_privileged_run_resumes_bit_for_bit(tmp_path, alfworld_engine_available):
    """Two iterations of --distill privileged on ALFWorld, labelled; the EMA teacher is in the
    checkpoint: 1 + 1 iterations (resumed) = 2 iterations."""
    from trainers.cli.train import main
    from trainers.runs.metrics import TIMING_KEYS

    args = (
        "--env alfworld --max-steps 6 --eval-extra-split none --distill privileged --num-groups 2 "
        "--group-size 4 --bc-steps 5 --eval-episodes 0 --no-progress-bars --no-tensorboard "
        "--no-baseline-random"
    ).split()
    assert main([*args, "--iterations", "2", "--output-dir", str(tmp_path / "a")]) == 0
    assert main([*args, "--iterations", "1", "--output-dir", str(tmp_path / "b")]) == 0
    assert main([*args, "--iterations", "2", "--output-dir", str(tmp_path / "b"), "--resume"]) == 0

    def comparable(run: Path) -> list[dict]:
        return [
            {k: v for k, v in r.items() if k not in TIMING_KEYS and not k.startswith("time/")} for r in _records(run)
        ]

    assert comparable(tmp_path / "a") == comparable(tmp_path / "b")
    train = [r for r in _records(tmp_path / "a") if r.get("kind") == "train"]
    assert len(train) == 2 and all(r["distill"] == "privileged (not pure RL)" for r in train)
    assert any(r.get("distill/kl", 0.0) > 0 for r in train)
    assert (
        (tmp_path / "a" / "summary.md")
        .read_text()
        .startswith("# ProGPO run report: progpo-gigpo on alfworld, distill privileged (not pure RL)")
    )
    samples = [json.loads(line) for line in (tmp_path / "a" / "distill_samples.jsonl").read_text().splitlines()]
    assert samples and all(s["context"].startswith("Expert plan: ") for s in samples)


def test_the_held_out_records_of_a_run_with_a_teacher_carry_its_label(tmp_path):
    """Readers and tools take the held-out success from the eval records: they say "teacher" too."""
    from trainers.cli.train import main

    run = tmp_path / "run"
    assert (
        main(
            [
                *(
                    "--env rooms --model tiny --distill hindsight --iterations 1 --num-groups 1 --group-size 2 "
                    "--max-steps 3 --eval-episodes 2 --warm-start none --output-dir"
                ).split(),
                str(run),
                *"--no-progress-bars --no-tensorboard --baseline-random --torch-threads 1".split(),
            ]
        )
        == 0
    )
    records = _records(run)
    evals = [r for r in records if r.get("kind") == "eval"]
    assert len(evals) == 2 and all(r["distill"] == "hindsight (no ground truth)" for r in evals)
    assert all("distill" not in r for r in records if r.get("kind") == "baseline")  # the random policy had no teacher


def test_a_privileged_teacher_on_an_env_without_privileged_text_is_refused_before_the_run_dir(tmp_path, capsys):
    from trainers.cli.train import main

    run = tmp_path / "run"
    assert (
        main([*"--env rooms --model tiny --distill privileged --output-dir".split(), str(run), "--no-progress-bars"])
        == 2
    )
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and "privileged text" in err[0] and "rooms" in err[0]
    assert not run.exists()  # the corrected rerun needs no --overwrite


@pytest.mark.parametrize("tau", [2.0, 1.0001])
def test_an_ema_rate_above_one_is_refused(tau):
    from trainers.config import ConfigError, TrainConfig
    from trainers.teachers import PrivilegedTeacher

    with pytest.raises(ConfigError, match="distill_tau must be in \\[0, 1\\]"):
        TrainConfig(distill_tau=tau)
    with pytest.raises(ValueError, match="tau must be in"):
        PrivilegedTeacher(policy=object(), model=None, tau=tau)


def test_distill_config_errors():
    from trainers.config import ConfigError, TrainConfig

    with pytest.raises(ConfigError, match="distill must be one of none, privileged, hindsight"):
        TrainConfig(distill="teacher")
    with pytest.raises(ConfigError, match="skill_writer policy needs --policy-mode generate"):
        TrainConfig(distill="hindsight", skill_writer="policy")
    assert TrainConfig(distill="privileged").distill_label == "privileged (not pure RL)"
    assert TrainConfig().distill_label is None


@pytest.mark.slow
@pytest.mark.parametrize("mode,extra", [("privileged", []), ("hindsight", ["--skill-writer", "policy"])])
def test_generate_mode_teachers(tmp_path, mode, extra, alfworld_engine_available):
    """Generate mode: the privileged teacher compares its top-k tokens; the policy writes the skills."""
    from trainers.cli.train import main

    run = tmp_path / "run"
    assert (
        main(
            [
                *"--env alfworld --policy-mode generate --warm-start none --max-new-tokens 8 --distill".split(),
                mode,
                *extra,
                *(
                    "--iterations 1 --num-groups 1 --group-size 2 --max-steps 4 --eval-episodes 0 "
                    "--eval-extra-split none --output-dir"
                ).split(),
                str(run),
                *"--no-progress-bars --no-tensorboard --no-baseline-random".split(),
            ]
        )
        == 0
    )
    [rec] = [r for r in _records(run) if r.get("kind") == "train"]
    assert rec["distill/steps"] > 0
    assert (rec["distill/kl"] > 0) if mode == "privileged" else (0 < rec["distill/gate"] < 1)


def _routing_rollout():
    """Two groups of two on the same task: group 0 failed completely, group 1 had a success."""
    from trainers.rollouts.rollout import Rollout, Trajectory

    trajs = [
        Trajectory(
            group=g,
            member=2 * g + m,
            task_id="t",
            task_type="pick",
            outcome=float(g == 1 and m == 0),
            length=2,
            won=g == 1 and m == 0,
            privileged=f"Expert plan: group {g} member {m}",
        )
        for g in (0, 1)
        for m in (0, 1)
    ]
    steps = [
        step_record(j, t, f"s{j}{t}", f"s{j}{t + 1}", reward=trajs[j].outcome if t == 1 else 0.0)
        for j in range(4)
        for t in range(2)
    ]
    return Rollout(steps=steps, trajectories=trajs)


@pytest.mark.parametrize("estimator", ["gigpo", "progpo-gigpo", "grpo", "hgpo"])
def test_the_privileged_teacher_takes_the_steps_of_all_failed_groups_and_only_those(estimator):
    """The routing behind I-SDPO: the distillation loss on every step of a group that failed
    completely, the RL loss alone on the groups with a success; traced from the trainer's own
    advantage stage to its teacher inputs."""
    from trainers.config import TrainConfig
    from trainers.loop.credit import CreditAssigner
    from trainers.teachers import privileged_inputs

    rollout = _routing_rollout()
    credit = CreditAssigner(credit_section(TrainConfig(estimator=estimator, seed=0))).assign(rollout, 1)
    assert credit.all_failed.tolist() == [True, False]
    teach = privileged_inputs(rollout, credit.step_failed)
    groups = [rollout.trajectories[s.traj].group for s in rollout.steps]
    assert teach.routed == [g == 0 for g in groups] and sum(teach.routed) == 4
    assert teach.texts == [rollout.trajectories[s.traj].privileged for s in rollout.steps]
    assert teach.metrics == {"distill/group_frac": 0.5}


def test_hindsight_routes_no_step_and_reads_the_writers_skill_per_trajectory():
    from trainers.teachers import hindsight_inputs

    class Writer:
        def write(self, transcripts):
            return [f"skill {k}" for k in range(len(transcripts))]

    rollout = _routing_rollout()
    teach = hindsight_inputs(rollout, Writer())
    assert teach.routed == [False] * 8 and teach.metrics == {"distill/group_frac": 1.0}
    assert teach.texts == [f"skill {s.traj}" for s in rollout.steps]


def test_a_privileged_teacher_without_privileged_text_is_one_line():
    from trainers.teachers import privileged_inputs
    from wrappers.errors import UserError

    rollout = _routing_rollout()
    for t in rollout.trajectories:
        t.privileged = ""
    with pytest.raises(UserError, match="gave no info\\['privileged_text'\\]"):
        privileged_inputs(rollout, [False] * 8, env="rooms")


def test_a_single_all_failed_group_is_the_whole_share_and_an_empty_rollout_none():
    from trainers.rollouts.rollout import Rollout
    from trainers.teachers import hindsight_inputs, privileged_inputs

    full = _routing_rollout()
    rollout = Rollout(
        steps=[s for s in full.steps if s.traj < 2], trajectories=[t for t in full.trajectories if t.group == 0]
    )
    teach = privileged_inputs(rollout, [True] * len(rollout.steps))
    assert teach.metrics == {"distill/group_frac": 1.0} and all(teach.routed)

    class Writer:
        def write(self, transcripts):
            return []

    empty = hindsight_inputs(Rollout(), Writer())
    assert (empty.texts, empty.routed, empty.metrics) == ([], [], {"distill/group_frac": 0.0})
    with pytest.raises(ValueError, match="hindsight needs a skill writer"):
        hindsight_inputs(Rollout(), None)


def test_transcripts_end_with_the_last_observation_each_trajectory_reached():
    rollout = _routing_rollout()
    for k, s in enumerate(rollout.steps):
        s.obs, s.next_obs = f"o{k}", f"o{k + 1}"
    got = transcripts_of(rollout)
    assert [t.final_observation for t in got] == ["o2", "o4", "o6", "o8"]
    assert got[1].steps == (("o2", "a0"), ("o3", "a1"))


def test_the_ema_teacher_is_a_frozen_copy_that_follows_the_student_at_rate_tau():
    from types import SimpleNamespace

    from trainers.teachers import PrivilegedTeacher

    student = torch.nn.Linear(2, 1)
    with torch.no_grad():
        student.weight.fill_(1.0)
    teacher = PrivilegedTeacher(SimpleNamespace(distributions=None), student, tau=0.25)
    teacher.after_step()  # no teacher yet: nothing to follow
    assert teacher.ema is None
    ema = teacher.ensure_ema()
    assert ema is not student and teacher.ensure_ema() is ema and not ema.training
    assert all(not p.requires_grad for p in ema.parameters()) and all(p.requires_grad for p in student.parameters())
    with torch.no_grad():
        student.weight.fill_(3.0)
    teacher.after_step()
    assert torch.allclose(ema.weight, torch.full_like(ema.weight, 0.75 * 1.0 + 0.25 * 3.0))
    assert torch.allclose(student.weight, torch.full_like(student.weight, 3.0))  # the student is untouched


def test_teacher_arguments():
    from types import SimpleNamespace

    from trainers.teachers import HindsightTeacher, PrivilegedTeacher
    from trainers.teachers.registry import teacher
    from wrappers.errors import UserError

    policy, model = SimpleNamespace(distributions=None), torch.nn.Linear(1, 1)
    with pytest.raises(ValueError, match="distill must be one of none, privileged, hindsight, got 'other'"):
        teacher("other")
    for tau in (0.0, 1.0):  # both ends allowed: a frozen teacher, a teacher that is the student
        assert PrivilegedTeacher(policy, model, tau=tau).tau == tau
    with pytest.raises(UserError, match="the policy object has no distributions"):
        PrivilegedTeacher(object(), model)
    p, h = PrivilegedTeacher(policy, model), HindsightTeacher(policy, model)
    assert (p.tau, p.top_k, p.samples_per_iteration, h.coef, h.beta, h.samples_per_iteration) == (
        0.05,
        20,
        4,
        0.01,
        5.0,
        4,
    )


# ----------------------------------------------------------------------------- targets on a real tiny policy
@pytest.fixture(scope="module")
def tiny_steps():
    """A tiny score-mode policy and four recorded decisions on the rooms env."""
    import sys
    from types import SimpleNamespace

    sys.path.insert(0, str(Path(__file__).parent))
    from tiny_config import config_for_tests

    from trainers.build import build_policy
    from trainers.envs import make_env

    policy = build_policy(config_for_tests(), torch.device("cpu"))
    env = make_env("rooms", "train", 4)
    steps = []
    for seed in range(4):
        obs, info = env.reset(seed=seed)
        out = policy.act([obs], [info], [[]], seed=seed)[0]
        steps.append(SimpleNamespace(output=out, obs=obs, action=out.action))
    env.close()
    return policy, steps


def test_privileged_targets_are_the_ema_teachers_candidate_distribution_with_the_text_before_the_prompt(tiny_steps):
    from trainers.teachers import PrivilegedTeacher
    from trainers.teachers.base import _with_context

    policy, steps = tiny_steps
    teacher = PrivilegedTeacher(policy, policy.model, tau=0.1)
    texts = ["Expert plan: go to the kitchen", "", "Expert plan: take the key", "Expert plan: go to the kitchen"]
    out, stats = teacher.targets(steps, [0, 1, 2, 3], texts, [True, False, True, True], iteration=7)
    assert stats == {"distill/steps": 3.0} and out.routed == [True, False, True, True]
    assert out.teacher[1] is None and out.weight[1] is None and not hasattr(out, "skill")
    for j in (0, 2, 3):
        k = len(steps[j].output.candidates)
        assert out.teacher[j].shape == (k,) and torch.logsumexp(out.teacher[j], 0).item() == pytest.approx(
            0.0, abs=1e-5
        )
        prefix = teacher._encode(texts[j])
        with torch.no_grad():
            want = policy.distributions([_with_context(steps[j].output, prefix)])[0]  # the EMA is still the student
        torch.testing.assert_close(out.teacher[j], want.float(), rtol=1e-5, atol=1e-5)
        assert prefix and out.weight[j].shape == (1,)
    weights = torch.cat([out.weight[j] for j in (0, 2, 3)])
    assert weights.mean().item() == pytest.approx(1.0, abs=1e-5)  # normalised over the routed rows
    assert teacher.ema is not None  # made at the first routed batch
    # one sample per distinct text, at most samples_per_iteration, with what the teacher read
    assert [s["context"] for s in teacher.samples] == [texts[0], texts[2]]
    assert all(s["iteration"] == 7 and s["mode"] == "privileged" for s in teacher.samples)
    capped = PrivilegedTeacher(policy, policy.model, samples_per_iteration=1)
    capped.targets(steps, [0, 1, 2, 3], texts, [True, False, True, True], iteration=7)
    assert [s["context"] for s in capped.samples] == [texts[0]]  # the cap holds per iteration
    none, stats = PrivilegedTeacher(policy, policy.model).targets(steps, [0, 1], texts, [False] * 4, 1)
    assert stats == {"distill/steps": 0.0} and none.teacher == [None, None]


def test_hindsight_targets_score_the_chosen_command_after_the_skill(tiny_steps):
    from trainers.teachers import HindsightTeacher
    from trainers.teachers.base import _with_context

    policy, steps = tiny_steps
    teacher = HindsightTeacher(policy, policy.model, coef=0.2, beta=3.0)
    texts = ["Hindsight from an earlier attempt: the key is in the kitchen", None, "", "Hindsight: look first"]
    out, stats = teacher.targets(steps, [0, 1, 2, 3], texts, [True] * 4, iteration=1)
    from trainers.loop.ppo import RoutingTerm

    assert stats == {"distill/steps": 2.0} and not isinstance(out, RoutingTerm)  # routes nothing away from RL
    assert (out.coef, out.beta) == (0.2, 3.0) and not hasattr(out, "teacher")
    assert out.skill[1] is None and out.skill[2] is None
    for j in (0, 3):
        want, _ = policy.compute_logprobs_and_entropy(
            [_with_context(steps[j].output, teacher._encode(texts[j]))], with_entropy=False
        )
        torch.testing.assert_close(out.skill[j], want[0].detach().float(), rtol=1e-5, atol=1e-5)
    assert teacher.ema is None  # hindsight keeps no EMA teacher


def test_template_skills_name_first_sightings_returns_and_repeats():
    from trainers.teachers import TemplateSkillWriter

    t = Transcript(
        "find the red apple and put it in the fridge",
        (
            ("You are in the kitchen. You see a fridge.", "open fridge"),
            ("The fridge is empty.", "go to counter 1"),
            ("On the counter 1 you see an apple.", "go to counter 1"),
            ("On the counter 1 you see an apple.", "look"),
            ("You are at the counter.", "look"),
            ("You are at the counter.", "look"),
            ("You are at the counter.", "click[Back]"),
        ),
        "A red light.",
    )
    skill = TemplateSkillWriter().write_one(t)
    assert skill.startswith("Hindsight from an earlier attempt at this task: ")
    # "fridge" was seen before any action; "apple" after the first go to; "red" only at the very end
    assert '"apple" appeared after "go to counter 1".' in skill and '"fridge" appeared' not in skill
    assert '"red" appeared after "click[Back]".' in skill
    assert "Going back to counter 1 brought nothing new." in skill
    assert '"look" was repeated 3 times: try something else.' in skill
    empty = TemplateSkillWriter().write_one(Transcript("open the box", (("Nothing here.", "wait"),), "Still nothing."))
    assert empty.endswith("nothing in it is worth repeating; explore other places.")
    assert TemplateSkillWriter().write([t, t]) == [skill, skill]


def test_the_policy_writes_skills_only_in_generate_mode_from_the_last_eight_steps():
    from types import SimpleNamespace

    from trainers.teachers import PolicySkillWriter

    with pytest.raises(ValueError, match="skill_writer policy needs a generating policy"):
        PolicySkillWriter(SimpleNamespace(backend=None))
    seen = {}

    class Backend:
        def generate(self, prompts, cfg, seed):
            seen.update(prompts=prompts, cfg=cfg, seed=seed)
            return [SimpleNamespace(text=f"  lesson {k} " + "x" * 500) for k in range(len(prompts))]

    class Sampling:
        def with_(self, **kw):
            return kw

    tok = SimpleNamespace(encode=lambda text, add_special_tokens: list(text.encode()))
    writer = PolicySkillWriter(
        SimpleNamespace(backend=Backend(), tokenizer=tok, sampling=Sampling()), max_new_tokens=16
    )
    steps = tuple((f"obs {k} " + "y" * 300, f"act {k}") for k in range(10))
    skills = writer.write([Transcript("the goal", steps, "end"), Transcript("other", steps[:1], "")])
    assert seen["cfg"] == {"max_new_tokens": 16, "min_new_tokens": 0, "n": 1} and seen["seed"] == 0
    prompt = bytes(seen["prompts"][0]).decode()
    assert prompt.startswith("Here is an earlier attempt at a task.\nTask: the goal\n") and prompt.endswith("Lesson:")
    assert "> act 2\n" in prompt and "> act 1\n" not in prompt  # the last eight steps
    assert ("obs 9 " + "y" * 194) in prompt and ("y" * 195) not in prompt  # observations cut at 200 characters
    assert skills[0] == "Hindsight from an earlier attempt at this task: " + ("lesson 0 " + "x" * 500)[:400]
    assert skills[1].startswith("Hindsight from an earlier attempt at this task: lesson 1")


def test_past_a_zero_advantage_a_privileged_teacher_keeps_its_routed_steps_and_hindsight_keeps_all(tiny_steps):
    """With ``skip_zero_advantage`` the update drops steps without an advantage unless the teacher
    keeps them: the privileged teacher keeps exactly the steps it routes to distillation."""
    from trainers.teachers import HindsightTeacher, PrivilegedTeacher, hindsight_inputs, privileged_inputs

    policy, _ = tiny_steps
    rollout = _routing_rollout()
    groups = [rollout.trajectories[s.traj].group for s in rollout.steps]
    privileged = privileged_inputs(rollout, [g == 0 for g in groups])
    assert PrivilegedTeacher(policy, policy.model).kept(privileged, 8) == [g == 0 for g in groups]

    class Writer:
        def write(self, transcripts):
            return ["skill"] * len(transcripts)

    hindsight = hindsight_inputs(rollout, Writer())
    assert HindsightTeacher(policy, policy.model).kept(hindsight, 8) == [True] * 8


def test_the_distillation_statistics_are_weighted_means():
    from trainers.loop.ppo import Comm
    from trainers.teachers import PrivilegedTargets

    priv = PrivilegedTargets(sums={"kl": 3.0, "kl_weight": 2.0})
    assert priv.stats(Comm()) == {"distill/kl": 1.5}
    hind = HindsightTargets(sums={"gate": 3.0, "gate_tokens": 4.0})
    assert hind.stats(Comm()) == {"distill/gate": 0.75}
    assert PrivilegedTargets().stats(Comm()) == {"distill/kl": 0.0}  # nothing routed: no division by zero
