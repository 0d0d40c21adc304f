"""ALFWorld task types and the task spec read from a game's goal PDDL.

>>> spec = TaskSpec.from_goal_pddl('''(:goal (and (exists (?r - receptacle) (exists (?o - object)
...     (and (cleanable ?o) (objectType ?o BowlType) (receptacleType ?r CabinetType)
...          (isClean ?o) (inReceptacle ?o ?r))))))''')
>>> spec.task_type, spec.object_type, spec.receptacle_type
('pick_clean_then_place_in_recep', 'Bowl', 'Cabinet')
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)

#: state predicate each "transform then place" task needs on its object, and the appliance type.
TRANSFORMS: dict[str, tuple[str, str, str]] = {
    # task type: (goal predicate, PDDL action, appliance receptacle type)
    "pick_clean_then_place_in_recep": ("isclean", "cleanobject", "SinkBasin"),
    "pick_heat_then_place_in_recep": ("ishot", "heatobject", "Microwave"),
    "pick_cool_then_place_in_recep": ("iscool", "coolobject", "Fridge"),
}

_OBJ = re.compile(r"\(objectType \?o1? (\w+)Type\)", re.I)
_RECEP = re.compile(r"\(receptacleType \?r (\w+)Type\)", re.I)
_TOGGLE = re.compile(r"\(objectType \?ot (\w+)Type\)", re.I)


def task_type_of_folder(task_folder: str) -> str | None:
    """The task type a folder name starts with (original layout: ``<type>-<Obj>-<MRecep>-<Recep>-<scene>``)."""
    head = task_folder.split("-", 1)[0]
    return head if head in TASK_TYPES else None


@dataclass(frozen=True)
class TaskSpec:
    """What a game asks for: task type and the THOR class names involved."""

    task_type: str
    object_type: str
    receptacle_type: str | None = None
    toggle_type: str | None = None

    @classmethod
    def from_goal_pddl(cls, text: str) -> "TaskSpec":
        """Read the spec from a problem's ``(:goal ...)`` section (or the whole problem text)."""
        idx = text.find("(:goal")
        goal = text[idx:] if idx >= 0 else text
        low = goal.lower()
        obj = _OBJ.search(goal)
        if obj is None:
            raise ValueError("goal has no (objectType ?o <X>Type) condition: not an ALFWorld goal")
        toggle = _TOGGLE.search(goal)
        recep = _RECEP.search(goal)
        if "(istoggled" in low and toggle is not None:
            return cls("look_at_obj_in_light", obj.group(1), None, toggle.group(1))
        if recep is None:
            raise ValueError("goal has no (receptacleType ?r <X>Type) condition: not an ALFWorld goal")
        if "?o2" in low:
            task = "pick_two_obj_and_place"
        elif "(isclean" in low:
            task = "pick_clean_then_place_in_recep"
        elif "(ishot" in low:
            task = "pick_heat_then_place_in_recep"
        elif "(iscool" in low:
            task = "pick_cool_then_place_in_recep"
        else:
            task = "pick_and_place_simple"
        return cls(task, obj.group(1), recep.group(1), None)
