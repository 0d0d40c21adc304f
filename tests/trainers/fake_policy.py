"""A small, real torch policy over admissible commands (candidate scoring), for trainer tests.

Features are hashed bags of words of the observation and of each candidate; the score is a
bilinear form ``c . (W o + b)``, so gradients flow and the PPO update changes behaviour.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import torch

DIM = 32


def _feat(text: str) -> torch.Tensor:
    v = torch.zeros(DIM)
    for w in text.lower().replace(".", " ").replace(",", " ").split():
        v[zlib.crc32(w.encode()) % DIM] += 1.0
    return v


@dataclass
class FakeStep:
    action: str | None
    valid: bool
    penalty: float
    obs: str
    candidates: list[str]
    chosen_index: int
    old_action_logprob: float
    old_logprobs: list[float] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)


class FakeScoringPolicy:
    """The trainer's policy contract (:class:`agents.policy_base.TrainablePolicy`), like
    ``agents.score_policy.ScorePolicy``."""

    def __init__(self, seed: int = 0, invalid_every: int = 0) -> None:
        torch.manual_seed(seed)
        self.model = torch.nn.Linear(DIM, DIM)
        self.invalid_every = invalid_every
        self._calls = 0

    def _logits(self, obs: str, cands: list[str]) -> torch.Tensor:
        c = torch.stack([_feat(x) for x in cands])
        return c @ self.model(_feat(obs))

    def act(self, observations, infos, histories, seed=None):
        gen = torch.Generator().manual_seed(int(seed or 0) % 2**63)
        out = []
        with torch.no_grad():
            for j, (obs, info) in enumerate(zip(observations, infos)):
                # invalid answers at a rate of 1/invalid_every, a function of the step seed (not of a
                # call counter, which a resumed run would restart)
                self._calls = int(seed or 0) + j + 1
                cands = list(info["admissible_commands"])
                logp = torch.log_softmax(self._logits(obs, cands), -1)
                k = int(torch.multinomial(logp.exp(), 1, generator=gen))
                bad = self.invalid_every and self._calls % self.invalid_every == 0
                out.append(
                    FakeStep(
                        action=None if bad else cands[k],
                        valid=not bad,
                        penalty=0.1 if bad else 0.0,
                        obs=obs,
                        candidates=cands,
                        chosen_index=k,
                        old_action_logprob=float(logp[k]),
                        old_logprobs=[float(logp[k])],
                        response_ids=[k],
                    )
                )
        return out

    def compute_logprobs(self, steps):
        return [torch.log_softmax(self._logits(s.obs, s.candidates), -1)[s.chosen_index].reshape(1) for s in steps]

    def compute_logprobs_and_entropy(self, steps, batch_size=None, with_entropy=True):
        lps = self.compute_logprobs(steps)
        if not with_entropy:
            return lps, []
        ents = []
        for s in steps:
            logp = torch.log_softmax(self._logits(s.obs, s.candidates), -1)
            ents.append(-(logp.exp() * logp).sum().reshape(1))
        return lps, ents

    def behaviour_logprobs(self, step):
        return torch.as_tensor(step.old_action_logprob, dtype=torch.float32).reshape(-1)

    def sync(self):
        """Acting runs the live model: nothing to push."""
