"""A handcoded full-knowledge expert for ALFWorld games.

It reads the engine's PDDL facts (where every object is, what is open, what the agent holds)
and the task spec (from the goal PDDL), and picks the next command among the engine's
applicable actions, so it works with every grammar version ("put X in/on Y" or "move X to Y").
It is used to prove generated games solvable and to win the real games in the tests; it never
calls the fast-downward planner (which can take > 60 s and > 1 GB on pick_two games).

Example (needs the ``alfworld`` extra)::

    >>> from progpo_envs.alfworld.engine import StockEngine           # doctest: +SKIP
    >>> eng = StockEngine(); eng.load(path)                            # doctest: +SKIP
    >>> plan = solve(eng)                                              # doctest: +SKIP
    >>> plan[:2]                                                       # doctest: +SKIP
    ['go to desk 2', 'take alarmclock 1 from desk 2']
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Protocol, Sequence

from progpo_envs.alfworld.engine import GroundAction, command_for
from progpo_envs.alfworld.tasks import TRANSFORMS, TaskSpec


class ExpertError(RuntimeError):
    """The expert found no applicable action towards the goal (or ran out of steps)."""


class _Engine(Protocol):
    won: bool

    def reset(self) -> str: ...

    def step(self, command: str) -> tuple[str, bool]: ...

    def facts(self) -> list[tuple[str, tuple[str, ...]]]: ...

    def ground_actions(self) -> list[GroundAction]: ...

    @property
    def problem_text(self) -> str: ...


class _World:
    """Indexes of the facts the expert needs (ids lower-case, as fast-downward spells them)."""

    def __init__(self, facts: Iterable[tuple[str, tuple[str, ...]]]) -> None:
        self.agent_loc: str | None = None
        self.held: str | None = None
        self.obj_type: dict[str, str] = {}
        self.rec_type: dict[str, str] = {}
        self.rec_loc: dict[str, str] = {}
        self.inside: dict[str, str] = {}
        self.contents: dict[str, set[str]] = defaultdict(set)
        self.flags: dict[str, set[str]] = defaultdict(set)  # predicate -> ids
        for name, args in facts:
            if name == "atlocation":
                self.agent_loc = args[1]
            elif name == "holds":
                self.held = args[1]
            elif name == "objecttype":
                self.obj_type[args[0]] = args[1]
            elif name == "receptacletype":
                self.rec_type[args[0]] = args[1]
            elif name == "receptacleatlocation":
                self.rec_loc[args[0]] = args[1]
            elif name == "inreceptacle":
                self.inside[args[0]] = args[1]
                self.contents[args[1]].add(args[0])
            elif len(args) == 1:
                self.flags[name].add(args[0])

    def objects_of(self, cls: str) -> list[str]:
        t = cls.lower() + "type"
        return sorted(o for o, ty in self.obj_type.items() if ty == t)

    def receptacles_of(self, cls: str) -> list[str]:
        t = cls.lower() + "type"
        return sorted(r for r, ty in self.rec_type.items() if ty == t)

    def needs_open(self, r: str) -> bool:
        return r in self.flags["openable"] and r not in self.flags["opened"]


class HandcodedExpert:
    """Online expert: call :meth:`next_command` after every step (it keeps a little memory)."""

    def __init__(self, spec: TaskSpec) -> None:
        self.spec = spec
        self._target: str | None = None

    def next_command(self, facts: Sequence[tuple[str, tuple[str, ...]]], actions: Sequence[GroundAction]) -> str:
        w = _World(facts)
        spec = self.spec
        if spec.task_type == "look_at_obj_in_light":
            return self._look(w, actions)
        if self._target is None:
            receps = w.receptacles_of(spec.receptacle_type or "")
            if not receps:
                raise ExpertError(f"no receptacle of type {spec.receptacle_type}")
            self._target = receps[0]
        target = self._target
        done_pred = TRANSFORMS.get(spec.task_type, (None,))[0]
        if w.held is not None:
            if done_pred and w.held not in w.flags[done_pred]:
                _, action, appliance = TRANSFORMS[spec.task_type]
                apps = w.receptacles_of(appliance)
                if not apps:
                    raise ExpertError(f"no {appliance} in the scene")
                return self._at(w, actions, apps[0]) or self._cmd(actions, action, o=w.held, r=apps[0])
            return self._at(w, actions, target, open_it=True) or self._cmd(actions, "putobject", o=w.held, r=target)
        placed = {o for o in w.contents.get(target, set()) if not done_pred or o in w.flags[done_pred]}
        candidates = [o for o in w.objects_of(spec.object_type) if o in w.inside and o not in placed]
        if not candidates:
            raise ExpertError(f"no {spec.object_type} left to pick up")
        obj = min(candidates, key=lambda o: (w.needs_open(w.inside[o]), o))
        return self._take(w, actions, obj)

    def _look(self, w: _World, actions: Sequence[GroundAction]) -> str:
        spec = self.spec
        if w.held is None or w.obj_type.get(w.held) != spec.object_type.lower() + "type":
            candidates = [o for o in w.objects_of(spec.object_type) if o in w.inside]
            if not candidates:
                raise ExpertError(f"no {spec.object_type} to pick up")
            return self._take(w, actions, min(candidates, key=lambda o: (w.needs_open(w.inside[o]), o)))
        lamps = [o for o in w.objects_of(spec.toggle_type or "") if o in w.flags["toggleable"] and o in w.inside]
        if not lamps:
            raise ExpertError(f"no toggleable {spec.toggle_type} in a receptacle")
        lamp = lamps[0]
        rec = w.inside[lamp]
        return self._at(w, actions, rec) or self._cmd(actions, "toggleobject", o=lamp, r=rec)

    def _take(self, w: _World, actions: Sequence[GroundAction], obj: str) -> str:
        rec = w.inside[obj]
        return self._at(w, actions, rec, open_it=True) or self._cmd(actions, "pickupobject", o=obj, r=rec)

    def _at(self, w: _World, actions: Sequence[GroundAction], rec: str, open_it: bool = False) -> str | None:
        """A command that brings the agent to ``rec`` (and opens it), or None when already there."""
        if w.agent_loc != w.rec_loc.get(rec):
            return self._cmd(actions, "gotolocation", r=rec)
        if open_it and w.needs_open(rec):
            return self._cmd(actions, "openobject", r=rec)
        return None

    @staticmethod
    def _cmd(actions: Sequence[GroundAction], name: str, **args: str) -> str:
        cmd = command_for(actions, name, **args)
        if cmd is None:
            raise ExpertError(f"action {name}{args} is not applicable")
        return cmd


def solve(engine: _Engine, max_steps: int = 60) -> list[str]:
    """Reset ``engine`` and play the expert until the game is won; returns the commands.

    Raises :class:`ExpertError` when the expert gets stuck or needs more than ``max_steps``.
    """
    engine.reset()
    expert = HandcodedExpert(TaskSpec.from_goal_pddl(engine.problem_text))
    plan: list[str] = []
    while not engine.won:
        if len(plan) >= max_steps:
            raise ExpertError(f"not won after {max_steps} steps: {plan}")
        cmd = expert.next_command(engine.facts(), engine.ground_actions())
        _, valid = engine.step(cmd)
        if not valid:
            raise ExpertError(f"expert command {cmd!r} was not admissible")
        plan.append(cmd)
    return plan
