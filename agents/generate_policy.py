"""Generate mode: the backend samples a free-text answer, the parser turns it into a command.

The answer follows ``options.fmt`` (:data:`agents.parsing.FORMATS`, e.g. ``think_action``:
``<think>..</think><action>..</action>``). The recorded log-probs are the sampling log-probs of
the response tokens. An answer that does not parse carries ``penalty = invalid_penalty`` and is
sent to the env as the parser's best-effort text (``invalid_handling="send"``) or as the
template's no-op command (``"noop"``: ``look`` for ALFWorld, the empty string for WebShop).

Example:
    >>> from agents.models import make_tiny_model
    >>> from agents.backends.hf import TransformersBackend
    >>> from agents.backends.base import SamplingConfig
    >>> model, tok = make_tiny_model()
    >>> policy = GeneratePolicy(model, tok, TransformersBackend(model, tok), "alfworld", fmt="think_action",
    ...                         sampling=SamplingConfig(max_new_tokens=8))
    >>> info = {"goal": "put a mug in desk.", "admissible_commands": ["look", "go to desk 1"], "step": 0}
    >>> [out] = policy.act(["You are in the middle of a room."], [info], [[]], seed=0)
    >>> len(out.response_ids) == len(out.old_logprobs) <= 8, out.finish_reason in ("stop", "length")
    (True, True)
    >>> lp = policy.compute_logprobs([out])[0]   # per token, differentiable
    >>> bool((lp - policy.behaviour_logprobs(out)).abs().max() < 1e-4)
    True
"""

from __future__ import annotations

from typing import Sequence

import torch

from agents.backends.base import Generation, GenerationBackend
from agents.contract import Histories, Infos, Observations
from agents.logprobs import sequence_distributions, sequence_logprobs
from agents.parsing import parse_action
from agents.policy_base import LLMPolicy, StepOutput

__all__ = ["GeneratePolicy"]


class GeneratePolicy(LLMPolicy):
    """Samples answers with ``backend`` (which :meth:`sync` keeps on the trained weights)."""

    mode = "generate"
    needs_backend = True
    backend: GenerationBackend

    def act(
        self, observations: Observations, infos: Infos, histories: Histories = None, *, seed: int | None = None
    ) -> list[StepOutput]:
        prompts, _ = self._prompts(observations, infos, histories)
        return [self._from_generation(g) for g in self.backend.generate(prompts, self.sampling, seed=seed)]

    def _from_generation(self, g: Generation) -> StepOutput:
        parsed = parse_action(g.text, self.options.fmt)
        if parsed.valid:
            action = parsed.action or ""
        else:
            action = parsed.fallback if self.options.invalid_handling == "send" else self.noop_action
        return StepOutput(
            prompt_ids=list(g.prompt_ids),
            response_ids=list(g.response_ids),
            old_logprobs=list(g.logprobs),
            text=g.text,
            action=action,
            valid=parsed.valid,
            penalty=0.0 if parsed.valid else self.options.invalid_penalty,
            reason=parsed.reason,
            finish_reason=g.finish_reason,
        )

    def compute_logprobs_and_entropy(
        self, steps: Sequence[StepOutput], batch_size: int | None = None, with_entropy: bool = True
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Per-token log-probs of ``response_ids`` given ``prompt_ids`` under the sampling
        distribution (temperature, top-p), ``batch_size`` sequences (default 8) per forward pass."""
        steps = list(steps)
        if any(s.candidates is not None for s in steps):
            raise ValueError("GeneratePolicy got a step with scored candidates (a score-mode step?)")
        if not steps:
            return [], []
        lps, ents = sequence_logprobs(
            self.model,
            [s.prompt_ids for s in steps],
            [s.response_ids for s in steps],
            pad_token_id=self.pad_token_id,
            temperature=self.sampling.temperature,
            top_p=1.0 if self.sampling.greedy else self.sampling.top_p,
            with_entropy=with_entropy,
            batch_size=batch_size or 8,
            logit_chunk=self.options.logit_chunk,
        )
        return lps, (ents or [])

    def distributions(self, steps: Sequence[StepOutput]) -> list[torch.Tensor]:
        """Per step the next-token log-distribution at each response token, ``[n, V]``, under the
        live model and the sampling temperature (the caller's grad mode): what a token-level
        distillation loss compares (``trainers.teachers``)."""
        steps = list(steps)
        if not steps:
            return []
        return sequence_distributions(
            self.model,
            [s.prompt_ids for s in steps],
            [s.response_ids for s in steps],
            pad_token_id=self.pad_token_id,
            temperature=self.sampling.temperature,
            batch_size=8,
        )

    def sync(self) -> None:
        """Sample from the trained weights from now on (the vLLM backend copies them over)."""
        self.backend.sync_weights(self.model)
