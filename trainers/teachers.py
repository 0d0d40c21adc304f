"""Teachers: a distillation loss beside the RL loss, for the groups RL alone leaves without a signal.

``--distill`` is an axis of its own, independent of ``--estimator``:

* ``none``: RL only.
* ``privileged`` (I-SDPO, arXiv 2608.12957): per group, any success -> the RL loss; all failed ->
  a self-distillation loss on the whole group, in which the teacher, an EMA of the student
  (``tau`` 0.05, updated after every optimizer step), reads the privileged text (the env's
  ``info["privileged_text"]`` at reset: ALFWorld, the expert's plan; WebShop, the target
  product's title and options) before the prompt and re-scores the student's own decisions.
  Loss per decision (score mode) or response token (generate mode): ``0.5 KL(T || S) + 0.5
  KL(S || T)``, weighted by ``exp(-beta * H_T)`` normalised to mean 1 and clipped at 2.0, beta 1.
  Score mode compares the candidate-command distributions; generate mode the teacher's top-k
  tokens (renormalised on both sides). **It uses privileged information: in all-failed groups
  it is imitation, not RL**, and every output says "privileged (not pure RL)".
* ``hindsight`` (SEED, arXiv 2607.14777): after the rollout a skill is written for every
  finished trajectory (:class:`SkillWriter`); the student re-scores its own sampled actions
  with the skill before the prompt (``l_skill``, no gradient) and without it (``l_theta``), and
  ``L = L_RL + lambda * mean(g * (l_skill - l_theta))``, ``g = sigmoid(beta * (l_skill -
  l_theta))``, beta 5, lambda 0.01, on every group. With the template writer (the CPU default)
  the skill reads only the trajectory: "hindsight (no ground truth)".

The losses are pure torch functions here; :class:`PrivilegedTargets` and :class:`HindsightTargets`
apply them to an update's batch (each is the update's :class:`~trainers.loop.ppo.AuxTerm`: the routing
of steps to the teacher's loss is the teacher's own), and :class:`PrivilegedTeacher` and
:class:`HindsightTeacher` build those targets (no gradient) as the update's
:class:`~trainers.loop.updater.AuxiliaryLoss`. Both are registered in :mod:`trainers.teacher_registry`.

>>> import torch
>>> p = torch.log(torch.tensor([[0.5, 0.5]])); q = torch.log(torch.tensor([[0.9, 0.1]]))
>>> round(float(symmetric_kl(p, q)), 4)  # 0.5 * (0.5108 + 0.3681)
0.4394
"""

# Over 500 lines: the two built-in teachers: their losses, their update terms and their skill writers.
from __future__ import annotations

import copy
import dataclasses
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol, Sequence

import numpy as np
import torch

from agents.contract import scoring_with
from trainers.loop.ppo import micro_batches
from trainers.teacher_registry import PRIVILEGED_KEY
from wrappers.errors import UserError

__all__ = [
    "HindsightTargets",
    "HindsightTeacher",
    "PolicySkillWriter",
    "PrivilegedTargets",
    "PrivilegedTeacher",
    "SkillWriter",
    "Teacher",
    "TeacherInputs",
    "TemplateSkillWriter",
    "Transcript",
    "ema_update",
    "entropies",
    "entropy_weights",
    "gated_distill",
    "hindsight_inputs",
    "make_hindsight",
    "make_privileged",
    "normalised_weights",
    "privileged_inputs",
    "symmetric_kl",
    "topk_symmetric_kl",
    "transcripts_of",
]


# ----------------------------------------------------------------------------------------------
# Losses: pure torch.
# ----------------------------------------------------------------------------------------------
def symmetric_kl(teacher_logp: torch.Tensor, student_logp: torch.Tensor) -> torch.Tensor:
    """``0.5 KL(T || S) + 0.5 KL(S || T)`` over the last axis (log-distributions in, one value per row)."""
    kl_ts = (teacher_logp.exp() * (teacher_logp - student_logp)).sum(-1)
    kl_st = (student_logp.exp() * (student_logp - teacher_logp)).sum(-1)
    return 0.5 * kl_ts + 0.5 * kl_st


