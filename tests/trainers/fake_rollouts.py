"""Small hand-made pieces of an iteration for the stage tests: a step record, and a policy over
three commands whose logits are a table row per prompt."""

from __future__ import annotations

import torch

from agents.contract import StepOutput
from trainers.rollouts.rollout import StepRecord


def step_record(
    traj: int, t: int, state: str = "s", next_state: str = "s2", first_visit: bool = True, reward: float = 0.0
) -> StepRecord:
    """A valid step ``t`` of trajectory ``traj`` that took action ``a<t>``."""
    action = f"a{t}"
    return StepRecord(traj, t, StepOutput(action=action), state, next_state, first_visit, reward, True, action)


class TablePolicy:
    """A policy over three commands whose logits are a table row per prompt: what the updater
    needs of a policy (log-probs with grad, the sampler's log-probs, sync), nothing more."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Embedding(4, 3)
        self.synced = 0

    def compute_logprobs_and_entropy(self, outputs, batch_size=None, with_entropy=True):
        rows = [torch.log_softmax(self.model(torch.tensor(o.prompt_ids[0])), -1) for o in outputs]
        return [row[o.chosen_index].reshape(1) for row, o in zip(rows, outputs)], [torch.zeros(1) for _ in outputs]

    def behaviour_logprobs(self, output):
        return torch.tensor([output.old_action_logprob], dtype=torch.float32)

    def sync(self) -> None:
        self.synced += 1

    def recorded(self, prompt: int, chosen: int, offset: float = 0.0) -> StepOutput:
        """The step that chose command ``chosen`` at prompt ``prompt``, with its sampler's
        log-prob off by ``offset``."""
        with torch.no_grad():
            lp = float(torch.log_softmax(self.model(torch.tensor(prompt)), -1)[chosen]) + offset
        scored = dict(candidate_ids=[[7], [8], [9]], chosen_index=chosen, old_action_logprob=lp)
        return StepOutput(action=f"c{chosen}", prompt_ids=[prompt], **scored)
