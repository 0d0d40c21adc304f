"""The teacher axis's choices and the labels its runs carry (standard library only, so that a
report or a benchmark table can name a run without importing torch).

>>> distill_label("privileged"), distill_label("hindsight"), distill_label("none")
('privileged (not pure RL)', 'hindsight (no ground truth)', None)
"""
from __future__ import annotations

__all__ = ["DISTILL_MODES", "PRIVILEGED_KEY", "SKILL_WRITERS", "distill_label"]

DISTILL_MODES: tuple[str, ...] = ("none", "privileged", "hindsight")
SKILL_WRITERS: tuple[str, ...] = ("template", "policy")
#: the reset-info key under which an env offers its privileged text (ALFWorld, WebShop: ``privileged_info=True``)
PRIVILEGED_KEY = "privileged_text"


def distill_label(mode: str, writer: str = "template") -> str | None:
    """The label a run with this teacher carries in its report, summary, records and tables; a
    privileged teacher's run is never pure RL."""
    if mode == "privileged":
        return "privileged (not pure RL)"
    if mode == "hindsight":
        return "hindsight (no ground truth)" if writer == "template" else "hindsight (policy-written skills, no ground truth)"
    return None