def topk_symmetric_kl(teacher_top: torch.Tensor, top_index: torch.Tensor, student_logp: torch.Tensor) -> torch.Tensor:
    """:func:`symmetric_kl` on the teacher's top-k tokens, both sides renormalised there.

    ``teacher_top``: ``[n, k]`` teacher log-probs of its top-k tokens; ``top_index``: ``[n, k]``
    their ids; ``student_logp``: ``[n, V]``.
    """
    s = torch.log_softmax(student_logp.gather(-1, top_index), dim=-1)
    return symmetric_kl(torch.log_softmax(teacher_top, dim=-1), s)


def entropies(logp: torch.Tensor) -> torch.Tensor:
    """The entropy of each row of a log-distribution."""
    p = logp.exp()
    return -torch.where(p > 0, p * logp, torch.zeros_like(p)).sum(-1)


def entropy_weights(teacher_logp: torch.Tensor, beta: float = 1.0, clip: float = 2.0) -> torch.Tensor:
    """Per row: ``exp(-beta * H_T)``, normalised to mean 1 over the rows, clipped at ``clip`` (a
    confident teacher weighs more, no row more than ``clip`` times the mean).

    >>> w = entropy_weights(torch.log(torch.tensor([[1.0, 1e-9], [0.5, 0.5]])))
    >>> [round(v, 4) for v in w.tolist()]  # exp(0) and exp(-ln 2), over their mean 0.75
    [1.3333, 0.6667]
    """
    return normalised_weights(entropies(teacher_logp), beta, clip)


def normalised_weights(h: torch.Tensor, beta: float = 1.0, clip: float = 2.0) -> torch.Tensor:
    """``exp(-beta * h)`` normalised to mean 1, clipped at ``clip`` (rows of any lengths, their
    entropies ``h`` concatenated)."""
    w = torch.exp(-beta * h)
    return (w / w.mean().clamp_min(1e-12)).clamp(max=clip)


def gated_distill(l_theta: torch.Tensor, l_skill: torch.Tensor, beta: float = 5.0) -> tuple[torch.Tensor, torch.Tensor]:
    """SEED's gated on-policy distillation term per token and its gate:
    ``g * (sg[l_skill] - l_theta)`` with ``g = sigmoid(beta * sg[l_skill - l_theta])``.

    >>> t, g = gated_distill(torch.tensor([-2.0]), torch.tensor([-1.0]))
    >>> round(float(g), 4), round(float(t), 4)
    (0.9933, 0.9933)
    """
    gate = torch.sigmoid(beta * (l_skill - l_theta).detach())
    return gate * (l_skill.detach() - l_theta), gate


@torch.no_grad()
def ema_update(teacher: torch.nn.Module, student: torch.nn.Module, tau: float) -> None:
    """``theta_T <- (1 - tau) theta_T + tau theta_S`` for every parameter (buffers copied)."""
    for pt, ps in zip(teacher.parameters(), student.parameters()):
        pt.mul_(1.0 - tau).add_(ps.detach().to(pt.dtype), alpha=tau)
    for bt, bs in zip(teacher.buffers(), student.buffers()):
        bt.copy_(bs)


