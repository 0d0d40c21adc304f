"""Canonical ALFWorld observations: a string that identifies the state, not the wording.

Use with the coverage wrappers: ``CanonicalizeObservation(env, canonicalize_alfworld)``.
Pure function of ``(observation, info)``; needs neither TextWorld nor the env.

**The state rule.** A state is new when the world or the agent's view of it changed (new
location, receptacle opened, object taken or put, object cleaned / heated / cooled / sliced,
lamp turned on), not when the same facts are printed again (``look``, ``inventory``,
``examine X``, ``help``, a failed command).

**With** ``info["admissible_commands"]`` (what the env reports on every reset and step) the
key is built from the engine state, not from the text:

1. ``@<digest>``: a sha1 digest of the sorted admissible commands. They are a deterministic
   function of what the agent is and sees: where it is ("examine drawer 1", "open drawer 1" vs
   "close drawer 1"), which objects lie in front of it ("take mug 1 from desk 1"), what it holds
   ("move mug 1 to desk 1"). Checked on the real engine (the 30 real games and the generated
   ones): ``look``, ``inventory``, ``examine X`` and ``help`` never change this list, so they
   map to the key of the state the agent is already in -- never a first visit. Going to a new
   receptacle, opening, taking and putting always change it.
2. Effects that change the world but not the command list get a suffix, the effect's feedback:
   ``@<digest> You clean the mug 1 using the sinkbasin 1.`` (also heat, cool, slice, and
   "You turn on the X."). Repeating the effect gives the same key (not new the second time).
   "You turn off the X." undoes "turn on" (lamps start off): no suffix, like closing a
   receptacle, which returns to the already-seen closed state.
3. A failed command ("Nothing happens.", ``valid_action`` False) leaves the command list as it
   was, so it maps to the current state's key too (and the wrappers keep the previous
   ``canonical_obs`` for any step the env rejects, whatever the canonicalizer).

Known approximation: after an effect, later states do not remember it (a clean mug and a dirty
mug held at the same place share a key); the effect itself is rewarded once per episode.

**Without** admissible commands (``canonicalize_alfworld(obs, {})``, e.g. on a transcript) the
key is the normalized text, which cannot tell a re-print from a state change:

1. Drop the welcome banner and the "Your task is to: ..." line (constant within an episode).
2. Drop arrival and opening echoes that precede a description: "You arrive at loc 24." (old
   grammar: location numbering is engine noise), "You arrive at cabinet 3." (new grammar),
   "You open the drawer 1." -- the description that follows says where the agent is.
3. "You close the X." becomes "The X is closed." (the same state as arriving at a closed X).
4. Old and new put feedback are one: "You move the X to the Y." == "You put the X in/on the Y.".
5. Listed items ("you see a mug 1, a pen 2, and a cd 1.") are sorted and joined by ", ".
6. Whitespace is collapsed.

Examples with the engine's state (the commands as the env reports them at bed 1):

>>> at_bed = {"admissible_commands": ["examine bed 1", "go to desk 1", "help", "inventory", "look",
...                                   "take book 1 from bed 1"]}
>>> arrive = canonicalize_alfworld("You arrive at bed 1. On the bed 1, you see a book 1.", at_bed)
>>> arrive.startswith("@") and len(arrive) == 17
True
>>> canonicalize_alfworld("You are facing the bed 1. Next to it, you see nothing.", at_bed) == arrive  # look
True
>>> canonicalize_alfworld("You are not carrying anything.", at_bed) == arrive  # inventory
True
>>> canonicalize_alfworld("On the bed 1, you see a book 1.", at_bed) == arrive  # examine bed 1
True
>>> canonicalize_alfworld("Nothing happens.", at_bed) == arrive  # a failed command
True
>>> holding = {"admissible_commands": ["examine bed 1", "examine book 1", "go to desk 1", "help",
...                                    "inventory", "look", "move book 1 to bed 1"]}
>>> took = canonicalize_alfworld("You pick up the book 1 from the bed 1.", holding)
>>> took != arrive  # holding the book: a new state
True
>>> canonicalize_alfworld("There's nothing special about book 1.", holding) == took  # examine book 1
True

World-changing effects that keep the command list:

>>> at_sink = {"admissible_commands": ["clean mug 1 with sinkbasin 1", "examine mug 1", "look"]}
>>> arrived = canonicalize_alfworld("You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing.", at_sink)
>>> cleaned = canonicalize_alfworld("You clean the mug 1 using the sinkbasin 1.", at_sink)
>>> cleaned == arrived + " You clean the mug 1 using the sinkbasin 1."
True
>>> canonicalize_alfworld("This is a clean mug 1.", at_sink) == arrived  # examine after cleaning: a re-print
True
>>> lamp = {"admissible_commands": ["examine desklamp 1", "look", "use desklamp 1"]}
>>> on = canonicalize_alfworld("You turn on the desklamp 1.", lamp)
>>> off = canonicalize_alfworld("You turn off the desklamp 1.", lamp)
>>> on != off == canonicalize_alfworld("You arrive at desk 1. On the desk 1, you see a desklamp 1.", lamp)
True

Command order does not matter; a different command list is a different state:

>>> a = canonicalize_alfworld("Nothing happens.", {"admissible_commands": ["look", "inventory"]})
>>> a == canonicalize_alfworld("Nothing happens.", {"admissible_commands": ["inventory", "look"]})
True
>>> a == canonicalize_alfworld("Nothing happens.", {"admissible_commands": ["look"]})
False

Text-only keys (no ``info``):

>>> canonicalize_alfworld("You arrive at loc 13. On the bed 1, you see a pillow 1, a book 1, and a laptop 1.", {})
'On the bed 1, you see: a book 1, a laptop 1, a pillow 1.'
>>> canonicalize_alfworld("You arrive at bed 1. On the bed 1, you see a laptop 1, a pillow 1, and a book 1.", {})
'On the bed 1, you see: a book 1, a laptop 1, a pillow 1.'
>>> canonicalize_alfworld("You close the drawer 1.", {}) == canonicalize_alfworld("You arrive at loc 7. The drawer 1 is closed.", {})
True
>>> canonicalize_alfworld("You move the mug 1 to the desk 2.", {})
'You put the mug 1 in/on the desk 2.'
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Mapping

from progpo_envs.alfworld import text as patterns
from progpo_envs.alfworld.text import NOTHING_HAPPENS

__all__ = [
    "NOTHING_HAPPENS",
    "canonicalize_alfworld",
    "canonicalize_alfworld_carry_free",
    "held_objects",
    "state_digest",
]


# Feedback of the actions that change the world without changing the admissible commands
# (found by playing every real game and the generated ones: clean, heat, cool, slice, use).
_EFFECT = re.compile(
    r"^(You (?:clean|heat|cool) the [^.]+? using the [^.]+?\."
    r"|You sliced the [^.]+? with the [^.]+?\."
    r"|You turn on the [^.]+?\.)$"
)


def _sorted_list(match: re.Match[str]) -> str:
    items = match.group(2).replace(", and ", ", ").replace(" and ", ", ").split(", ")
    items = sorted(i.strip() for i in items if i.strip())
    return f"{match.group(1)}: {', '.join(items)}."


def state_digest(admissible_commands: Any) -> str:
    """``@`` + 16 hex chars of the sha1 of the sorted admissible commands (order-free).

    >>> state_digest(["look", "go to desk 1"]) == state_digest(["go to desk 1", "look"])
    True
    """
    commands = sorted(str(c) for c in admissible_commands)
    return "@" + hashlib.sha1("\n".join(commands).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _text_key(text: str) -> str:
    text = patterns.ARRIVE.sub("", text)
    text = patterns.OPENED.sub("", text)
    m = patterns.CLOSED.match(text)
    if m:
        text = f"The {m.group(1)} is closed."
    m = patterns.MOVED.match(text)
    if m:
        text = f"You put the {m.group(1)} in/on the {m.group(2)}."
    return patterns.LIST.sub(_sorted_list, text)


_HELD = re.compile(r"^(?:move|put) (.+?) (?:to|in/on|in|on) ")


def held_objects(admissible_commands: Any) -> set[str]:
    """Objects the agent holds, read off its commands (``move X to Y`` / ``put X in/on Y``).

    >>> sorted(held_objects(["look", "move mug 1 to desk 1", "put mug 1 in/on shelf 2"]))
    ['mug 1']
    """
    return {m.group(1) for c in admissible_commands if (m := _HELD.match(str(c)))}


def canonicalize_alfworld_carry_free(obs: str, info: Mapping[str, Any] | None = None) -> str:
    """:func:`canonicalize_alfworld` with the commands that name a held object left out of the
    digest, so carrying an object does not make every place new again.

    Under the plain key, holding a mug changes the command list everywhere (``move mug 1 to X``,
    ``examine mug 1``), so each place visited before the pick-up counts as new once more. Here the
    pick-up is new (the place's listing changed) and later visits to known places are not.

    >>> at_bed = {"admissible_commands": ["examine bed 1", "go to desk 1", "look"]}
    >>> carrying = {"admissible_commands": at_bed["admissible_commands"] + ["examine mug 1", "move mug 1 to bed 1"]}
    >>> plain = [canonicalize_alfworld("On the bed 1, you see nothing.", i) for i in (at_bed, carrying)]
    >>> free = [canonicalize_alfworld_carry_free("On the bed 1, you see nothing.", i) for i in (at_bed, carrying)]
    >>> plain[0] == plain[1], free[0] == free[1]
    (False, True)
    """
    commands = info.get("admissible_commands") if isinstance(info, Mapping) else None
    if not commands:
        return canonicalize_alfworld(obs, info)
    held = held_objects(commands)
    kept = [c for c in commands if not any(re.search(rf"\b{re.escape(h)}\b", str(c)) for h in held)]
    return canonicalize_alfworld(obs, {**(info or {}), "admissible_commands": kept or list(commands)})


def canonicalize_alfworld(obs: str, info: Mapping[str, Any] | None = None) -> str:
    """Canonical state key of an ALFWorld observation (see the module docstring for the rules).

    With ``info["admissible_commands"]``: ``@<digest>`` of the engine state, plus the effect's
    feedback after clean / heat / cool / slice / turn on. Without: the normalized text.
    """
    text = patterns.WS.sub(" ", patterns.TASK.sub("", patterns.BANNER.sub("", str(obs)))).strip()
    commands = info.get("admissible_commands") if isinstance(info, Mapping) else None
    if commands:
        key = state_digest(commands)
        return f"{key} {text}" if _EFFECT.match(text) else key
    return _text_key(text)
