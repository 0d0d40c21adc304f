"""ALFWorld's text as patterns, in one place: its commands and the sentences it answers with.

The agents' transcript memory (:mod:`agents.memory`) reads commands and what was seen; the
canonicalizer (:mod:`progpo_envs.alfworld.canonical`) strips the feedback that does not change
the state; the env reads the goal line.

>>> TAKE.match("take apple 1 from countertop 2").groups()
('apple 1', 'countertop 2')
>>> SEE.search("On the desk 1, you see a pen 2, and a mug 1.").groups()
('the desk 1', 'a pen 2, and a mug 1')
"""

from __future__ import annotations

import re

__all__ = [
    "ARRIVE",
    "BANNER",
    "CLOSE",
    "CLOSED",
    "GO",
    "GOAL",
    "ITEM",
    "LIST",
    "MOVED",
    "NOTHING_HAPPENS",
    "OPEN",
    "OPENED",
    "PUT",
    "SEE",
    "TAKE",
    "TASK",
    "TRANSFORM",
    "USE",
    "WORD",
    "WS",
]

#: what the engine says to a command that changed nothing
NOTHING_HAPPENS = "Nothing happens."

# the commands
GO = re.compile(r"^go to (.+)$")
TAKE = re.compile(r"^take (.+?) from (.+)$")
PUT = re.compile(r"^(?:put (.+?) in/on (.+)|move (.+?) to (.+))$")
OPEN = re.compile(r"^open (.+)$")
CLOSE = re.compile(r"^close (.+)$")
TRANSFORM = re.compile(r"^(clean|heat|cool|slice) (.+?) with (.+)$")
USE = re.compile(r"^use (.+)$")

# the answers
BANNER = re.compile(r"-=\s*Welcome to TextWorld, ALFRED!\s*=-")
TASK = re.compile(r"Your task is to:[^\n]*")
GOAL = re.compile(r"Your task is to: (.*)")
ARRIVE = re.compile(r"^You arrive at [^.]*\.\s+(?=\S)")
OPENED = re.compile(r"^You open the [^.]*\.\s+(?=\S)")
CLOSED = re.compile(r"^You close the ([^.]*)\.$")
MOVED = re.compile(r"^You move the (.+?) to the ([^.]*)\.$")
SEE = re.compile(r"(?:On|In) (the [a-z]+ \d+|it), you see (.+?)\.(?:\s|$)")
LIST = re.compile(r"(you see) (.+?)\.(?=\s|$)")
ITEM = re.compile(r"(?:a|an|some) ([a-z]+ \d+)")
WORD = re.compile(r"[a-z]+")
WS = re.compile(r"\s+")
