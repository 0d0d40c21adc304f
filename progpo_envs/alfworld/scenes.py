"""The AI2-THOR floor plans the generator places games in (:func:`load_scene`: object classes,
receptacles with their poses, reachable points, read from the ``alfworld`` wheel's layouts), ALFRED's
constants (:class:`AlfredLib`), the ids the PDDL uses, and how hard a game is (:class:`Difficulty`).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from progpo_envs.alfworld.install import import_alfworld

__all__ = [
    "ACTION_CLASS",
    "APPLIANCE",
    "AlfredLib",
    "DIFFICULTIES",
    "HORIZONS",
    "LAMP_RECEPTACLES",
    "VALID_FLOOR_PLANS",
    "Difficulty",
    "Scene",
    "class_of",
    "load_scene",
    "loc_id",
    "pddl_id",
]

VALID_FLOOR_PLANS = tuple(
    f"FloorPlan{n}" for n in (5, 10, 15, 25, 205, 210, 215, 225, 305, 310, 315, 325, 405, 410, 415, 425)
)

#: receptacles a desk lamp stands on.
LAMP_RECEPTACLES = ("Desk", "SideTable", "Dresser", "DiningTable", "CoffeeTable", "Shelf")
HORIZONS = (0, 15, 30, 45, 60)
APPLIANCE = {
    "pick_clean_then_place_in_recep": "SinkBasin",
    "pick_heat_then_place_in_recep": "Microwave",
    "pick_cool_then_place_in_recep": "Fridge",
}
ACTION_CLASS = {
    "pick_clean_then_place_in_recep": "Cleanable",
    "pick_heat_then_place_in_recep": "Heatable",
    "pick_cool_then_place_in_recep": "Coolable",
}


@dataclass(frozen=True)
class Difficulty:
    """How hard a generated game is.

    >>> DIFFICULTIES["hard"].max_instances, DIFFICULTIES["normal"].far_start, DIFFICULTIES["easy"].max_receptacles
    (3, False, 8)
    """

    name: str
    max_instances: int = 2  #: copies of each object class (uniform in 1..max_instances)
    distractor_fraction: float = 0.5  #: share of the scene's other object classes that are present
    hidden: float = 0.2  #: probability that a target object starts in a closed receptacle (if one fits)
    far_start: bool = False  #: start on the reachable point farthest from the target objects
    #: keep at most this many receptacles (those the task needs first, then random others; 0: all).
    #: In the text game every receptacle is one ``go to`` away, so this is what "a small floor
    #: plan / start near the targets" means here: fewer places to search.
    max_receptacles: int = 0


DIFFICULTIES: dict[str, Difficulty] = {
    "normal": Difficulty("normal"),
    "hard": Difficulty("hard", max_instances=3, distractor_fraction=1.0, hidden=1.0, far_start=True),
    # hidden=0.0 here means never hidden: targets start on open receptacles (tables, counters...)
    "easy": Difficulty("easy", max_instances=1, distractor_fraction=0.2, hidden=0.0, max_receptacles=8),
}


def pddl_id(thor_id: str) -> str:
    """THOR id -> PDDL id, as ALFRED's ``fix_pddl_str_chars`` does."""
    out = []
    table = {"-": "_minus_", "|": "_bar_", "+": "_plus_", ".": "_dot_", ",": "_comma_"}
    for ch in thor_id:
        out.append(table.get(ch, ch))
    return "".join(out)


def loc_id(point: Sequence[float]) -> str:
    x, z, rot, hor = point
    return pddl_id("loc|%d|%d|%d|%d" % (int(round(x / 0.25)), int(round(z / 0.25)), int(round(rot / 90)) % 4, int(hor)))


def class_of(thor_id: str) -> str:
    parts = thor_id.split("|")
    return parts[-1] if len(parts) > 4 else parts[0]


class AlfredLib:
    """ALFRED's constants and goal library from the installed wheel (imported once)."""

    def __init__(self) -> None:
        self.c = import_alfworld("alfworld.gen.constants")
        self.goals = import_alfworld("alfworld.gen.goal_library").gdict
        self.layout_dir = Path(self.c.__file__).parent / "layouts"
        self.static_receptacles = set(self.c.RECEPTACLES) - set(self.c.MOVABLE_RECEPTACLES)
        containable = set().union(*self.c.VAL_RECEPTACLE_OBJECTS.values())
        self.pickupable = {o for o in containable if o in self.c.OBJECTS_SET and not o.endswith("Sliced")}
        self.otypes = sorted((set(self.c.OBJECTS) | set(self.c.MOVABLE_RECEPTACLES)) - self.static_receptacles)
        self.rtypes = sorted(self.static_receptacles)

    def holders(self, obj_class: str, present: Iterable[str]) -> list[str]:
        return sorted(r for r in present if obj_class in self.c.VAL_RECEPTACLE_OBJECTS.get(r, ()))

    def floor_plans(self) -> list[str]:
        names = {p.name.split("-")[0] for p in self.layout_dir.glob("FloorPlan*-openable.json")}
        ok = [
            n
            for n in names
            if (self.layout_dir / f"{n}-objects.json").exists() and (self.layout_dir / f"{n}-layout.npy").exists()
        ]
        return sorted(ok, key=lambda n: int(n[len("FloorPlan") :]))


@dataclass
class Scene:
    """A floor plan: object classes present, receptacle instances with poses, reachable points."""

    floor_plan: str
    classes: list[str]
    receptacles: dict[str, tuple[float, float, int, int]]  # THOR id -> (x, z, rotation, horizon)
    points: list[tuple[float, float]]


def load_scene(lib: AlfredLib, floor_plan: str, rng: random.Random) -> Scene:
    """Read a floor plan's layout files; receptacle classes without a recorded pose get one sampled."""
    d = lib.layout_dir
    classes = json.loads((d / f"{floor_plan}-objects.json").read_text())
    openable = json.loads((d / f"{floor_plan}-openable.json").read_text())
    points = [(float(x), float(z)) for x, z in np.load(d / f"{floor_plan}-layout.npy").tolist()]
    receptacles = {k: (float(v[0]), float(v[1]), int(v[2]), int(v[3])) for k, v in sorted(openable.items())}
    have = {class_of(k) for k in receptacles}
    for cls in sorted(set(classes) & lib.static_receptacles - have):
        for _ in range(2 if cls == "StoveBurner" else 1):
            x, z = rng.choice(points)
            thor = "%s|%+06.2f|%+06.2f|%+06.2f" % (
                cls,
                x + rng.uniform(-0.5, 0.5),
                rng.uniform(0, 1.5),
                z + rng.uniform(-0.5, 0.5),
            )
            receptacles[thor] = (x, z, rng.randrange(4) * 90, rng.choice(HORIZONS))
    return Scene(floor_plan, sorted(set(classes)), receptacles, points)
