"""What every LLM policy shares: its options, its step record, its contract with the trainer, its prompt.

:class:`PolicyOptions` holds the defaults of both modes, in one place (the trainer's config takes
its defaults from it). :class:`~agents.contract.TrainablePolicy` (in :mod:`agents.contract`, with
:class:`~agents.contract.StepOutput`) is the whole contract a trainer relies on:

* ``act`` -- one decision per observation, recorded as a :class:`StepOutput`;
* ``compute_logprobs_and_entropy`` -- the log-probs (with grad) of recorded steps under the live
  model, the PPO ratio's numerator;
* ``behaviour_logprobs`` -- the log-probs recorded at acting time, shaped like the above;
* ``sync`` -- make the sampler act with the trained weights after an update;
* ``model`` -- the ``torch.nn.Module`` being trained.

:class:`LLMPolicy` is the base of the two modes (:class:`agents.score_policy.ScorePolicy`,
:class:`agents.generate_policy.GeneratePolicy`): model, tokenizer, template and prompt.
"""

from __future__ import annotations

import abc
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from agents.backends.base import GenerationBackend, SamplingConfig
from agents.contract import Histories, Infos, Observations, Policy, StepOutput, TrainablePolicy
from agents.parsing import FORMATS, sanitize_text
from agents.prompting import admissible_commands, build_messages, load_template, render_prompt
from agents.prompting import goal_text as _goal_text

__all__ = ["LLMPolicy", "Policy", "PolicyOptions", "StepOutput", "TrainablePolicy", "admissible_for_prompt"]


