"""The estimator's options: :class:`AdvantageConfig` (defaults reproduce the papers)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, Mapping

from trainers.advantages.hgpo import Fusion
from trainers.advantages.progpo import ProgressTerm
from trainers.advantages.registry import Estimator, base_names, estimator, exclusive_conflict, option_fields
from trainers.advantages.segments import Norm, check_norm
from wrappers.signals import TAU_P, TAU_R

__all__ = ["AdvantageConfig"]


@dataclass(frozen=True)
class AdvantageConfig:
    """Options of :func:`step_advantages`, flat as the flags and the ``advantage:`` section write
    them; each base reads its own share as a frozen config (:attr:`base_options`). Defaults reproduce
    the papers.

    Attributes:
        estimator: a registered base (:func:`~trainers.advantages.registry.base_names`), or ``progpo-<base>``.
        gamma, omega: discount of the step returns and weight of the step-level term (GiGPO's
            anchor term, HGPO's history term). lam: ProGPO lambda.
        norm: ``mean_std`` (divide by std + eps) or ``mean`` (only center), every level.
        eps: added to every group's std before the division, >= 0 (with 0, a group of equal values
            gets 0).
        coverage: ``rate`` (P = (D - 1) / T) or ``count`` (P = D - 1).
        scope: ``episode`` (first visit within the episode) or ``group`` (once per group).
        gate: where the progress term applies: ``all_failed`` (ProGPO: it replaces the base
            estimator in all-failed groups only) or ``always`` (control: it is ADDED to the base
            estimator's A^E in every group; in an all-failed group the base is 0, so there it
            equals ProGPO).
        shuffle_coverage: control: permute the progress values P_i within each all-failed group
            (seeded by ``shuffle_seed``) before the advantage, which keeps their distribution and
            breaks their link to the trajectories.
        success_threshold: PlanPO: an outcome at or above it is a success (WebShop: a partial score
            below it is not).
        planpo_alpha: PlanPO: weight of the turn term at this iteration (the trainer sets it from
            :func:`~trainers.advantages.planpo.planpo_alpha`; 0 in score mode, and whenever no response lengths are given).
        hgpo_depth, hgpo_alpha, hgpo_fusion: HGPO: the deepest history matched (K), the power of the
            depth weights ``(k + 1)^alpha``, and the fusion (``power`` | ``inverse-variance``).
        potential_credit: HGPO: add the reconstructed transition credit of arXiv 2607.04242
            (:func:`~trainers.advantages.hgpo.potential_credit`) to the history term.
        options: the base's own options by name (a plug-in's, or a built-in's beside its flat field
            above, which it overrides), checked against its options dataclass.
    """

    estimator: str = "progpo-grpo"
    gamma: float = 0.95
    omega: float = 1.0
    lam: float = 1.0
    norm: Norm = "mean_std"
    coverage: Literal["rate", "count"] = "rate"
    scope: Literal["episode", "group"] = "episode"
    tau_r: float = TAU_R
    tau_p: float = TAU_P
    eps: float = 1e-6
    gate: Literal["all_failed", "always"] = "all_failed"
    shuffle_coverage: bool = False
    shuffle_seed: int = 0
    success_threshold: float = 1.0
    planpo_alpha: float = 0.1
    hgpo_depth: int = 2
    hgpo_alpha: float = 1.0
    hgpo_fusion: Fusion = "power"
    potential_credit: bool = False
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.gate not in ("all_failed", "always"):
            raise ValueError(f"gate must be 'all_failed' or 'always', got {self.gate!r}")
        spec = estimator(self.estimator)  # an unknown name: one line with the known ones
        check_norm(self.norm)
        if self.coverage not in ("rate", "count"):
            raise ValueError(f"coverage must be 'rate' or 'count', got {self.coverage!r}")
        if self.scope not in ("episode", "group"):
            raise ValueError(f"scope must be 'episode' or 'group', got {self.scope!r}")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma}")
        if not self.eps >= 0.0:  # a negative eps can cancel a group's std and divide by 0
            raise ValueError(f"eps must be >= 0, got {self.eps}")
        if not isinstance(self.options, Mapping):
            raise ValueError(f"options must be a mapping of the estimator's options, got {self.options!r}")
        for name in base_names():  # every base's own options are valid, used or not
            self.options_of(estimator(name), own=name == spec.name)
        fields = {f.name for f in dataclasses.fields(self)}
        conflict = exclusive_conflict(self.estimator, lambda flag: getattr(self, flag) if flag in fields else None)
        if conflict:
            raise ValueError(conflict)

    def _flat(self, spec: Estimator) -> dict[str, Any]:
        """The base's options written as flat fields of this config (``hgpo_depth``)."""
        names = {f.name for f in dataclasses.fields(self)}
        return {f.name: getattr(self, spec.flag(f)) for f in option_fields(spec.options) if spec.flag(f) in names}

    def options_of(self, spec: Estimator, own: bool = True) -> Any:
        """``spec``'s options dataclass: its flat fields here, then (for the configured base, ``own``)
        :attr:`options` over them."""
        values = self._flat(spec)
        if own:
            values.update(self.options)
        return spec.make_options(values, shared=self)

    @property
    def base_options(self) -> Any:
        """The base's own frozen config (``None`` for a base without options), e.g.
        :class:`~trainers.advantages.hgpo.HGPOConfig` for ``hgpo`` and ``progpo-hgpo``.

        >>> AdvantageConfig(estimator="progpo-hgpo", hgpo_depth=3).base_options.depth
        3
        """
        return self.options_of(estimator(self.estimator))

    @property
    def spec(self) -> Estimator:
        """The registered base (:class:`~trainers.advantages.registry.Estimator`)."""
        return estimator(self.estimator)

    @property
    def base(self) -> str:
        return self.estimator.removeprefix("progpo-")

    @property
    def progress_term(self) -> ProgressTerm:
        """The settings of ProGPO's progress term (:class:`~trainers.advantages.progpo.ProgressTerm`)."""
        return ProgressTerm(self.lam, self.norm, self.tau_r, self.tau_p, self.eps, self.gate)

    @property
    def progpo(self) -> bool:
        return self.estimator.startswith("progpo-")