@dataclass
class PrivilegedTargets:
    """What :func:`trainers.loop.ppo.ppo_update` needs for the privileged teacher's term, per step of the
    batch (the update's :class:`~trainers.loop.ppo.AuxTerm`).

    Attributes:
        routed: the step takes the distillation loss instead of the RL loss (its group failed completely).
        teacher: the teacher's log-distribution of a routed step (score mode ``[K]``; generate mode
            ``[n, k]``, its top-k tokens), else None.
        index: generate mode: the top-k token ids ``[n, k]``; else None.
        weight: each routed step's per-row weights (:func:`entropy_weights`).
    """

    routed: list[bool] = field(default_factory=list)
    teacher: list[torch.Tensor | None] = field(default_factory=list)
    index: list[torch.Tensor | None] = field(default_factory=list)
    weight: list[torch.Tensor | None] = field(default_factory=list)
    #: the update's sums: the weighted KL and its weight
    sums: dict[str, float] = field(default_factory=lambda: {"kl": 0.0, "kl_weight": 0.0})

    def split(self, part: list[int]) -> tuple[list[int], list[int]]:
        """A mini-batch's routed steps take the distillation loss, the others the RL loss."""
        return [j for j in part if not self.routed[j]], [j for j in part if self.routed[j]]

    def routed_loss(self, routed: list[int], batch: Any, cfg: Any, learner: Any, comm: Any, share: float) -> None:
        """The loss on a mini-batch's ``routed`` steps: the weighted mean of the symmetric KL
        between teacher and student over their decisions (score mode) or response tokens
        (generate mode), times ``share`` (the routed steps' part of the mini-batch)."""
        if learner.distributions is None:
            raise RuntimeError("a privileged teacher needs Learner.distributions (the student's whole distributions)")
        total_w = float(comm.sum([sum(float(self.weight[j].sum()) for j in routed)])[0])  # type: ignore[union-attr, misc]  # a routed step always has its weights (Optional in the list type)
        if total_w <= 0:
            return
        for micro in micro_batches(routed, batch.cost, cfg, batch.keys or None):
            dists = learner.distributions([batch.outputs[j] for j in micro])
            losses = []
            for j, d in zip(micro, dists):
                t, w = self.teacher[j].to(d.device), self.weight[j].to(d.device)  # type: ignore[union-attr]  # a routed step always has its teacher and weights
                idx = self.index[j]
                kl = (
                    topk_symmetric_kl(t, idx.to(d.device), d)
                    if idx is not None
                    else symmetric_kl(t, d.float()).reshape(1)
                )
                losses.append((w.reshape(-1) * kl.reshape(-1)).sum())
                self.sums["kl"] += float((w.reshape(-1) * kl.detach().reshape(-1)).sum())
                self.sums["kl_weight"] += float(w.sum())
            (comm.loss_scale * share * torch.stack(losses).sum() / total_w).backward()

    def micro_term(
        self, micro: Sequence[int], lp: torch.Tensor, w_t: torch.Tensor, batch: Any, mb_weight: float, loss_scale: float
    ) -> torch.Tensor | None:
        """No term beside the RL loss (the routed steps take their own loss)."""
        return None

    def stats(self, comm: Any) -> dict[str, float]:
        """The mean symmetric KL under the entropy weights."""
        kl, kl_w = comm.sum(list(self.sums.values()))
        return {"distill/kl": kl / kl_w if kl_w > 0 else 0.0}


@dataclass
class HindsightTargets:
    """What :func:`trainers.loop.ppo.ppo_update` needs for the hindsight teacher's term, per step of the
    batch (the update's :class:`~trainers.loop.ppo.AuxTerm`).

    Attributes:
        skill: ``l_skill``, the log-probs of the step's own tokens with the skill in context (None:
            no skill).
        coef, beta: SEED's lambda and gate beta.
    """

    skill: list[torch.Tensor | None] = field(default_factory=list)
    coef: float = 0.01
    beta: float = 5.0
    #: the update's sums: the gates and their tokens
    sums: dict[str, float] = field(default_factory=lambda: {"gate": 0.0, "gate_tokens": 0.0})

    def split(self, part: list[int]) -> tuple[list[int], list[int]]:
        """Every step takes the RL loss (the term is added to it)."""
        return part, []

    def routed_loss(self, routed: list[int], batch: Any, cfg: Any, learner: Any, comm: Any, share: float) -> None:
        """No step is routed away from the RL loss."""

    def micro_term(
        self, micro: Sequence[int], lp: torch.Tensor, w_t: torch.Tensor, batch: Any, mb_weight: float, loss_scale: float
    ) -> torch.Tensor | None:
        """SEED's gated term of a micro-batch, ``lambda * sum(w * g * (sg[l_skill] - l_theta)) /
        mb_weight`` (the RL loss's token weights and normaliser), over the steps that have a skill."""
        offsets = np.cumsum([0] + [batch.token_counts[j] for j in micro])
        terms, gates, weights = [], [], []
        for i, j in enumerate(micro):
            skill = self.skill[j]
            if skill is None:
                continue
            mine = lp[offsets[i] : offsets[i + 1]]
            term, gate = gated_distill(mine, skill.to(lp.device).reshape(mine.shape), self.beta)
            terms.append(term)
            gates.append(gate)
            weights.append(w_t[offsets[i] : offsets[i + 1]])
        if not terms:
            return lp.sum() * 0.0
        gate = torch.cat(gates)
        self.sums["gate"] += float(gate.sum())
        self.sums["gate_tokens"] += float(gate.numel())
        return self.coef * loss_scale * (torch.cat(weights) * torch.cat(terms)).sum() / mb_weight

    def stats(self, comm: Any) -> dict[str, float]:
        """The mean gate."""
        gate, gate_n = comm.sum(list(self.sums.values()))
        return {"distill/gate": gate / gate_n if gate_n > 0 else 0.0}


