"""The credit stage: an iteration's rollout -> each step's advantage, and where the groups failed.

:class:`CreditAssigner` runs the configured estimator (:func:`trainers.advantages.step_advantages`)
with this iteration's shuffle seed and PlanPO weight, pays the invalid-action penalty
(:func:`trainers.advantages.penalized_advantages`), merges a tree's rows of one shared step, and
gives the all-failed flag per group and per step (:class:`Credit`).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from trainers import seeds
from trainers.advantages import penalized_advantages, planpo_alpha, step_advantages
from trainers.config import TrainConfig
from trainers.rollout import Rollout

__all__ = ["Credit", "CreditAssigner"]


@dataclasses.dataclass
class Credit:
    """The credit of one rollout.

    Attributes:
        steps: each step's advantage (the invalid-action penalty paid).
        all_failed: each group's all-failed flag.
        step_failed: that flag per step.
        acted: where the base estimator's own terms acted (``StepAdvantages.acted``).
    """

    steps: np.ndarray
    all_failed: np.ndarray
    step_failed: np.ndarray
    acted: dict[str, float]


class CreditAssigner:
    """The configured estimator, as an iteration's stage."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.adv_cfg = cfg.advantage_config()

    def assign(self, rollout: Rollout, iteration: int) -> Credit:
        """The :class:`Credit` of ``rollout``, played at ``iteration``."""
        arrays = rollout.advantage_inputs()
        adv_cfg = dataclasses.replace(self.adv_cfg, shuffle_seed=seeds.shuffle(self.cfg.seed, iteration),
                                      planpo_alpha=self.planpo_turn_weight(iteration))
        adv = step_advantages(**arrays, config=adv_cfg)
        # a tree's shared step: the mean of its leaves' advantages (flat rollout: one row per step)
        step_adv = penalized_advantages(rollout.merge_rows(adv.steps), [s.output for s in rollout.steps])
        _, dense_group = np.unique(arrays["traj_group"], return_inverse=True)
        row_failed = adv.all_failed[dense_group.reshape(-1)[arrays["step_traj"]]] if step_adv.size else np.zeros(0, bool)
        step_failed = rollout.merge_rows(row_failed) > 0.5  # a tree's rows of one step share its group's flag
        return Credit(step_adv, adv.all_failed, step_failed, adv.acted)

    def planpo_turn_weight(self, iteration: int) -> float:
        """PlanPO's turn-term weight at ``iteration``: the linear schedule in generate mode, 0 in
        score mode (there a response is a command's name, and the term would reward short names)."""
        cfg = self.cfg
        if self.adv_cfg.base != "planpo" or cfg.policy_mode != "generate":
            return 0.0
        return planpo_alpha(min(max(iteration, 1), cfg.iterations), cfg.iterations, cfg.planpo_alpha_start,
                            cfg.planpo_alpha_end)
