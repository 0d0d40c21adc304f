"""Canonical ALFWorld observations: a string that identifies the state, not the wording.

Use with the coverage wrappers: ``CanonicalizeObservation(env, canonicalize_alfworld)``.
Pure function of ``(observation, info)``; needs neither TextWorld nor the env.

Rules (applied in this order):

1. Drop the welcome banner and the "Your task is to: ..." line (constant within an episode).
2. Drop arrival and opening echoes that precede a description: "You arrive at loc 24." (old
   grammar: location numbering is engine noise), "You arrive at cabinet 3." (new grammar),
   "You open the drawer 1." -- the description that follows says where the agent is.
3. "You close the X." becomes "The X is closed." (the same state as arriving at a closed X).
4. Old and new put feedback are one: "You move the X to the Y." == "You put the X in/on the Y.".
5. Listed items ("you see a mug 1, a pen 2, and a cd 1.") are sorted and joined by ", ".
6. Whitespace is collapsed.
7. A failed command ("Nothing happens.") does not change the state: whatever command failed, it
   maps to "Nothing happens. @<digest>", where the digest is a hash of the sorted admissible
   commands (a deterministic function of the engine state: place, open receptacles, held object).
   So failed commands in one state give one canonical string, in different states different ones.

>>> canonicalize_alfworld("You arrive at loc 13. On the bed 1, you see a pillow 1, a book 1, and a laptop 1.", {})
'On the bed 1, you see: a book 1, a laptop 1, a pillow 1.'
>>> canonicalize_alfworld("You arrive at bed 1. On the bed 1, you see a laptop 1, a pillow 1, and a book 1.", {})
'On the bed 1, you see: a book 1, a laptop 1, a pillow 1.'
>>> canonicalize_alfworld("You close the drawer 1.", {}) == canonicalize_alfworld("You arrive at loc 7. The drawer 1 is closed.", {})
True
>>> canonicalize_alfworld("You move the mug 1 to the desk 2.", {})
'You put the mug 1 in/on the desk 2.'
>>> a = canonicalize_alfworld("Nothing happens.", {"admissible_commands": ["look", "inventory"]})
>>> a == canonicalize_alfworld("Nothing happens.", {"admissible_commands": ["inventory", "look"]})
True
>>> a == canonicalize_alfworld("Nothing happens.", {"admissible_commands": ["look"]})
False
"""
from __future__ import annotations

import hashlib
import re
from typing import Any, Mapping

NOTHING_HAPPENS = "Nothing happens."

_BANNER = re.compile(r"-=\s*Welcome to TextWorld, ALFRED!\s*=-")
_TASK = re.compile(r"Your task is to:[^\n]*")
_ARRIVE = re.compile(r"^You arrive at [^.]*\.\s+(?=\S)")
_OPEN = re.compile(r"^You open the [^.]*\.\s+(?=\S)")
_CLOSE = re.compile(r"^You close the ([^.]*)\.$")
_MOVE = re.compile(r"^You move the (.+?) to the ([^.]*)\.$")
_LIST = re.compile(r"(you see) (.+?)\.(?=\s|$)")
_WS = re.compile(r"\s+")


def _sorted_list(match: re.Match[str]) -> str:
    items = match.group(2).replace(", and ", ", ").replace(" and ", ", ").split(", ")
    items = sorted(i.strip() for i in items if i.strip())
    return f"{match.group(1)}: {', '.join(items)}."


def canonicalize_alfworld(obs: str, info: Mapping[str, Any] | None = None) -> str:
    """Canonical form of an ALFWorld observation (see the module docstring for the rules)."""
    text = _TASK.sub("", _BANNER.sub("", str(obs)))
    text = _WS.sub(" ", text).strip()
    if text == NOTHING_HAPPENS:
        commands = sorted((info or {}).get("admissible_commands") or [])
        digest = hashlib.sha1("\n".join(commands).encode()).hexdigest()[:12]
        return f"{NOTHING_HAPPENS} @{digest}"
    text = _ARRIVE.sub("", text)
    text = _OPEN.sub("", text)
    m = _CLOSE.match(text)
    if m:
        text = f"The {m.group(1)} is closed."
    m = _MOVE.match(text)
    if m:
        text = f"You put the {m.group(1)} in/on the {m.group(2)}."
    return _LIST.sub(_sorted_list, text)