# ----------------------------------------------------------------------------------------------
# Hindsight skills.
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Transcript:
    """What a skill writer may read: the instruction the agent was shown, and its own
    (observation, action) pairs and final observation. Nothing the agent did not observe."""

    goal: str
    steps: tuple[tuple[str, str], ...]
    final_observation: str = ""


class SkillWriter(Protocol):
    """Writes a short hindsight skill for one finished trajectory."""

    def write(self, transcripts: Sequence[Transcript]) -> list[str]: ...


_STOP = frozenset(
    "a an the and or of to in on at for with from your you is are it its this that some put place "
    "find take then them two task look".split()
)


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 2 and w not in _STOP]


class TemplateSkillWriter:
    """A few sentences built from the transcript alone (the CPU default: no model, no ground truth):

    1. where a word of the instruction first appeared: ``"X" appeared after "ACTION".``;
    2. the places gone to more than once: ``Going back to P brought nothing new.`` (``go to``
       and ``click`` targets);
    3. the actions taken three times or more: ``"A" was repeated N times: try something else.``

    >>> t = Transcript("put a mug in the sink", (("You are in a room.", "go to desk 1"),
    ...     ("On the desk 1, you see a pen 1.", "go to shelf 1"), ("On the shelf 1, you see a mug 1.", "go to desk 1"),
    ...     ("On the desk 1, you see a pen 1.", "go to desk 1")), "On the desk 1, you see a pen 1.")
    >>> print(TemplateSkillWriter().write([t])[0])
    Hindsight from an earlier attempt at this task: "mug" appeared after "go to shelf 1". Going back to desk 1 brought nothing new.
    """

    def write(self, transcripts: Sequence[Transcript]) -> list[str]:
        return [self.write_one(t) for t in transcripts]

    def write_one(self, t: Transcript) -> str:
        goal = list(dict.fromkeys(_words(t.goal)))
        after = [obs for obs, _ in t.steps[1:]] + [t.final_observation]
        sentences: list[str] = []
        seen: set[str] = set(w for w in _words(t.steps[0][0]) if w in goal) if t.steps else set()
        for (_, action), obs in zip(t.steps, after):
            new = [w for w in goal if w not in seen and w in set(_words(obs))]
            if new:
                sentences.append(f'"{new[0]}" appeared after "{action}".')
                seen.update(new)
        places = Counter(m.group(2) for _, a in t.steps for m in [re.match(r"(go to|click\[)\s*([^\]]+)", a)] if m)
        again = [p for p, n in places.items() if n > 1]
        if again:
            sentences.append(f"Going back to {', '.join(again[:3])} brought nothing new.")
        repeats = [
            (a, n)
            for a, n in Counter(a for _, a in t.steps).items()
            if n >= 3 and not a.startswith(("go to", "click["))
        ]
        for a, n in repeats[:2]:
            sentences.append(f'"{a}" was repeated {n} times: try something else.')
        body = " ".join(sentences) if sentences else "nothing in it is worth repeating; explore other places."
        return f"Hindsight from an earlier attempt at this task: {body}"


class PolicySkillWriter:
    """The policy writes the skill itself from a hindsight prompt (generate mode: its backend)."""

    PROMPT = (
        "Here is an earlier attempt at a task.\nTask: {goal}\n{steps}\nWrite one or two short sentences: what "
        "to do, or what to avoid, next time.\nLesson:"
    )

    def __init__(self, policy: Any, max_new_tokens: int = 48) -> None:
        if getattr(policy, "backend", None) is None:
            raise ValueError("skill_writer policy needs a generating policy (--policy-mode generate)")
        self.policy, self.max_new_tokens = policy, max_new_tokens

    def write(self, transcripts: Sequence[Transcript]) -> list[str]:
        tok = self.policy.tokenizer
        prompts = []
        for t in transcripts:
            steps = "\n".join(f"> {a}\n{o[:200]}" for o, a in t.steps[-8:])
            prompts.append(tok.encode(self.PROMPT.format(goal=t.goal, steps=steps), add_special_tokens=False))
        cfg = self.policy.sampling.with_(max_new_tokens=self.max_new_tokens, min_new_tokens=0, n=1)
        gens = self.policy.backend.generate(prompts, cfg, seed=0)
        return [f"Hindsight from an earlier attempt at this task: {g.text.strip()[:400]}" for g in gens]