@dataclass(frozen=True, kw_only=True)
class PolicyOptions:
    """How a policy prompts, answers and is penalised; the defaults of both modes and of the trainer.

    Attributes:
        fmt: generate mode's answer format (:data:`agents.parsing.FORMATS`); score mode always
            scores ``<action>c</action>`` after a prompt asking for the ``action`` format.
        history_k: (observation, action) pairs shown in the prompt.
        sampling: sampling parameters (``n`` must be 1: one answer per observation); score
            mode uses ``temperature`` (0: argmax) for its softmax over commands.
        invalid_penalty: penalty recorded for an unparseable answer.
        invalid_handling: ``"send"`` the parser's best-effort text, or the template's ``"noop"``.
        noop_action: overrides the template's no-op command.
        score_batch_size: candidates per forward pass when scoring.
        score_norm: score mode's command score: ``"sum"`` of its token log-probs or their
            ``"mean"``. With the sum an untrained model prefers the shortest commands (every extra
            token costs ~log|V| nats), so the G members of a group act alike; the mean gives every
            command a fair start. Used both when acting and when re-scoring, so PPO ratios still
            start at 1.
        avoid_repeats: score mode: leave out of the candidates every command already taken in
            this episode from the same observation text
            (:func:`agents.score_policy.repeated_commands`; "action elimination": a command tried
            here before that left the agent seeing the same thing again is a loop). When that
            would leave nothing, all commands stay. The candidates are stored with each step, so
            re-scoring sees the same reduced set.
        batch_decisions: score mode: score the decisions of a whole batch (every env of a vector
            step, every step of an update micro-batch) in packed forward passes
            (:func:`agents.logprobs.packed_candidate_logprobs`); ``False``: one forward pass per
            decision (the reference path; equal up to float rounding, ~1e-6).
        packing: how ``batch_decisions`` packs a pass: ``"tree"``, one prompt trie with chunked
            sparse tree attention (:func:`agents.tree_attention.tree_candidate_logprobs`; models
            that route attention through transformers' attention interface), or ``"rows"``,
            rows of ~512 positions with dense tree masks (any model taking 4-D masks).
        batch_tokens: token positions per packed forward pass (rows: rows x longest row; tree:
            trie tokens).
        logit_chunk: generate mode: response positions whose logits a forward pass holds at a
            time when it computes log-probs (:func:`agents.logprobs.chunked_head_logprobs`); 0:
            all of a pass's at once.

    >>> PolicyOptions(history_k=-1)
    Traceback (most recent call last):
    ...
    ValueError: history_k must be an integer >= 0, got -1
    """

    fmt: str = "action"
    history_k: int = 1
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    invalid_penalty: float = 0.1
    invalid_handling: str = "send"
    noop_action: str | None = None
    score_batch_size: int = 64
    score_norm: str = "sum"
    avoid_repeats: bool = True
    batch_decisions: bool = True
    packing: str = "tree"
    batch_tokens: int = 8192
    logit_chunk: int = 0

    def __post_init__(self) -> None:
        for name, choices in (
            ("fmt", FORMATS),
            ("invalid_handling", ("send", "noop")),
            ("score_norm", ("sum", "mean")),
            ("packing", ("rows", "tree")),
        ):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {', '.join(choices)}, got {getattr(self, name)!r}")
        if isinstance(self.history_k, bool) or not isinstance(self.history_k, int) or self.history_k < 0:
            raise ValueError(f"history_k must be an integer >= 0, got {self.history_k!r}")
        for name in ("score_batch_size", "batch_tokens"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if int(self.logit_chunk) < 0:
            raise ValueError(f"logit_chunk must be >= 0 (0: off), got {self.logit_chunk!r}")
        if self.sampling.n != 1:
            raise ValueError(
                "a policy takes one answer per observation: use SamplingConfig(n=1) (groups come from G env copies)"
            )

    def replace(self, **changes: Any) -> "PolicyOptions":
        """A copy with ``changes`` applied (and validated)."""
        return dataclasses.replace(self, **changes)


def admissible_for_prompt(info: dict[str, Any]) -> list[str]:
    """The admissible commands of ``info`` as the prompt (and its memory) shows them."""
    return [sanitize_text(c, 1000) for c in admissible_commands(info)]


class LLMPolicy(abc.ABC):
    """A language-model agent for the ProGPO envs: the part both modes share.

    Args:
        model: the causal LM being trained (``compute_logprobs`` runs it with grad).
        tokenizer: its tokenizer.
        backend: a :class:`~agents.backends.base.GenerationBackend` (generate mode; score mode
            scores with ``model`` itself and takes ``None``).
        env_name: prompt template: ``"alfworld"``, ``"alfworld-memory"``, ``"alfworld-notes"`` (score
            mode: a note from the transcript before each command), ``"webshop"``, a gym id or a
            YAML path.
        options: :class:`PolicyOptions` (``None``: the defaults).
        **overrides: fields of :class:`PolicyOptions` to change, e.g. ``history_k=2``.
    """

    #: ``"score"`` or ``"generate"``
    mode: str = ""
    #: whether the mode samples with a backend (refused without one)
    needs_backend: bool = False

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        backend: GenerationBackend | None = None,
        env_name: str = "alfworld",
        options: PolicyOptions | None = None,
        **overrides: Any,
    ) -> None:
        if self.needs_backend and backend is None:
            raise ValueError(f"{self.mode} mode needs a backend (agents.backends.make_backend)")
        options = options or PolicyOptions()
        if overrides:
            options = options.replace(**overrides)
        self.model = model
        self.tokenizer = tokenizer
        self.backend = backend
        self.env_name = env_name
        self.template = load_template(env_name)
        self.options = options
        self.noop_action = self.template.noop_action if options.noop_action is None else options.noop_action
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_token_id = int(pad if pad is not None else tokenizer.eos_token_id)

    @property
    def sampling(self) -> SamplingConfig:
        return self.options.sampling

    @property
    def history_k(self) -> int:
        return self.options.history_k

    @property
    def prompt_format(self) -> str:
        """The answer format the prompt asks for."""
        return self.options.fmt

    def prompt_ids(self, observation: str, info: dict[str, Any], history: Sequence[tuple[str, str]]) -> list[int]:
        """Token ids of the prompt for one observation."""
        step = info.get("step")
        step = int(step) if step is not None else len(history)
        messages = build_messages(
            self.env_name,
            goal=_goal_text(info.get("goal", "")),
            observation=observation,
            admissible=admissible_for_prompt(info),
            history=list(history),
            step=step,
            k=self.history_k,
            fmt=self.prompt_format,
        )
        return render_prompt(self.tokenizer, messages)

    def _prompts(
        self,
        observations: Sequence[str],
        infos: Sequence[dict[str, Any]],
        histories: Sequence[Sequence[tuple[str, str]]] | None,
    ) -> tuple[list[list[int]], list[Any]]:
        """Check the batch's lengths and render its prompts: (prompts, histories)."""
        n = len(observations)
        hs = list(histories) if histories is not None else [[] for _ in range(n)]
        if len(infos) != n or len(hs) != n:
            raise ValueError(f"{n} observations, {len(infos)} infos and {len(hs)} histories")
        return [self.prompt_ids(o, dict(i), h) for o, i, h in zip(observations, infos, hs)], hs

    @abc.abstractmethod
    def act(
        self, observations: Observations, infos: Infos, histories: Histories = None, *, seed: int | None = None
    ) -> list[StepOutput]:
        """One decision per observation (batched). ``histories[i]``: env i's earlier pairs."""

    @abc.abstractmethod
    def compute_logprobs_and_entropy(
        self, steps: Sequence[StepOutput], batch_size: int | None = None, with_entropy: bool = True
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Log-probs WITH grad under the current ``self.model``, and entropies (an empty list unless
        ``with_entropy``), in one forward pass."""

    def compute_logprobs(self, steps: Sequence[StepOutput], batch_size: int | None = None) -> list[torch.Tensor]:
        """Log-probs WITH grad under the current ``self.model`` (PPO's new log-probs); a fresh
        forward pass reproduces :meth:`behaviour_logprobs` to < 1e-4 in fp32."""
        return self.compute_logprobs_and_entropy(steps, batch_size=batch_size, with_entropy=False)[0]

    def compute_entropy(self, steps: Sequence[StepOutput], batch_size: int | None = None) -> list[torch.Tensor]:
        """Per-token entropies of the sampling distribution (score mode: of the candidate softmax)."""
        return self.compute_logprobs_and_entropy(steps, batch_size=batch_size, with_entropy=True)[1]

    def behaviour_logprobs(self, step: StepOutput) -> torch.Tensor:
        """The log-probs recorded when ``step`` was taken (float32, 1-D)."""
        return torch.as_tensor(step.old_logprobs, dtype=torch.float32).reshape(-1)

    def sync(self) -> None:
        """Act with the trained weights from now on (nothing to do when acting runs ``model``)."""

    def __repr__(self) -> str:
        name = getattr(getattr(self.model, "config", None), "name_or_path", type(self.model).__name__)
        return (
            f"{type(self).__name__}(model={name!r}, env={self.template.name!r}, fmt={self.prompt_format!r}, "
            f"history_k={self.history_k}, sampling={self.sampling})"
        )
