"""An imitable WebShop expert: follows the instruction with what the shopper sees.

:class:`WebShopInstructionAgent` reads only the agent's own view (the page text, the admissible
commands and the options it already chose), never the goal product's ASIN or the goal's option
list, so a policy can learn its decisions from the same prompt. Per page:

* search: ``search[<instruction>]``, filled exactly as score mode fills the placeholder
  (:func:`agents.policy.fill_placeholders`), so the command is one of the policy's candidates;
* results: the listed product whose title shares the most words with the instruction;
* item: each option value the instruction names (not chosen yet), then ``click[buy now]``;
* sub-page: ``click[< prev]``.

It is the warm start of the WebShop CPU demo (``configs/webshop_cpu_demo.yaml``): a partial
buyer that often picks a close product with the right options, which RL can improve on.

Example:
    >>> agent = WebShopInstructionAgent()
    >>> info = {"page": "results", "goal": {"instruction_text": "i want red tea, price < 20"},
    ...         "admissible_commands": ["click[back to search]", "click[b01]", "click[b02]"]}
    >>> obs = "Instruction: [SEP] x [SEP] Back to Search [SEP] Page 1 (Total results: 2) [SEP] " \\
    ...       "B01 [SEP] Blue coffee mug [SEP] $9.00 [SEP] B02 [SEP] Red tea, 20 bags [SEP] $5.00"
    >>> agent.act([obs], [info])
    ['click[b02]']
"""
from __future__ import annotations

import re
from typing import Any, Sequence

from agents.prompting import admissible_commands
from agents.policy import fill_placeholders

__all__ = ["WebShopInstructionAgent", "title_overlap"]

_WORD = re.compile(r"[a-z0-9]+")
_SEP = " [SEP] "
_BUTTONS = frozenset({"back to search", "< prev", "next >", "buy now", "description", "features", "reviews"})


def _words(text: Any) -> set[str]:
    return set(_WORD.findall(str(text).lower()))


def title_overlap(title: str, instruction: str) -> float:
    """The share of a title's words that the instruction contains (0 for an empty title).

    >>> title_overlap("Red tea, 20 bags", "i want red tea")
    0.5
    """
    t = _words(title)
    return len(t & _words(instruction)) / len(t) if t else 0.0


def _instruction(info: dict[str, Any]) -> str:
    goal = info.get("goal")
    if isinstance(goal, dict):
        return str(goal.get("instruction_text") or goal.get("instruction") or "")
    return str(info.get("instruction") or goal or "")


def _clicks(info: dict[str, Any]) -> list[str]:
    out = []
    for c in admissible_commands(info):
        c = " ".join(str(c).split())
        if c.startswith("click[") and c.endswith("]"):
            out.append(c[6:-1])
    return out


class WebShopInstructionAgent:
    """Search with the instruction, open the best-matching title, choose the named options, buy."""

    def _one(self, obs: str, info: dict[str, Any]) -> str:
        instruction = _instruction(info)
        clicks = _clicks(info)
        searches = [c for c in admissible_commands(info) if str(c).strip().startswith("search[")]
        if searches:
            return fill_placeholders(str(searches[0]), info)
        if "buy now" in clicks:  # item page
            chosen = {str(v).lower() for v in ((info.get("state") or {}).get("options") or {}).values()}
            said = " " + " ".join(_WORD.findall(instruction.lower())) + " "
            for value in clicks:
                words = " ".join(_WORD.findall(value))
                if value not in _BUTTONS and value not in chosen and words and f" {words} " in said:
                    return f"click[{value}]"
            return "click[buy now]"
        products = [c for c in clicks if c not in _BUTTONS]
        if products:  # results page: titles follow their ASIN in the page text
            segments = obs.split(_SEP)
            lowered = [s.lower() for s in segments]

            def score(asin: str) -> float:
                k = lowered.index(asin) if asin in lowered else -1
                return title_overlap(segments[k + 1], instruction) if 0 <= k < len(segments) - 1 else 0.0

            return f"click[{max(products, key=score)}]"
        if "< prev" in clicks:
            return "click[< prev]"
        return "click[back to search]" if "back to search" in clicks else (f"click[{clicks[0]}]" if clicks else "")

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]],
            histories: Any = None, *, seed: int | None = None) -> list[str]:
        return [self._one(str(o), dict(i)) for o, i in zip(observations, infos)]