# ----------------------------------------------------------------------------------------------
# The teacher the trainer holds.
# ----------------------------------------------------------------------------------------------
def _with_context(step: Any, prefix: list[int]) -> Any:
    """``step`` with ``prefix`` (the privileged text or the skill) before its prompt."""
    return dataclasses.replace(step, prompt_ids=list(prefix) + list(step.prompt_ids))


#: each step's context text (privileged or a skill), or ``None`` for none
StepTexts = Sequence[Optional[str]]


class Teacher:
    """What the two built-in teachers share: the policy they distill into, the samples of what
    they read, and the encoding of a context text. A teacher is the update's
    :class:`~trainers.loop.updater.AuxiliaryLoss`: :meth:`inputs` of a rollout, :meth:`kept` steps,
    :meth:`loss_targets` of the update's steps (no gradient) and :meth:`after_step`.

    Args:
        policy: the student (its ``distributions``, ``compute_logprobs_and_entropy``, ``tokenizer``).
        model: the student's module.
        samples_per_iteration: context texts kept per iteration for ``distill_samples.jsonl``.
    """

    #: the registered name (:mod:`trainers.teacher_registry`), written with each sample
    name = "teacher"

    def __init__(self, policy: Any, model: torch.nn.Module, *, samples_per_iteration: int = 4) -> None:
        if not hasattr(policy, "distributions"):
            raise UserError(
                f"distill {self.name}: the policy {type(policy).__name__} has no distributions() to distill "
                "into (the LLM policies of agents.policy have)"
            )
        self.policy, self.model = policy, model
        self.samples_per_iteration = samples_per_iteration
        #: an EMA teacher's weights (a checkpoint keeps them), None for a teacher without one
        self.ema: torch.nn.Module | None = None
        self.samples: list[dict[str, Any]] = []

    def ensure_ema(self) -> torch.nn.Module:
        """The EMA teacher, first copied from the student's current weights."""
        if self.ema is None:
            self.ema = copy.deepcopy(self.model).eval()
            for p in self.ema.parameters():
                p.requires_grad_(False)
        return self.ema

    def after_step(self) -> None:
        """After each optimizer step (the EMA teacher follows the student)."""

    def loss_targets(
        self, steps: Sequence[Any], chosen: Sequence[int], inputs: "TeacherInputs", iteration: int
    ) -> tuple[Any, dict[str, float]]:
        """:meth:`targets` of an iteration's :class:`TeacherInputs`, with their metrics."""
        out, stats = self.targets(steps, chosen, inputs.texts, inputs.routed, iteration)
        return out, {**stats, **inputs.metrics}

    def targets(
        self, steps: Sequence[Any], chosen: Sequence[int], texts: StepTexts, routed: Sequence[bool], iteration: int
    ) -> tuple[Any, dict[str, float]]:
        raise NotImplementedError

    def _encode(self, text: str) -> list[int]:
        return list(self.policy.tokenizer.encode(text.strip() + "\n\n", add_special_tokens=False))

    def _contexts(
        self, steps: Sequence[Any], chosen: Sequence[int], texts: Sequence[str | None], work: Sequence[int]
    ) -> list[Any]:
        """The ``work`` steps' outputs with their context text before the prompt (encoded once per text)."""
        prefix = {text: self._encode(text) for text in {texts[chosen[j]] or "" for j in work}}
        return [_with_context(steps[chosen[j]].output, prefix[texts[chosen[j]] or ""]) for j in work]

    def _sample(
        self,
        steps: Sequence[Any],
        chosen: Sequence[int],
        texts: Sequence[str | None],
        work: Sequence[int],
        iteration: int,
    ) -> None:
        seen: set[str] = set()
        for j in work:
            text = texts[chosen[j]] or ""
            if text in seen:
                continue
            seen.add(text)
            step = steps[chosen[j]]
            self.samples.append(
                {
                    "iteration": iteration,
                    "mode": self.name,
                    "context": text,
                    "observation": step.obs[:300],
                    "action": step.action,
                }
            )
            if len(seen) >= self.samples_per_iteration:
                break


