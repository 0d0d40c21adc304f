"""What an ALFWorld agent knows from its own transcript: a compact memory for the prompt.

A model that sees only the last k (observation, action) pairs forgets where it has been and
bounces between two receptacles. :func:`alfworld_memory` summarizes the WHOLE transcript of the
episode (the agent's own observations and actions, nothing hidden from the agent) into a few
lines: places visited and not yet visited, what it carries, what it has done to it, and where it
saw objects named in the task. :class:`TranscriptState` is the parsed form, also used by the
searching expert (:class:`agents.search_expert.ALFWorldSearchAgent`).

Example:
    >>> hist = [("You are in the middle of a room.", "go to countertop 1"),
    ...         ("On the countertop 1, you see a mug 1, and a pen 1.", "take mug 1 from countertop 1")]
    >>> s = TranscriptState.parse("put a clean mug in coffeemachine.", hist, "You pick up the mug 1 from the countertop 1.",
    ...                           ["go to countertop 1", "go to sinkbasin 1", "go to coffeemachine 1"])
    >>> s.held, s.visited, s.unvisited
    ('mug 1', ['countertop 1'], ['sinkbasin 1', 'coffeemachine 1'])
    >>> print(s.render())
    visited: countertop 1. not visited: sinkbasin 1, coffeemachine 1.
    carrying: mug 1. done: nothing yet.
    seen: mug 1 at countertop 1.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

__all__ = ["TranscriptState", "alfworld_memory", "goal_words"]

_NOTHING = "Nothing happens."
_GO = re.compile(r"^go to (.+)$")
_TAKE = re.compile(r"^take (.+?) from (.+)$")
_PUT = re.compile(r"^(?:put (.+?) in/on (.+)|move (.+?) to (.+))$")
_OPEN = re.compile(r"^open (.+)$")
_CLOSE = re.compile(r"^close (.+)$")
_TRANSFORM = re.compile(r"^(clean|heat|cool|slice) (.+?) with (.+)$")
_USE = re.compile(r"^use (.+)$")
_SEE = re.compile(r"(?:On|In) (the [a-z]+ \d+|it), you see (.+?)\.(?:\s|$)")
_ITEM = re.compile(r"(?:a|an|some) ([a-z]+ \d+)")
_WORD = re.compile(r"[a-z]+")


def goal_words(goal: str) -> set[str]:
    """Lower-case words of the task sentence ("put a clean mug in coffeemachine." -> {..., 'mug'})."""
    return set(_WORD.findall(str(goal).lower()))


def _cls(name: str) -> str:
    """'cabinet 3' -> 'cabinet'."""
    return name.rsplit(" ", 1)[0] if name[-1:].isdigit() else name


@dataclass
class TranscriptState:
    """The agent's knowledge after its transcript (see :meth:`parse`)."""

    goal: str
    location: str | None = None
    visited: list[str] = field(default_factory=list)
    unvisited: list[str] = field(default_factory=list)
    opened: list[str] = field(default_factory=list)
    held: str | None = None
    done: list[str] = field(default_factory=list)  # "clean mug 1", "put mug 1 in coffeemachine 1", "use desklamp 1"
    seen: dict[str, str] = field(default_factory=dict)  # object (named in the goal) -> where last seen

    @classmethod
    def parse(cls, goal: str, history: Sequence[tuple[str, str]], observation: str,
              admissible: Sequence[str]) -> "TranscriptState":
        """Replay ``history`` (oldest first; each pair = observation shown, action taken) + the
        current ``observation``. An action counts only when the observation after it is not
        "Nothing happens."."""
        st = cls(goal=goal)
        words = goal_words(goal)
        observations = [o for o, _ in history] + [observation]
        st._see(observations[0], words)
        for k, (_, action) in enumerate(history):
            after = observations[k + 1]
            if after.strip() == _NOTHING:
                continue
            a = " ".join(str(action).split())
            m = _GO.match(a)
            if m:
                st.location = m.group(1)
                if st.location not in st.visited:
                    st.visited.append(st.location)
            elif (m := _TAKE.match(a)):
                st.held = m.group(1)
            elif (m := _PUT.match(a)):
                obj, rec = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
                st.held = None
                st.done.append(f"put {obj} in {rec}")
            elif (m := _OPEN.match(a)):
                if m.group(1) not in st.opened:
                    st.opened.append(m.group(1))
            elif (m := _CLOSE.match(a)):
                if m.group(1) in st.opened:
                    st.opened.remove(m.group(1))
            elif (m := _TRANSFORM.match(a)):
                st.done.append(f"{m.group(1)} {m.group(2)}")
            elif (m := _USE.match(a)):
                st.done.append(f"use {m.group(1)}")
            st._see(after, words)
        places = [m.group(1) for c in admissible if (m := _GO.match(" ".join(str(c).split())))]
        if st.location and st.location not in places:
            places.append(st.location)
        st.unvisited = [p for p in places if p not in st.visited]
        return st

    def _see(self, text: str, words: set[str]) -> None:
        for m in _SEE.finditer(" ".join(str(text).split())):
            where = self.location if m.group(1) == "it" else m.group(1)[4:]
            if not where:
                continue
            for item in _ITEM.findall(m.group(2)):
                if _cls(item) in words:
                    self.seen[item] = where
        for item, where in list(self.seen.items()):  # carried objects are not "at" a place
            if item == self.held:
                del self.seen[item]

    def render(self) -> str:
        """Three short lines for the prompt."""
        seen = ", ".join(f"{o} at {w}" for o, w in self.seen.items()) or "nothing yet"
        return (f"visited: {', '.join(self.visited) or 'nowhere yet'}. "
                f"not visited: {', '.join(self.unvisited) or 'none'}.\n"
                f"carrying: {self.held or 'nothing'}. done: {', '.join(self.done) or 'nothing yet'}.\n"
                f"seen: {seen}.")


def alfworld_memory(goal: str, history: Sequence[tuple[str, str]], observation: str,
                    admissible: Sequence[str]) -> str:
    """:meth:`TranscriptState.render` of the parsed transcript (the prompt's ``{memory}``)."""
    return TranscriptState.parse(goal, history, observation, admissible).render()
