"""The LLM policy: observation -> prompt -> (generated or scored) answer -> env command.

Two modes:

* ``mode="generate"``: the backend samples an answer in format ``fmt``; the parser turns it
  into a command. ``old_logprobs`` are the sampling log-probs of the response tokens.
* ``mode="score"``: the policy distribution over the admissible commands is the softmax of
  each command's summed token log-probability (under ``sampling.temperature``); a command is
  drawn from it (argmax when the temperature is 0). The scored response of command ``c`` is
  ``<action>c</action>`` after a prompt that asks for the ``action`` format (a template may
  set its own ``score_response``, e.g. ``"{command}<|im_end|>"``). Placeholder
  commands such as WebShop's ``search[<query>]`` are filled with the goal instruction.

Invalid answers (generate mode) carry ``penalty = invalid_penalty`` and are sent to the env
as the parser's best-effort text (``invalid_handling="send"``) or as the template's no-op
command (``"noop"``: ``look`` for ALFWorld, the empty string for WebShop).

Example:
    >>> from agents.models import make_tiny_model
    >>> from agents.backends.hf import TransformersBackend
    >>> model, tok = make_tiny_model()
    >>> policy = LLMPolicy(model, tok, TransformersBackend(model, tok), "alfworld", mode="score")
    >>> info = {"goal": "put a mug in desk.", "admissible_commands": ["look", "go to desk 1"], "step": 0}
    >>> [out] = policy.act(["You are in the middle of a room."], [info], [[]], seed=0)
    >>> out.action in info["admissible_commands"], out.valid, out.chosen_index in (0, 1)
    (True, True, True)
    >>> lp = policy.compute_logprobs([out])[0]   # differentiable, matches out.old_action_logprob
    >>> abs(lp.item() - out.old_action_logprob) < 1e-4
    True
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from agents.backends.base import Generation, GenerationBackend, SamplingConfig
from agents.logprobs import candidate_logprobs, sequence_logprobs
from agents.memory import MEMORY_KINDS, command_notes
from agents.parsing import FORMATS, parse_action, sanitize_text
from agents.prompting import admissible_commands, build_messages, fill_placeholders, load_template, render_prompt
from agents.prompting import goal_text as _goal_text

__all__ = ["LLMPolicy", "SamplingConfig", "StepOutput", "repeated_commands"]

@dataclass(kw_only=True)
class StepOutput:
    """Everything one decision produced (one env step = one prompt/response pair).

    Attributes:
        prompt_ids: prompt token ids.
        response_ids: response token ids (score mode: the chosen command's ``<action>..</action>``).
        old_logprobs: log-prob of each response token under the distribution sampled from.
        text: the decoded response.
        action: the string to send to the env.
        valid: whether the answer parsed (score mode: always, unless there was no candidate).
        penalty: ``invalid_penalty`` for an invalid answer, else 0.
        reason: the parser's reason (``"ok"`` ...).
        finish_reason: ``"stop"`` / ``"length"`` (generate mode), ``"score"`` (score mode).
        candidates / candidate_ids / chosen_index / old_action_logprob: score mode only --
            the commands scored, their response token ids, the index drawn, and the log-prob
            of the drawn command under the candidate softmax.
    """

    prompt_ids: list[int]
    response_ids: list[int]
    old_logprobs: list[float]
    text: str
    action: str
    valid: bool
    penalty: float
    reason: str
    finish_reason: str = ""
    candidates: list[str] | None = None
    candidate_ids: list[list[int]] | None = None
    chosen_index: int | None = None
    old_action_logprob: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _admissible(info: dict[str, Any]) -> list[str]:
    """The admissible commands of ``info`` as the prompt (and its memory) shows them."""
    return [sanitize_text(c, 1000) for c in admissible_commands(info)]


def repeated_commands(observation: str, history: Sequence[tuple[str, str]]) -> frozenset[str]:
    """Commands already taken in ``history`` from an observation equal to ``observation``.

    >>> sorted(repeated_commands("at desk", [("at desk", "use lamp"), ("lamp on", "go to bed")]))
    ['use lamp']
    """
    now = " ".join(str(observation).split())
    return frozenset(" ".join(str(a).split()) for o, a in history if " ".join(str(o).split()) == now)


class LLMPolicy:
    """A language-model agent for the ProGPO envs.

    Args:
        model: the causal LM being trained (``compute_logprobs`` runs it with grad).
        tokenizer: its tokenizer.
        backend: a :class:`~agents.backends.base.GenerationBackend` (generate mode).
        env_name: prompt template: ``"alfworld"``, ``"alfworld-memory"``, ``"alfworld-notes"`` (score
            mode: a note from the transcript before each command, :meth:`command_notes`),
            ``"webshop"``, a gym id or a YAML path.
        mode: ``"generate"`` or ``"score"``.
        fmt: answer format (:data:`agents.parsing.FORMATS`).
        history_k: (observation, action) pairs shown in the prompt.
        sampling: sampling parameters (``n`` must be 1: one answer per observation).
        invalid_penalty: penalty recorded for an unparseable answer.
        invalid_handling: ``"send"`` or ``"noop"``.
        noop_action: overrides the template's no-op command.
        score_batch_size: candidates per forward pass when scoring (generate-mode
            ``compute_logprobs`` runs 8 sequences per forward pass unless told otherwise).
        avoid_repeats: score mode only: leave out of the candidates every command already
            taken in this episode from the same observation text (:func:`repeated_commands`;
            "action elimination": a command that was tried here before and left the agent
            seeing the same thing again is a loop). When that would leave nothing, all
            commands stay. Applied alike when acting and when re-scoring (the candidates
            are stored with each step).
        score_norm: score mode's command score: ``"sum"`` of its token log-probs (default) or
            their ``"mean"``. With the sum an untrained model prefers the shortest commands
            (every extra token costs ~log|V| nats), so the G members of a group act alike; the
            mean gives every command a fair start. Used both when acting and in
            ``compute_logprobs``, so PPO ratios still start at 1.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        backend: GenerationBackend | None,
        env_name: str = "alfworld",
        mode: str = "generate",
        fmt: str = "think_action",
        history_k: int = 2,
        sampling: SamplingConfig | None = None,
        invalid_penalty: float = 0.1,
        invalid_handling: str = "send",
        noop_action: str | None = None,
        score_batch_size: int = 64,
        score_norm: str = "sum",
        avoid_repeats: bool = False,
    ) -> None:
        if mode not in ("generate", "score"):
            raise ValueError(f"mode must be 'generate' or 'score', got {mode!r}")
        if fmt not in FORMATS:
            raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
        if invalid_handling not in ("send", "noop"):
            raise ValueError(f"invalid_handling must be 'send' or 'noop', got {invalid_handling!r}")
        if score_norm not in ("sum", "mean"):
            raise ValueError(f"score_norm must be 'sum' or 'mean', got {score_norm!r}")
        if history_k < 0:
            raise ValueError(f"history_k must be >= 0, got {history_k}")
        sampling = sampling or SamplingConfig()
        if sampling.n != 1:
            raise ValueError("LLMPolicy takes one answer per observation: use SamplingConfig(n=1) "
                             "(groups come from G env copies)")
        if mode == "generate" and backend is None:
            raise ValueError("generate mode needs a backend (agents.backends.make_backend)")
        self.model = model
        self.tokenizer = tokenizer
        self.backend = backend
        self.env_name = env_name
        self.template = load_template(env_name)
        self.mode = mode
        self.fmt = fmt
        self.history_k = int(history_k)
        self.sampling = sampling
        self.invalid_penalty = float(invalid_penalty)
        self.invalid_handling = invalid_handling
        self.noop_action = self.template.noop_action if noop_action is None else noop_action
        self.score_batch_size = int(score_batch_size)
        self.score_norm = score_norm
        self.avoid_repeats = bool(avoid_repeats)
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_token_id = int(pad if pad is not None else tokenizer.eos_token_id)

    # ----------------------------------------------------------------------------------------
    # acting
    # ----------------------------------------------------------------------------------------
    def prompt_ids(self, observation: str, info: dict[str, Any], history: Sequence[tuple[str, str]]) -> list[int]:
        """Token ids of the prompt for one observation."""
        admissible = _admissible(info)
        step = info.get("step")
        step = int(step) if step is not None else len(history)
        messages = build_messages(
            self.env_name, goal=_goal_text(info.get("goal", "")), observation=observation,
            admissible=admissible, history=list(history), step=step, k=self.history_k,
            fmt="action" if self.mode == "score" else self.fmt,
        )
        return render_prompt(self.tokenizer, messages)

    def act(
        self,
        observations: Sequence[str],
        infos: Sequence[dict[str, Any]],
        histories: Sequence[Sequence[tuple[str, str]]] | None = None,
        *,
        seed: int | None = None,
    ) -> list[StepOutput]:
        """One decision per observation (batched). ``histories[i]``: env i's earlier pairs."""
        n = len(observations)
        histories = histories if histories is not None else [[] for _ in range(n)]
        if len(infos) != n or len(histories) != n:
            raise ValueError(f"{n} observations, {len(infos)} infos and {len(histories)} histories")
        prompts = [self.prompt_ids(o, dict(i), h) for o, i, h in zip(observations, infos, histories)]
        if self.mode == "generate":
            gens = self.backend.generate(prompts, self.sampling, seed=seed)  # type: ignore[union-attr]
            return [self._from_generation(g) for g in gens]
        tried = ([repeated_commands(o, h) for o, h in zip(observations, histories)] if self.avoid_repeats
                 else [frozenset()] * n)
        return self._score_act(prompts, infos, tried, seed, contexts=list(zip(observations, histories)))

    def _from_generation(self, g: Generation) -> StepOutput:
        parsed = parse_action(g.text, self.fmt)
        if parsed.valid:
            action = parsed.action or ""
        else:
            action = parsed.fallback if self.invalid_handling == "send" else self.noop_action
        return StepOutput(
            prompt_ids=list(g.prompt_ids), response_ids=list(g.response_ids),
            old_logprobs=list(g.logprobs), text=g.text, action=action, valid=parsed.valid,
            penalty=0.0 if parsed.valid else self.invalid_penalty, reason=parsed.reason,
            finish_reason=g.finish_reason,
        )

    def candidates(self, info: dict[str, Any], tried: frozenset[str] = frozenset()) -> list[str]:
        """Commands scored in score mode: admissible ones, deduplicated, placeholders filled, less
        those in ``tried`` (``avoid_repeats``) unless that would leave none."""
        out: list[str] = []
        for c in admissible_commands(info):
            c = fill_placeholders(c, info)
            if c and c not in out:
                out.append(c)
        if tried and any(c not in tried for c in out):  # avoid_repeats: never an empty choice
            out = [c for c in out if c not in tried]
        return out

    def _response_text(self, command: str, note: str = "") -> str:
        """The scored response of ``command``: the template's ``score_response`` (default
        ``<action>c</action>``), with ``{note}`` (if the template has it) replaced by ``note``."""
        fmt = str(self.template.extra.get("score_response") or "<action>{command}</action>")
        return fmt.replace("{note}", note).replace("{command}", command)

    def _candidate_ids(self, command: str, note: str = "") -> list[int]:
        return list(self.tokenizer(self._response_text(command, note), add_special_tokens=False)["input_ids"])

    def command_notes(self, observation: str, info: dict[str, Any], history: Sequence[tuple[str, str]],
                      commands: Sequence[str]) -> list[str]:
        """The note written before each candidate when the template's ``score_response`` has
        ``{note}`` and its ``memory`` is ``alfworld`` / ``alfworld-task``
        (:func:`agents.memory.command_notes`) or ``webshop``
        (:func:`agents.webshop_expert.webshop_command_notes`); else empty notes."""
        memory = self.template.extra.get("memory")
        if "{note}" not in str(self.template.extra.get("score_response") or "") \
                or memory not in (*MEMORY_KINDS, "webshop"):
            return [""] * len(commands)
        if memory == "webshop":
            from agents.webshop_expert import webshop_command_notes

            return webshop_command_notes(_goal_text(info.get("goal", "")), str(observation), commands,
                                         (info.get("state") or {}).get("options") or {})
        return command_notes(_goal_text(info.get("goal", "")), list(history), str(observation), _admissible(info),
                             commands, exploration=memory == "alfworld")

    def _score(self, prompt: list[int], candidate_ids: list[list[int]],
               memo: dict[Any, list[torch.Tensor]] | None = None) -> list[torch.Tensor]:
        """Per-token log-probs of each candidate after ``prompt`` (prompt encoded once).

        ``memo`` reuses the result for an identical (prompt, candidates) pair within one call:
        the G members of a group share their first prompt, and often later ones.
        """
        key = (tuple(prompt), tuple(tuple(c) for c in candidate_ids))
        if memo is not None and key in memo:
            return memo[key]
        out = candidate_logprobs(self.model, prompt, candidate_ids, pad_token_id=self.pad_token_id,
                                 temperature=self.sampling.temperature, batch_size=self.score_batch_size)
        if memo is not None:
            memo[key] = out
        return out

    def _command_scores(self, per_token: Sequence[torch.Tensor]) -> torch.Tensor:
        """One score per candidate from its per-token log-probs (``score_norm``: sum or mean)."""
        if self.score_norm == "mean":
            return torch.stack([(t / max(int(t.numel()), 1)).sum() for t in per_token])
        return torch.stack([t.sum() for t in per_token])

    def _score_act(self, prompts: list[list[int]], infos: Sequence[dict[str, Any]], tried: Sequence[frozenset[str]],
                   seed: int | None, contexts: Sequence[tuple[str, Sequence[tuple[str, str]]]]) -> list[StepOutput]:
        """Score-mode decisions; ``contexts[i]``: env i's (observation, history), for the notes."""
        cands = [self.candidates(dict(i), t) for i, t in zip(infos, tried)]
        notes = [self.command_notes(o, dict(i), h, cs) for (o, h), i, cs in zip(contexts, infos, cands)]
        cand_ids = [[self._candidate_ids(c, n) for c, n in zip(cs, ns)] for cs, ns in zip(cands, notes)]
        with torch.no_grad():
            memo: dict[Any, list[torch.Tensor]] = {}
            per_env = [self._score(p, ids, memo) for p, ids in zip(prompts, cand_ids)]
        gen = torch.Generator()
        if seed is None:
            gen.seed()
        else:
            gen.manual_seed(int(seed) % (2**63 - 1))
        outs: list[StepOutput] = []
        for prompt, cs, ns, ids, mine in zip(prompts, cands, notes, cand_ids, per_env):
            if not cs:
                outs.append(StepOutput(prompt_ids=prompt, response_ids=[], old_logprobs=[], text="",
                                       action=self.noop_action, valid=False, penalty=self.invalid_penalty,
                                       reason="no admissible commands to score", finish_reason="score",
                                       candidates=[], candidate_ids=[], chosen_index=None, old_action_logprob=None))
                continue
            totals = self._command_scores(mine).float()
            log_pi = torch.log_softmax(totals, dim=-1)
            if self.sampling.greedy:
                k = int(torch.argmax(log_pi))
            else:
                k = int(torch.multinomial(log_pi.exp(), 1, generator=gen))
            outs.append(StepOutput(
                prompt_ids=prompt, response_ids=ids[k], old_logprobs=mine[k].tolist(),
                text=self._response_text(cs[k], ns[k]), action=cs[k], valid=True, penalty=0.0, reason="ok",
                finish_reason="score", candidates=cs, candidate_ids=ids, chosen_index=k,
                old_action_logprob=float(log_pi[k]),
            ))
        return outs

    def forced_step(self, observation: str, info: dict[str, Any], history: Sequence[tuple[str, str]],
                    action: str) -> StepOutput | None:
        """The score-mode step this policy WOULD record had it chosen ``action`` (teacher forcing).

        For behaviour cloning: ``compute_logprobs([step])`` is then log pi(action | prompt) under the
        candidate softmax. ``None`` when ``action`` is not among :meth:`candidates`.
        """
        cands = self.candidates(dict(info))
        action = " ".join(str(action).split())
        if action not in cands:
            return None
        notes = self.command_notes(observation, dict(info), history, cands)
        ids = [self._candidate_ids(c, n) for c, n in zip(cands, notes)]
        k = cands.index(action)
        return StepOutput(prompt_ids=self.prompt_ids(observation, dict(info), history), response_ids=ids[k],
                          old_logprobs=[], text=self._response_text(action, notes[k]), action=action, valid=True, penalty=0.0,
                          reason="ok", finish_reason="score", candidates=cands, candidate_ids=ids, chosen_index=k)

    # ----------------------------------------------------------------------------------------
    # training-time log-probs
    # ----------------------------------------------------------------------------------------
    def compute_logprobs(self, steps: Sequence[StepOutput], batch_size: int | None = None) -> list[torch.Tensor]:
        """Log-probs WITH grad under the current ``self.model`` (PPO's new log-probs).

        Generate mode: per-token log-probs of ``response_ids`` given ``prompt_ids`` under the
        sampling distribution (temperature, top-p). Score mode: a 1-element tensor, the
        candidate-softmax log-prob of the chosen command (a step without candidates gives a
        constant 0). A fresh forward pass reproduces ``old_logprobs`` /
        ``old_action_logprob`` to < 1e-4 in fp32.
        """
        return self.compute_logprobs_and_entropy(steps, batch_size=batch_size, with_entropy=False)[0]

    def compute_entropy(self, steps: Sequence[StepOutput], batch_size: int | None = None) -> list[torch.Tensor]:
        """Per-token entropies of the sampling distribution (score mode: of the candidate softmax)."""
        return self.compute_logprobs_and_entropy(steps, batch_size=batch_size, with_entropy=True)[1]

    def compute_logprobs_and_entropy(
        self, steps: Sequence[StepOutput], batch_size: int | None = None, with_entropy: bool = True
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Both at once (one forward pass); entropies are an empty list unless ``with_entropy``."""
        bs = batch_size or 8
        steps = list(steps)
        if not steps:
            return [], []
        scored = [s.candidates is not None for s in steps]
        if any(scored) and not all(scored):
            raise ValueError("compute_logprobs got a mix of generate-mode and score-mode steps")
        if not scored[0]:
            lps, ents = sequence_logprobs(
                self.model, [s.prompt_ids for s in steps], [s.response_ids for s in steps],
                pad_token_id=self.pad_token_id, temperature=self.sampling.temperature,
                top_p=1.0 if self.sampling.greedy else self.sampling.top_p,
                with_entropy=with_entropy, batch_size=bs,
            )
            return lps, (ents or [])
        device = next(self.model.parameters()).device
        out_lp: list[torch.Tensor] = []
        out_ent: list[torch.Tensor] = []
        memo: dict[Any, list[torch.Tensor]] = {}  # identical decisions share one graph
        for s in steps:
            if not s.candidate_ids or s.chosen_index is None:
                out_lp.append(torch.zeros(1, device=device))
                out_ent.append(torch.zeros(1, device=device))
                continue
            totals = self._command_scores(self._score(s.prompt_ids, s.candidate_ids, memo))
            log_pi = torch.log_softmax(totals, dim=-1)
            out_lp.append(log_pi[s.chosen_index].reshape(1))
            if with_entropy:
                out_ent.append(-(log_pi.exp() * log_pi).sum().reshape(1))
        return out_lp, out_ent

    def __repr__(self) -> str:
        name = getattr(getattr(self.model, "config", None), "name_or_path", type(self.model).__name__)
        return (f"LLMPolicy(model={name!r}, env={self.template.name!r}, mode={self.mode!r}, fmt={self.fmt!r}, "
                f"history_k={self.history_k}, sampling={self.sampling})")