class PrivilegedTeacher(Teacher):
    """I-SDPO: an EMA of the student reads the env's privileged text and re-scores the student's
    own decisions in the all-failed groups, whose steps take the distillation loss instead of the
    RL loss. ``tau``: EMA rate; ``top_k``: generate mode, tokens compared per position."""

    name = "privileged"

    def __init__(
        self, policy: Any, model: torch.nn.Module, *, tau: float = 0.05, top_k: int = 20, samples_per_iteration: int = 4
    ) -> None:
        if not 0.0 <= tau <= 1.0:
            raise ValueError(f"tau must be in [0, 1] (the EMA rate of the teacher), got {tau!r}")
        super().__init__(policy, model, samples_per_iteration=samples_per_iteration)
        self.tau, self.top_k = tau, top_k

    def after_step(self) -> None:
        """The EMA teacher follows the student."""
        if self.ema is not None:
            ema_update(self.ema, self.model, self.tau)

    def inputs(self, rollout: Any, step_failed: Sequence[bool], env: str = "this") -> "TeacherInputs":
        """This teacher's inputs of an iteration's ``rollout`` (:func:`privileged_inputs`)."""
        return privileged_inputs(rollout, step_failed, env=env)

    def kept(self, inputs: "TeacherInputs", n_steps: int) -> list[bool]:
        """The routed steps take its loss whatever their advantage."""
        return list(inputs.routed)

    def targets(
        self, steps: Sequence[Any], chosen: Sequence[int], texts: StepTexts, routed: Sequence[bool], iteration: int
    ) -> tuple[PrivilegedTargets, dict[str, float]]:
        """Targets of the ``chosen`` steps (indices into ``steps``); ``texts[i]``: step i's
        privileged text; ``routed[i]``: step i's group failed completely."""
        n = len(chosen)
        out = PrivilegedTargets(routed=[bool(routed[i]) for i in chosen])
        out.teacher, out.index, out.weight = [None] * n, [None] * n, [None] * n
        work = [j for j in range(n) if out.routed[j]]
        if not work:
            return out, {"distill/steps": 0.0}
        ctx = self._contexts(steps, chosen, texts, work)
        with torch.no_grad():
            with scoring_with(self.policy, self.ensure_ema()):
                dists = self.policy.distributions(ctx)
            h_rows = []
            for j, d in zip(work, dists):
                d = d.detach().float().cpu()
                if d.dim() == 2:  # generate mode: the teacher's top-k tokens per position
                    top, idx = d.topk(min(self.top_k, d.shape[-1]), dim=-1)
                    out.teacher[j], out.index[j] = top, idx
                else:
                    out.teacher[j], d = d, d[None]
                h_rows.append(entropies(d))
            w = normalised_weights(torch.cat(h_rows))  # over every routed row of the batch
            at = 0
            for j, h in zip(work, h_rows):
                out.weight[j] = w[at : at + h.numel()]
                at += h.numel()
        self._sample(steps, chosen, texts, work, iteration)
        return out, {"distill/steps": float(len(work))}


class HindsightTeacher(Teacher):
    """SEED: the student re-scores its own sampled actions with a hindsight skill of its
    trajectory in context, and a gated term pulls it there on every group. ``writer``: the
    :class:`SkillWriter`; ``coef``, ``beta``: the term's lambda and gate beta."""

    name = "hindsight"

    def __init__(
        self,
        policy: Any,
        model: torch.nn.Module,
        writer: "SkillWriter | None" = None,
        *,
        coef: float = 0.01,
        beta: float = 5.0,
        samples_per_iteration: int = 4,
    ) -> None:
        super().__init__(policy, model, samples_per_iteration=samples_per_iteration)
        self.writer, self.coef, self.beta = writer, coef, beta

    def inputs(self, rollout: Any, step_failed: Sequence[bool], env: str = "this") -> "TeacherInputs":
        """This teacher's inputs of an iteration's ``rollout`` (:func:`hindsight_inputs`)."""
        return hindsight_inputs(rollout, self.writer)

    def kept(self, inputs: "TeacherInputs", n_steps: int) -> list[bool]:
        """Its term acts on every step."""
        return [True] * n_steps

    def targets(
        self, steps: Sequence[Any], chosen: Sequence[int], texts: StepTexts, routed: Sequence[bool], iteration: int
    ) -> tuple[HindsightTargets, dict[str, float]]:
        """Targets of the ``chosen`` steps; ``texts[i]``: the skill of step i's trajectory."""
        n = len(chosen)
        out = HindsightTargets(skill=[None] * n, coef=self.coef, beta=self.beta)
        work = [j for j in range(n) if texts[chosen[j]]]
        if not work:
            return out, {"distill/steps": 0.0}
        ctx = self._contexts(steps, chosen, texts, work)
        with torch.no_grad():
            lps, _ = self.policy.compute_logprobs_and_entropy(ctx, with_entropy=False)
            for j, lp in zip(work, lps):
                out.skill[j] = lp.detach().float().cpu()
        self._sample(steps, chosen, texts, work, iteration)
        return out, {"distill/steps": float(len(work))}


