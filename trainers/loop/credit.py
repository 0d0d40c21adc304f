"""The credit stage: an iteration's rollout -> each step's advantage, and where the groups failed.

:class:`CreditAssigner` runs the configured estimator (:func:`trainers.advantages.step_advantages`)
with this iteration's shuffle seed and options (on the base's own schedule, as PlanPO's turn
weight), pays the invalid-action penalty (:func:`trainers.advantages.penalized_advantages`), merges a tree's rows of one shared step, and
gives the all-failed flag per group and per step (:class:`Credit`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from trainers import seeds
from trainers.advantages import AdvantageConfig, penalized_advantages, step_advantages
from trainers.advantages.registry import TermError
from trainers.finite import EstimatorTermError, check_finite
from trainers.loop.sections import CreditSection
from trainers.rollouts.rollout import Rollout

__all__ = ["Credit", "CreditAssigner"]


@dataclasses.dataclass
class Credit:
    """The credit of one rollout.

    Attributes:
        steps: each step's advantage (the invalid-action penalty paid).
        all_failed: each group's all-failed flag.
        step_failed: that flag per step.
        acted: where the base estimator's own terms acted (``StepAdvantages.acted``).
        step_term: the base's step term alone, per step (``None``: it adds none).
    """

    steps: np.ndarray
    all_failed: np.ndarray
    step_failed: np.ndarray
    acted: dict[str, float]
    #: the base's step term alone, per step (``None``: it adds none)
    step_term: np.ndarray | None = None


class CreditAssigner:
    """The configured estimator, as an iteration's stage."""

    def __init__(self, section: CreditSection) -> None:
        self.section = section
        self.adv_cfg = section.advantage

    def assign(self, rollout: Rollout, iteration: int) -> Credit:
        """The :class:`Credit` of ``rollout``, played at ``iteration``."""
        arrays = rollout.advantage_inputs()
        try:
            adv = step_advantages(**arrays, config=self.config_at(iteration))
        except TermError as err:  # a plug-in's term: the user's to fix, said in one line
            raise EstimatorTermError(str(err)) from None
        # a tree's shared step: the mean of its leaves' advantages (flat rollout: one row per step)
        step_adv = penalized_advantages(rollout.merge_rows(adv.steps), [s.output for s in rollout.steps])
        check_finite("advantage", step_adv)  # a NaN here would be trained into every weight
        _, dense_group = np.unique(arrays["traj_group"], return_inverse=True)
        row_failed = (
            adv.all_failed[dense_group.reshape(-1)[arrays["step_traj"]]] if step_adv.size else np.zeros(0, bool)
        )
        step_failed = rollout.merge_rows(row_failed) > 0.5  # a tree's rows of one step share its group's flag
        step_term = rollout.merge_rows(adv.step_term) if adv.step_term is not None else None
        return Credit(step_adv, adv.all_failed, step_failed, adv.acted, step_term)

    def config_at(self, iteration: int) -> AdvantageConfig:
        """The estimator's config at ``iteration``: its shuffle seed, and the base's options on its
        own schedule (PlanPO's turn weight: linear in generate mode, 0 in score mode)."""
        section, adv_cfg = self.section, self.adv_cfg
        config = dataclasses.replace(adv_cfg, shuffle_seed=seeds.shuffle(section.seed, iteration))
        spec = adv_cfg.spec
        if spec.schedule is None:
            return config
        options = spec.schedule(adv_cfg.base_options, iteration, section.iterations, section.generate)
        return dataclasses.replace(config, options=dataclasses.asdict(options))
