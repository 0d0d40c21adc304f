"""What an ALFWorld agent knows from its own transcript: a compact memory for the prompt.

A model that sees only the last k (observation, action) pairs forgets where it has been and
bounces between two receptacles. :func:`alfworld_memory` summarizes the WHOLE transcript of the
episode (the agent's own observations and actions, nothing hidden from the agent) into a few
lines: places visited and not yet visited, what it carries, what it has done to it, and where it
saw objects named in the task, and what the task sentence asks (:func:`parse_goal`); places not
yet visited are listed usually-open ones first (:func:`search_order`). :class:`TranscriptState` is
the parsed form, also used by the
searching expert (:class:`agents.search_expert.ALFWorldSearchAgent`).

Example:
    >>> hist = [("You are in the middle of a room.", "go to countertop 1"),
    ...         ("On the countertop 1, you see a mug 1, and a pen 1.", "take mug 1 from countertop 1")]
    >>> s = TranscriptState.parse("put a clean mug in coffeemachine.", hist, "You pick up the mug 1 from the countertop 1.",
    ...                           ["go to countertop 1", "go to sinkbasin 1", "go to coffeemachine 1"])
    >>> s.held, s.visited, s.unvisited
    ('mug 1', ['countertop 1'], ['sinkbasin 1', 'coffeemachine 1'])
    >>> print(s.render())
    target: mug. clean it at sinkbasin. place: coffeemachine.
    visited: countertop 1. not visited: sinkbasin 1, coffeemachine 1.
    carrying: mug 1. done: nothing yet.
    seen: nothing yet.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Sequence

from progpo_envs.alfworld import text as patterns

__all__ = [
    "CLOSED_CLASSES",
    "GoalSpec",
    "TranscriptState",
    "alfworld_memory",
    "command_notes",
    "goal_words",
    "object_class",
    "parse_goal",
    "search_order",
]


#: receptacle classes that start closed in ALFWorld (a prior any household agent has): a searcher
#: looks at the open places first
CLOSED_CLASSES = frozenset({"cabinet", "drawer", "fridge", "microwave", "safe", "box", "laundryhamper"})
_TRANSFORM_WORDS = {"clean": "clean", "hot": "heat", "heat": "heat", "cool": "cool", "cold": "cool"}
_APPLIANCE = {"clean": "sinkbasin", "heat": "microwave", "cool": "fridge"}
_LAMPS = ("desklamp", "floorlamp")


@dataclass(frozen=True)
class GoalSpec:
    """What the task sentence asks, read from its words and the receptacle classes in view.

    >>> parse_goal("heat some egg and put it in garbagecan.", {"garbagecan", "microwave", "countertop"})
    GoalSpec(target='egg', place='garbagecan', transform='heat', appliance='microwave', lamp=None)
    >>> parse_goal("look at book under the desklamp.", {"desk", "shelf"}).lamp
    'desklamp'
    """

    target: str | None
    place: str | None
    transform: str | None
    appliance: str | None
    lamp: str | None

    def render(self) -> str:
        parts = [f"target: {self.target or 'unknown'}."]
        if self.transform:
            parts.append(f"{self.transform} it at {self.appliance}.")
        if self.lamp:
            parts.append(f"use the {self.lamp}.")
        elif self.place:
            parts.append(f"place: {self.place}.")
        return " ".join(parts)


def parse_goal(goal: str, receptacle_classes: set[str] | frozenset[str]) -> GoalSpec:
    """:class:`GoalSpec` of an ALFWorld task sentence (``receptacle_classes``: classes of the places
    the agent can go to, e.g. from its ``go to`` commands)."""
    words = patterns.WORD.findall(str(goal).lower())
    lamp = next((w for w in words if w in _LAMPS), None)
    if lamp is None and ("lamp" in words or "light" in words):
        lamp = "desklamp"
    transform = next((_TRANSFORM_WORDS[w] for w in words if w in _TRANSFORM_WORDS), None)
    place = None if lamp else next((w for w in reversed(words) if w in receptacle_classes), None)
    skip = set(receptacle_classes) | set(_LAMPS) | set(_TRANSFORM_WORDS) | _FUNCTION_WORDS
    target = next((w for w in words if w not in skip), None)
    return GoalSpec(target, place, transform, _APPLIANCE.get(transform or ""), lamp)


_FUNCTION_WORDS = frozenset(
    "a an some the put in on and it them two find examine look at under with then place "
    "clean hot cool cold heat lamp light".split()
)


def search_order(places: Sequence[str]) -> list[str]:
    """``places`` with those of usually-open classes first (stable within each kind).

    >>> search_order(["cabinet 1", "countertop 1", "drawer 2", "shelf 1"])
    ['countertop 1', 'shelf 1', 'cabinet 1', 'drawer 2']
    """
    return sorted(places, key=lambda p: object_class(p) in CLOSED_CLASSES)


def goal_words(goal: str) -> set[str]:
    """Lower-case words of the task sentence ("put a clean mug in coffeemachine." -> {..., 'mug'})."""
    return set(patterns.WORD.findall(str(goal).lower()))


def object_class(name: str) -> str:
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
    spec: GoalSpec | None = None  # the task sentence, parsed

    @classmethod
    def parse(
        cls, goal: str, history: Sequence[tuple[str, str]], observation: str, admissible: Sequence[str]
    ) -> "TranscriptState":
        """Replay ``history`` (oldest first; each pair = observation shown, action taken) + the
        current ``observation``. An action counts only when the observation after it is not
        "Nothing happens."."""
        st = cls(goal=goal)
        words = goal_words(goal)
        observations = [o for o, _ in history] + [observation]
        st._see(observations[0], words)
        for k, (_, action) in enumerate(history):
            after = observations[k + 1]
            if after.strip() == patterns.NOTHING_HAPPENS:
                continue
            a = " ".join(str(action).split())
            m = patterns.GO.match(a)
            if m:
                st.location = m.group(1)
                if st.location not in st.visited:
                    st.visited.append(st.location)
            elif m := patterns.TAKE.match(a):
                st.held = m.group(1)
            elif m := patterns.PUT.match(a):
                obj, rec = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
                st.held = None
                st.done.append(f"put {obj} in {rec}")
            elif m := patterns.OPEN.match(a):
                if m.group(1) not in st.opened:
                    st.opened.append(m.group(1))
            elif m := patterns.CLOSE.match(a):
                if m.group(1) in st.opened:
                    st.opened.remove(m.group(1))
            elif m := patterns.TRANSFORM.match(a):
                st.done.append(f"{m.group(1)} {m.group(2)}")
            elif m := patterns.USE.match(a):
                st.done.append(f"use {m.group(1)}")
            st._see(after, words)
        places = [m.group(1) for c in admissible if (m := patterns.GO.match(" ".join(str(c).split())))]
        if st.location and st.location not in places:
            places.append(st.location)
        st.unvisited = search_order([p for p in places if p not in st.visited])
        st.spec = parse_goal(goal, {object_class(p) for p in places + st.visited})
        return st

    def _see(self, observation: str, words: set[str]) -> None:
        for m in patterns.SEE.finditer(" ".join(str(observation).split())):
            where = self.location if m.group(1) == "it" else m.group(1)[4:]
            if not where:
                continue
            for item in patterns.ITEM.findall(m.group(2)):
                if object_class(item) in words:
                    self.seen[item] = where
        for item, where in list(self.seen.items()):  # carried objects are not "at" a place
            if item == self.held:
                del self.seen[item]

    def render(self, exploration: bool = True) -> str:
        """Three short lines for the prompt (two without ``exploration``: no visited / not
        visited places, the hint that would do the exploring for the policy)."""
        seen = ", ".join(f"{o} at {w}" for o, w in self.seen.items()) or "nothing yet"
        head = f"{self.spec.render()}\n" if self.spec is not None else ""
        places = (
            (
                f"visited: {', '.join(self.visited) or 'nowhere yet'}. "
                f"not visited: {', '.join(self.unvisited) or 'none'}.\n"
            )
            if exploration
            else ""
        )
        return (
            f"{head}{places}"
            f"carrying: {self.held or 'nothing'}. done: {', '.join(self.done) or 'nothing yet'}.\n"
            f"seen: {seen}."
        )


#: ``memory`` values of a template: ``alfworld`` (every fact), ``alfworld-task`` (no exploration
#: hints: no visited / not visited places, no ``new`` / ``visited`` notes).
MEMORY_KINDS = ("alfworld", "alfworld-task")


def _parsed(
    goal: str, history: Sequence[tuple[str, str]], observation: str, admissible: Sequence[str]
) -> TranscriptState:
    """:meth:`TranscriptState.parse`, kept per thread for the next call with the same transcript:
    a decision's memory lines and its command notes read the same one (a vector step renders
    every prompt, then writes every note). Callers only read the state: it is shared."""
    key = (goal, tuple(map(tuple, history)), observation, tuple(admissible))
    kept = getattr(_PARSED, "states", None)
    if kept is None:
        kept = _PARSED.states = {}
    state = kept.get(key)
    if state is None:
        if len(kept) >= _PARSED_KEPT:
            kept.clear()
        state = kept[key] = TranscriptState.parse(goal, history, observation, admissible)
    return state


#: per thread, the transcripts :func:`_parsed` parsed lately (at most :data:`_PARSED_KEPT`: a vector step's)
_PARSED = threading.local()
_PARSED_KEPT = 256


def alfworld_memory(
    goal: str, history: Sequence[tuple[str, str]], observation: str, admissible: Sequence[str], exploration: bool = True
) -> str:
    """:meth:`TranscriptState.render` of the parsed transcript (the prompt's ``{memory}``)."""
    return _parsed(goal, history, observation, admissible).render(exploration)


def command_notes(
    goal: str,
    history: Sequence[tuple[str, str]],
    observation: str,
    admissible: Sequence[str],
    commands: Sequence[str],
    exploration: bool = True,
) -> list[str]:
    """What the transcript says about each of ``commands``, as a short note to write before it.

    The memory lines already hold these facts (visited places, where task objects were seen, what
    the task asks); the note puts them next to the command they concern, so a small policy that
    scores each command (score mode, a template whose ``score_response`` has ``{note}``) can use
    them without matching names across the prompt. Nothing hidden from the agent is used.

    - ``go to X``: ``seen target`` (an object named in the task was last seen at X), else
      ``task place`` (X's class is the task's place, appliance or lamp), else ``visited`` or
      ``new``;
    - ``take O from R``: ``target`` when O's class is the task's target, else ``other``;
    - ``put``/``move O to R``: ``task place`` when R's class is the task's place;
    - every other command: no note.

    Without ``exploration`` a ``go to`` gets only the task notes (``seen target``, ``task place``),
    never ``visited`` / ``new``: which places are new is then the policy's to learn.

    >>> hist = [("You are in the middle of a room.", "go to countertop 1"),
    ...         ("On the countertop 1, you see a mug 1, and a pen 1.", "take pen 1 from countertop 1")]
    >>> cmds = ["go to countertop 1", "go to sinkbasin 1", "go to coffeemachine 1", "go to shelf 1",
    ...         "take mug 1 from countertop 1", "put pen 1 in/on coffeemachine 1", "look"]
    >>> command_notes("put a clean mug in coffeemachine.", hist, "You pick up the pen 1 from the countertop 1.",
    ...               cmds, cmds)
    ['seen target: ', 'task place: ', 'task place: ', 'new: ', 'target: ', 'task place: ', '']
    """
    st = _parsed(goal, history, observation, admissible)
    spec = st.spec
    places = {c for c in ((spec.place, spec.appliance, spec.lamp) if spec else ()) if c}
    seen_at = set(st.seen.values())
    out: list[str] = []
    for c in commands:
        a = " ".join(str(c).split())
        note = ""
        if m := patterns.GO.match(a):
            x = m.group(1)
            note = (
                "seen target"
                if x in seen_at
                else "task place"
                if object_class(x) in places
                else ""
                if not exploration
                else "visited"
                if x in st.visited
                else "new"
            )
        elif m := patterns.TAKE.match(a):
            note = "target" if spec is not None and object_class(m.group(1)) == spec.target else "other"
        elif m := patterns.PUT.match(a):
            rec = m.group(2) or m.group(4)
            note = "task place" if spec is not None and spec.place and object_class(rec) == spec.place else ""
        out.append(f"{note}: " if note else "")
    return out