def make_privileged(cfg: Any, policy: Any, model: torch.nn.Module) -> PrivilegedTeacher:
    """The privileged teacher of a run's config (``distill_tau``, ``distill_top_k``)."""
    return PrivilegedTeacher(policy, model, tau=cfg.distill_tau, top_k=cfg.distill_top_k)


def make_hindsight(cfg: Any, policy: Any, model: torch.nn.Module) -> HindsightTeacher:
    """The hindsight teacher of a run's config (``skill_writer``, ``distill_lambda``, ``distill_gate_beta``)."""
    writer = PolicySkillWriter(policy) if cfg.skill_writer == "policy" else TemplateSkillWriter()
    return HindsightTeacher(policy, model, writer, coef=cfg.distill_lambda, beta=cfg.distill_gate_beta)


def transcripts_of(rollout: Any) -> list[Transcript]:
    """One :class:`Transcript` per trajectory of a rollout: the instruction it was shown and its
    own observations and actions (a tree's leaf: its whole path)."""
    out = []
    for traj, path in zip(rollout.trajectories, rollout.paths()):
        steps = tuple((rollout.steps[k].obs, rollout.steps[k].action) for k in path)
        final = rollout.steps[path[-1]].next_obs if path else ""
        out.append(Transcript(traj.goal, steps, final))
    return out


@dataclass
class TeacherInputs:
    """What the teacher needs of an iteration beside the steps: per step its context text and
    whether it takes the distillation loss (privileged: its group failed completely), and the
    share of groups that got the teacher's loss."""

    texts: list[str]
    routed: list[bool]
    metrics: dict[str, float]


def privileged_inputs(rollout: Any, step_failed: Sequence[bool], env: str = "this") -> TeacherInputs:
    """Per step of ``rollout``, the privileged teacher's context and routing: the privileged text of
    the step's trajectory; a step takes the distillation loss exactly when its group failed
    completely (``step_failed``, the estimator's all-failed flag per step), the others the RL loss alone.

    Raises:
        UserError: a rollout whose env offered no privileged text.
    """
    texts = [rollout.trajectories[s.traj].privileged for s in rollout.steps]
    if rollout.steps and not any(texts):
        raise UserError(
            f"distill privileged: the {env} env gave no info['{PRIVILEGED_KEY}'] at reset; only an env "
            "that offers privileged text can be distilled from it (ALFWorld, WebShop)"
        )
    routed = [bool(f) for f in step_failed]
    groups = {t.group for t in rollout.trajectories}
    failed_groups = {rollout.trajectories[s.traj].group for s, f in zip(rollout.steps, routed) if f}
    share = len(failed_groups) / max(len(groups), 1)
    return TeacherInputs(texts, routed, {"distill/group_frac": share})


def hindsight_inputs(rollout: Any, writer: "SkillWriter | None") -> TeacherInputs:
    """Per step of ``rollout``, the hindsight teacher's context: the skill ``writer`` wrote for the
    step's trajectory; no step is routed (the gated term applies to every group)."""
    if writer is None:
        raise ValueError("hindsight needs a skill writer")
    skills = writer.write(transcripts_of(rollout))
    texts = [skills[s.traj] for s in rollout.steps]
    share = 1.0 if rollout.steps else 0.0
    return TeacherInputs(texts, [False] * len(rollout.steps), {"distill/group_frac": share})
