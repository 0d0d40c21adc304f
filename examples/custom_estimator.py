"""A new estimator in one file, outside the package: GRPO's episode term plus a step term that
favours the steps that reached a state for the first time in their group ("novelty").

Train with it, with no change to the package:

    python -m trainers.progpo --plugin examples/custom_estimator.py --estimator novelty \
        --estimator-option weight=0.5 --env rooms --warm-start none --iterations 2
    python -m trainers.progpo --plugin examples/custom_estimator.py --estimator progpo-novelty ...
    python -m trainers.lab --plugin examples/custom_estimator.py --methods novelty progpo-novelty --seeds 0

In a YAML config: ``plugins: [examples/custom_estimator.py]`` and
``advantage: {estimator: novelty, options: {weight: 0.5}}``. Installed as a distribution, the
entry point ``[project.entry-points."progpo.estimators"] novelty = "my_package.novelty"`` loads
it everywhere (verl's processes included: ``algorithm.adv_estimator=novelty``).

>>> import numpy as np
>>> from trainers.advantages import AdvantageConfig, step_advantages
>>> out = step_advantages(np.array([0.0, 1.0]), np.array([0, 0]), np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]),
...                       state_ids=np.array([5, 6, 5, 7]), config=AdvantageConfig(estimator="novelty"))
>>> out.steps.round(3).tolist()
[-0.75, -0.75, 1.0, 1.25]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trainers.advantages import StepContext, option, register_estimator


@dataclass(frozen=True)
class NoveltyOptions:
    """The estimator's options: each one's default, help text and bounds."""

    weight: float = option(0.25, "reward of a step whose state no earlier step of its group reached", ge=0.0)


def _novelty_metrics(acted: dict[str, float], n_groups: int, n_steps: int) -> dict[str, float]:
    return {"adv/novel_step_frac": acted.get("novel_steps", 0.0) / max(n_steps, 1)}


@register_estimator(
    "novelty",
    needs=("states",),
    options=NoveltyOptions,
    metrics=_novelty_metrics,
    acted={"novel steps": "adv/novel_step_frac"},
    help="GRPO plus weight x 1[the step's state is new to its group]",
)
def novelty_step(ctx: StepContext) -> np.ndarray | None:
    """``weight`` for each step whose state ``o_t`` appears first in its group (by trajectory, then time)."""
    if not ctx.traj.size:
        return None
    order = np.lexsort((ctx.t, ctx.traj))
    key = ctx.gid[ctx.traj][order] * (int(ctx.states().max()) + 1) + ctx.states()[order]
    _, first = np.unique(key, return_index=True)
    novel = np.zeros(ctx.traj.size)
    novel[order[first]] = 1.0
    ctx.acted["novel_steps"] = float(novel.sum())
    return ctx.options.weight * novel
