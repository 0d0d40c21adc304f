"""A searching ALFWorld expert that reads only what the agent reads: the imitable teacher.

The handcoded expert of :mod:`progpo_envs.alfworld.expert` reads the engine's hidden facts and
walks straight to hidden objects, so a policy that sees only text cannot imitate it. This one
acts from the task sentence, ``info["task_type"]``, the admissible commands and its own
transcript (:class:`agents.memory.TranscriptState`): it visits receptacles in the order the
memory lists them (usually-open places first), opens closed ones to look inside, takes a target object as soon as it sees
one, cleans / heats / cools it at the appliance, uses the desk lamp, and puts it in the goal
receptacle. Its decisions are a function of the prompt the memory template shows, which is what
makes behaviour cloning from it work (``trainers.sft``).

Example:
    >>> agent = ALFWorldSearchAgent()
    >>> info = {"goal": "put some mug on desk.", "task_type": "pick_and_place_simple",
    ...         "admissible_commands": ["go to desk 1", "go to shelf 1", "inventory", "look"]}
    >>> agent.act(["You are in the middle of a room."], [info], [[]])
    ['go to desk 1']
    >>> info["admissible_commands"] = ["go to desk 1", "go to shelf 1", "take mug 1 from shelf 1", "look"]
    >>> agent.act(["On the shelf 1, you see a mug 1."], [info], [[("...", "go to desk 1"), ("...", "go to shelf 1")]])
    ['take mug 1 from shelf 1']
"""

from __future__ import annotations

import re
from typing import Sequence

from agents.contract import Histories, Infos, Observations
from agents.memory import TranscriptState, object_class
from agents.prompting import admissible_commands

__all__ = ["ALFWorldSearchAgent", "search_action"]

_LAMPS = ("desklamp", "floorlamp")


def _find(admissible: Sequence[str], pattern: str) -> str | None:
    rx = re.compile(pattern)
    return next((c for c in admissible if rx.match(c)), None)


def search_action(
    goal: str, task_type: str, history: Sequence[tuple[str, str]], observation: str, admissible: Sequence[str]
) -> str:
    """The searching expert's next command (always one of ``admissible`` when it is not empty).

    ``task_type`` is accepted for callers that have it; the expert reads the task from the
    sentence (:func:`agents.memory.parse_goal`), as the memory line shows it to the policy.
    """
    adm = [" ".join(str(c).split()) for c in admissible]
    if not adm:
        return "look"
    st = TranscriptState.parse(goal, history, observation, adm)
    spec = st.spec
    assert spec is not None
    places = st.visited + st.unvisited
    placed = {d.split(" in ")[0][4:] for d in st.done if d.startswith("put ")}

    def is_target(item: str | None) -> bool:
        return bool(item) and object_class(item) == spec.target and item not in placed  # type: ignore[arg-type]  # bool(item) above: item is a str here

    def go(place_cls: str | None) -> str | None:
        ps = [p for p in places if object_class(p) == place_cls]
        if not ps or st.location in ps:
            return None
        return f"go to {ps[0]}" if f"go to {ps[0]}" in adm else None

    if st.held is not None and is_target(st.held):
        held = st.held
        if spec.lamp:
            use = _find(adm, r"^use (desklamp|floorlamp) \d+$")
            if use:
                return use
            lamp_at = next((w for o, w in st.seen.items() if object_class(o) in _LAMPS), None)
            if lamp_at and lamp_at != st.location and f"go to {lamp_at}" in adm:
                return f"go to {lamp_at}"
        elif spec.transform and f"{spec.transform} {held}" not in st.done:
            cmd = _find(adm, rf"^{spec.transform} {re.escape(held)} with ")
            if cmd:
                return cmd
            step = go(spec.appliance)
            if step:
                return step
        elif spec.place:
            cmd = _find(adm, rf"^(put {re.escape(held)} in/on|move {re.escape(held)} to) {spec.place} \d+$")
            if cmd:
                return cmd
            if st.location and object_class(st.location) == spec.place and f"open {st.location}" in adm:
                return f"open {st.location}"
            step = go(spec.place)
            if step:
                return step
    elif st.held is None:
        take = next((c for c in adm if (m := re.match(r"^take (.+?) from ", c)) and is_target(m.group(1))), None)
        if take:
            return take
        where = next((w for o, w in st.seen.items() if is_target(o) and w != st.location), None)
        if where and f"go to {where}" in adm:
            return f"go to {where}"
    if st.location and f"open {st.location}" in adm and st.location not in st.opened:
        return f"open {st.location}"
    for p in st.unvisited:  # usually-open places first (agents.memory.search_order)
        if f"go to {p}" in adm:
            return f"go to {p}"
    gos = [c for c in adm if c.startswith("go to ")]
    return gos[len(history) % len(gos)] if gos else adm[0]


class ALFWorldSearchAgent:
    """Batched :func:`search_action` with the ``act(observations, infos, histories)`` interface.

    ``histories[i]`` must be env i's whole episode so far (``(observation, action)`` pairs).
    """

    def act(
        self, observations: Observations, infos: Infos, histories: Histories = None, *, seed: int | None = None
    ) -> list[str]:
        histories = histories if histories is not None else [[] for _ in observations]
        return [
            search_action(str(i.get("goal", "")), str(i.get("task_type", "")), h, o, admissible_commands(i))
            for o, i, h in zip(observations, infos, histories)
        ]
