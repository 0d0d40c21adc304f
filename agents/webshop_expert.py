"""An imitable WebShop expert: follows the instruction with what the shopper sees.

:class:`WebShopInstructionAgent` reads only the agent's own view (the page text, the admissible
commands and the options it already chose), never the goal product's ASIN or the goal's option
list, so a policy can learn its decisions from the same prompt. Per page:

* search: ``search[<instruction>]``, filled exactly as score mode fills the placeholder
  (:func:`agents.prompting.fill_placeholders`), so the command is one of the policy's candidates;
* results: the listed product whose title shares the most words with the instruction;
* item: each option value the instruction names (not chosen or clicked yet in this episode),
  then ``click[buy now]``;
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
from typing import Any, Mapping, Sequence

from agents.contract import Histories, Infos, Observations
from agents.prompting import admissible_commands, fill_placeholders, goal_text

__all__ = ["WebShopInstructionAgent", "named_options", "product_scores", "title_overlap", "webshop_command_notes"]

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


def _clicks(info: dict[str, Any]) -> list[str]:
    out = []
    for c in admissible_commands(info):
        c = " ".join(str(c).split())
        if c.startswith("click[") and c.endswith("]"):
            out.append(c[6:-1])
    return out


def named_options(instruction: str, clicks: Sequence[str], chosen: Mapping[str, Any]) -> list[str]:
    """The option values among ``clicks`` that the instruction names as words, not chosen yet.

    >>> named_options("a red shirt in size x-large", ["buy now", "red", "blue", "x-large"], {})
    ['red', 'x-large']
    """
    taken = {str(v).lower() for v in chosen.values()}
    said = " " + " ".join(_WORD.findall(instruction.lower())) + " "
    out = []
    for value in clicks:
        words = " ".join(_WORD.findall(value))
        if value not in _BUTTONS and value not in taken and words and f" {words} " in said:
            out.append(value)
    return out


def product_scores(observation: str, products: Sequence[str], instruction: str) -> list[float]:
    """:func:`title_overlap` of each listed product's title (it follows its ASIN in the page)."""
    segments = observation.split(_SEP)
    lowered = [s.lower() for s in segments]
    out = []
    for asin in products:
        k = lowered.index(asin) if asin in lowered else -1
        out.append(title_overlap(segments[k + 1], instruction) if 0 <= k < len(segments) - 1 else 0.0)
    return out


def webshop_command_notes(
    instruction: str, observation: str, commands: Sequence[str], chosen: Mapping[str, Any] = {}
) -> list[str]:  # read only
    """The note written before each scored command (the ``webshop-notes`` template):
    ``best match`` on the listed product(s) whose title shares the most words with the
    instruction, ``named`` on an option value the instruction names; no note otherwise.

    >>> obs = "Page 1 (Total results: 2) [SEP] B01 [SEP] Blue mug [SEP] $9 [SEP] B02 [SEP] Red tea [SEP] $5"
    >>> webshop_command_notes("red tea please", obs, ["click[b01]", "click[b02]", "click[back to search]"])
    ['', 'best match: ', '']
    """
    clicks = [c[6:-1] if c.startswith("click[") and c.endswith("]") else None for c in commands]
    products = [c for c in clicks if c is not None and c not in _BUTTONS and _SEP not in c]
    listed = [p for p in products if p in observation.lower()]
    best: set[str] = set()
    if listed and "buy now" not in clicks:  # a results page
        scores = product_scores(observation, listed, instruction)
        top = max(scores)
        best = {p for p, s in zip(listed, scores) if s == top and top > 0}
    named = (
        set(named_options(instruction, [c for c in clicks if c is not None], chosen)) if "buy now" in clicks else set()
    )
    return ["best match: " if c in best else "named: " if c in named else "" for c in clicks]


class WebShopInstructionAgent:
    """Search with the instruction, open the best-matching title, choose the named options, buy."""

    def _one(self, obs: str, info: dict[str, Any], history: Sequence[tuple[str, str]] = ()) -> str:
        instruction = goal_text(info.get("goal")) or str(info.get("instruction") or "")
        clicks = _clicks(info)
        searches = [c for c in admissible_commands(info) if str(c).strip().startswith("search[")]
        if searches:
            return fill_placeholders(str(searches[0]), info)
        if "buy now" in clicks:  # item page
            # each named value once: two values of one option group (both named) would undo each other
            clicked = {a[6:-1] for _, a in history if str(a).startswith("click[")}
            named = [
                v
                for v in named_options(instruction, clicks, (info.get("state") or {}).get("options") or {})
                if v not in clicked
            ]
            return f"click[{named[0]}]" if named else "click[buy now]"
        products = [c for c in clicks if c not in _BUTTONS]
        if products:  # results page: titles follow their ASIN in the page text
            scores = product_scores(obs, products, instruction)
            return f"click[{products[scores.index(max(scores))]}]"
        if "< prev" in clicks:
            return "click[< prev]"
        return "click[back to search]" if "back to search" in clicks else (f"click[{clicks[0]}]" if clicks else "")

    def act(
        self, observations: Observations, infos: Infos, histories: Histories = None, *, seed: int | None = None
    ) -> list[str]:
        hists = list(histories) if histories is not None else [()] * len(observations)
        return [self._one(str(o), dict(i), h or ()) for o, i, h in zip(observations, infos, hists)]
