"""Score mode: the policy is a softmax over the admissible commands, each scored by the LM.

A command's score is the summed (or mean, ``score_norm``) token log-probability of its response
``<action>c</action>`` after a prompt asking for the ``action`` format (a template may set its own
``score_response``, e.g. ``"{command}<|im_end|>"``, with an optional ``{note}`` written before the
command). The policy is the softmax of the scores under ``sampling.temperature``; a command is drawn
from it (argmax at temperature 0). Placeholder commands such as WebShop's ``search[<query>]`` are
filled with the goal instruction.

Example:
    >>> from agents.models import make_tiny_model
    >>> model, tok = make_tiny_model()
    >>> policy = ScorePolicy(model, tok, env_name="alfworld")
    >>> info = {"goal": "put a mug in desk.", "admissible_commands": ["look", "go to desk 1"], "step": 0}
    >>> [out] = policy.act(["You are in the middle of a room."], [info], [[]], seed=0)
    >>> out.action in info["admissible_commands"], out.valid, out.chosen_index in (0, 1)
    (True, True, True)
    >>> lp = policy.compute_logprobs([out])[0]   # differentiable, matches the recorded log-prob
    >>> abs(lp.item() - policy.behaviour_logprobs(out).item()) < 1e-4
    True
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from agents.batching import decision_key
from agents.contract import Histories, Infos, Observations
from agents.logprobs import candidate_logprobs, packed_candidate_logprobs
from agents.memory import MEMORY_KINDS, command_notes
from agents.policy_base import LLMPolicy, StepOutput, admissible_for_prompt
from agents.prompting import admissible_commands, fill_placeholders
from agents.prompting import goal_text as _goal_text
from agents.tree_attention import tree_attention_error, tree_candidate_logprobs
from agents.webshop_expert import webshop_command_notes

__all__ = ["ScorePolicy", "repeated_commands"]

#: scored responses whose token ids a policy keeps (cleared when full)
RESPONSE_CACHE = 50_000


def repeated_commands(observation: str, history: Sequence[tuple[str, str]]) -> frozenset[str]:
    """Commands already taken in ``history`` from an observation equal to ``observation``.

    >>> sorted(repeated_commands("at desk", [("at desk", "use lamp"), ("lamp on", "go to bed")]))
    ['use lamp']
    """
    now = " ".join(str(observation).split())
    return frozenset(" ".join(str(a).split()) for o, a in history if " ".join(str(o).split()) == now)


class ScorePolicy(LLMPolicy):
    """Ranks the admissible commands with the training model itself (no backend, nothing to sync)."""

    mode = "score"

    @property
    def prompt_format(self) -> str:
        return "action"

    # ------------------------------------------------------------------ candidates
    def candidates(self, info: dict[str, Any], tried: frozenset[str] = frozenset()) -> list[str]:
        """Commands scored: admissible ones, deduplicated, placeholders filled, less those in
        ``tried`` (``avoid_repeats``) unless that would leave none."""
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
        # the same few hundred commands come back at every step of every member: tokenize each once
        text = self._response_text(command, note)
        cache = self.__dict__.setdefault("_response_ids", {})
        ids = cache.get(text)
        if ids is None:
            if len(cache) >= RESPONSE_CACHE:
                cache.clear()
            ids = cache[text] = tuple(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return list(ids)

    def command_notes(
        self, observation: str, info: dict[str, Any], history: Sequence[tuple[str, str]], commands: Sequence[str]
    ) -> list[str]:
        """The note written before each candidate when the template's ``score_response`` has
        ``{note}`` and its ``memory`` is ``alfworld`` / ``alfworld-task``
        (:func:`agents.memory.command_notes`) or ``webshop``
        (:func:`agents.webshop_expert.webshop_command_notes`); else empty notes."""
        memory = self.template.extra.get("memory")
        if "{note}" not in str(self.template.extra.get("score_response") or "") or memory not in (
            *MEMORY_KINDS,
            "webshop",
        ):
            return [""] * len(commands)
        if memory == "webshop":
            return webshop_command_notes(
                _goal_text(info.get("goal", "")),
                str(observation),
                commands,
                (info.get("state") or {}).get("options") or {},
            )
        return command_notes(
            _goal_text(info.get("goal", "")),
            list(history),
            str(observation),
            admissible_for_prompt(info),
            commands,
            exploration=memory == "alfworld",
        )

    # ------------------------------------------------------------------ scoring
    def _score(
        self, prompt: list[int], candidate_ids: list[list[int]], memo: dict[Any, list[torch.Tensor]] | None = None
    ) -> list[torch.Tensor]:
        """Per-token log-probs of each candidate after ``prompt`` (prompt encoded once).

        ``memo`` reuses the result for an identical (prompt, candidates) pair within one call:
        the G members of a group share their first prompt, and often later ones.
        """
        key = decision_key(prompt, candidate_ids)
        if memo is not None and key in memo:
            return memo[key]
        out = candidate_logprobs(
            self.model,
            prompt,
            candidate_ids,
            pad_token_id=self.pad_token_id,
            temperature=self.sampling.temperature,
            batch_size=self.options.score_batch_size,
        )
        if memo is not None:
            memo[key] = out
        return out

    def _score_all(self, decisions: Sequence[tuple[list[int], list[list[int]]]]) -> list[list[torch.Tensor]]:
        """Per-token log-probs of every decision's candidates: packed passes (``batch_decisions``;
        prompt tries or rows, ``packing``) or one pass per decision; identical decisions are scored
        once either way."""
        if not self.options.batch_decisions:
            memo: dict[Any, list[torch.Tensor]] = {}
            return [self._score(p, ids, memo) for p, ids in decisions]
        keys = [decision_key(p, ids) for p, ids in decisions]
        first: dict[tuple, int] = {}
        for i, key in enumerate(keys):
            first.setdefault(key, i)
        unique = list(first.values())
        score: Callable[..., list[list[torch.Tensor]]] = packed_candidate_logprobs
        if self.options.packing == "tree":
            error = tree_attention_error(self.model)
            if error:
                raise ValueError(
                    f"batch_decisions tree cannot score with this model: {error}; "
                    "use batch_decisions on (packed rows) or off"
                )
            score = tree_candidate_logprobs
        scored = score(
            self.model,
            [decisions[i] for i in unique],
            pad_token_id=self.pad_token_id,
            temperature=self.sampling.temperature,
            max_tokens=self.options.batch_tokens,
        )
        by_key = {keys[i]: lps for i, lps in zip(unique, scored)}
        return [by_key[key] for key in keys]

    def _command_scores(self, per_token: Sequence[torch.Tensor]) -> torch.Tensor:
        """One score per candidate from its per-token log-probs (``score_norm``: sum or mean)."""
        if self.options.score_norm == "mean":
            return torch.stack([(t / max(int(t.numel()), 1)).sum() for t in per_token])
        return torch.stack([t.sum() for t in per_token])

    def command_scores(self, step: StepOutput) -> torch.Tensor:
        """The scores of ``step``'s candidates under the live model (one forward pass, no grad)."""
        with torch.no_grad():
            return self._command_scores(self._score(step.prompt_ids, step.candidate_ids or []))

    # ------------------------------------------------------------------ acting
    def act(
        self, observations: Observations, infos: Infos, histories: Histories = None, *, seed: int | None = None
    ) -> list[StepOutput]:
        prompts, hs = self._prompts(observations, infos, histories)
        tried = (
            [repeated_commands(o, h) for o, h in zip(observations, hs)]
            if self.options.avoid_repeats
            else [frozenset()] * len(prompts)
        )
        cands = [self.candidates(dict(i), t) for i, t in zip(infos, tried)]
        notes = [self.command_notes(o, dict(i), h, cs) for o, h, i, cs in zip(observations, hs, infos, cands)]
        cand_ids = [[self._candidate_ids(c, n) for c, n in zip(cs, ns)] for cs, ns in zip(cands, notes)]
        with torch.no_grad():
            per_env = self._score_all(list(zip(prompts, cand_ids)))
        gen = torch.Generator()
        if seed is None:
            gen.seed()
        else:
            gen.manual_seed(int(seed) % (2**63 - 1))
        outs: list[StepOutput] = []
        for prompt, cs, ns, ids, mine in zip(prompts, cands, notes, cand_ids, per_env):
            if not cs:
                outs.append(
                    StepOutput(
                        prompt_ids=prompt,
                        response_ids=[],
                        old_logprobs=[],
                        text="",
                        action=self.noop_action,
                        valid=False,
                        penalty=self.options.invalid_penalty,
                        reason="no admissible commands to score",
                        finish_reason="score",
                        candidates=[],
                        candidate_ids=[],
                        chosen_index=None,
                        old_action_logprob=None,
                    )
                )
                continue
            log_pi = torch.log_softmax(self._command_scores(mine).float(), dim=-1)
            if self.sampling.greedy:
                k = int(torch.argmax(log_pi))
            else:
                k = int(torch.multinomial(log_pi.exp(), 1, generator=gen))
            recorded = dict(old_logprobs=mine[k].tolist(), old_action_logprob=float(log_pi[k]))
            outs.append(self._chosen(prompt, cs, ids, ns, k, **recorded, extra={"candidate_logprobs": log_pi.tolist()}))
        return outs

    def _chosen(
        self,
        prompt_ids: list[int],
        cands: list[str],
        ids: list[list[int]],
        notes: Sequence[str],
        k: int,
        **recorded: Any,
    ) -> StepOutput:
        """The step that chose candidate ``k`` of ``cands`` (their response ids ``ids``, their notes
        ``notes``); ``recorded``: what the sampler recorded (log-probs)."""
        text = self._response_text(cands[k], notes[k])
        scored: dict[str, Any] = dict(
            action=cands[k], finish_reason="score", candidates=cands, candidate_ids=ids, chosen_index=k
        )
        return StepOutput(prompt_ids=prompt_ids, response_ids=ids[k], text=text, **scored, **recorded)

    def forced_step(
        self, observation: str, info: dict[str, Any], history: Sequence[tuple[str, str]], action: str
    ) -> StepOutput | None:
        """The step this policy WOULD record had it chosen ``action`` (teacher forcing).

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
        return self._chosen(self.prompt_ids(observation, dict(info), history), cands, ids, notes, k)

    # ------------------------------------------------------------------ training-time log-probs
    def compute_logprobs_and_entropy(
        self, steps: Sequence[StepOutput], batch_size: int | None = None, with_entropy: bool = True
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Per step a 1-element tensor: the candidate-softmax log-prob of the chosen command (a step
        without candidates gives a constant 0), and the softmax's entropy."""
        steps = list(steps)
        if any(s.candidates is None for s in steps):
            raise ValueError("ScorePolicy got a step without candidates (a generate-mode step?)")
        if not steps:
            return [], []
        device = next(self.model.parameters()).device
        out_lp: list[torch.Tensor] = []
        out_ent: list[torch.Tensor] = []
        scored = [s for s in steps if s.candidate_ids and s.chosen_index is not None]
        per_token = iter(self._score_all([(s.prompt_ids, s.candidate_ids) for s in scored]))  # type: ignore[misc]  # _score_all is set per backend in __init__
        for s in steps:
            if not s.candidate_ids or s.chosen_index is None:
                out_lp.append(torch.zeros(1, device=device))
                out_ent.append(torch.zeros(1, device=device))
                continue
            log_pi = torch.log_softmax(self._command_scores(next(per_token)), dim=-1)
            out_lp.append(log_pi[s.chosen_index].reshape(1))
            if with_entropy:
                out_ent.append(-(log_pi.exp() * log_pi).sum().reshape(1))
        return out_lp, out_ent

    def distributions(self, steps: Sequence[StepOutput]) -> list[torch.Tensor]:
        """Per step the candidate-softmax log-distribution ``[K]`` under the live model (the
        caller's grad mode); an empty tensor for a step without candidates. What a
        distillation loss compares (``trainers.teachers``)."""
        steps = list(steps)
        scored = [s for s in steps if s.candidate_ids]
        per_token = iter(self._score_all([(s.prompt_ids, s.candidate_ids) for s in scored]))  # type: ignore[misc]  # as above
        device = next(self.model.parameters()).device
        return [
            torch.log_softmax(self._command_scores(next(per_token)).float(), dim=-1)
            if s.candidate_ids
            else torch.zeros(0, device=device)
            for s in steps
        ]

    def behaviour_logprobs(self, step: StepOutput) -> torch.Tensor:
        """The candidate-softmax log-prob of the command drawn (1 element; the per-token
        log-probs when the step has none, as a step without candidates)."""
        value = step.old_action_logprob if step.old_action_logprob is not None else step.old_logprobs
        return torch.as_tensor(value, dtype=torch.float32).reshape(-1)
