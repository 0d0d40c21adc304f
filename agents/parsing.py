"""Parse a model's answer into an environment command.

Formats (``fmt``):

* ``"think_action"``: ``<think>...</think><action>...</action>``. Both think tags must be
  present (in order) and an ``<action>`` tag must follow ``</think>``; otherwise the answer is
  invalid. This is the format of GiGPO/verl-agent's ALFWorld and WebShop prompts.
* ``"action"``: ``<action>...</action>``; a think block is allowed but not required.
* ``"raw"``: the first non-empty line of the answer is the command.

Rules shared by the formats:

* Tags are matched case-insensitively. When several ``<action>`` tags are present the
  **first** one (after ``</think>`` in ``think_action``) is used; the answer stays valid and
  ``reason`` mentions it.
* An ``<action>`` tag without ``</action>`` is invalid (``"unclosed <action> tag"``) -- the
  generation hit its token limit; an empty action or one longer than ``max_action_chars``
  is invalid.
* Whitespace inside the action is collapsed to single spaces; case is kept (the envs
  lower-case what they need).
* Input may be ``bytes`` (decoded as UTF-8 with replacement), may hold lone surrogates or
  NUL bytes, and may be arbitrarily long: only the first ``max_scan_chars`` characters are
  searched, so a 1 MB answer costs the same as a 64 KB one.

An invalid answer still carries ``fallback``: a short best-effort command string (the unclosed
action's text, or the answer's last 30 characters as verl-agent sends), for policies that send
invalid answers to the env as they are.

Example:
    >>> parse_action("<think>The mug is here.</think><action>take mug 1 from desk 1</action>")
    ParsedAction(action='take mug 1 from desk 1', valid=True, reason='ok', fallback='take mug 1 from desk 1')
    >>> parse_action("<action>go to desk 1", fmt="action").reason
    'unclosed <action> tag'
    >>> parse_action("look\\nthen go", fmt="raw").action
    'look'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["FORMATS", "ParsedAction", "parse_action", "sanitize_text"]

#: the answer formats of generate mode: a thought then the action, the action alone, or the raw text
FORMATS = ("think_action", "action", "raw")

_WS = re.compile(r"\s+")
_THINK_OPEN = re.compile(r"<\s*think\s*>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"<\s*/\s*think\s*>", re.IGNORECASE)
_ACTION_OPEN = re.compile(r"<\s*action\s*>", re.IGNORECASE)
_ACTION_CLOSE = re.compile(r"<\s*/\s*action\s*>", re.IGNORECASE)
FALLBACK_CHARS = 30


@dataclass(frozen=True)
class ParsedAction:
    """Result of :func:`parse_action`.

    Attributes:
        action: the command to send, or ``None`` when the answer is invalid.
        valid: whether the answer followed the format.
        reason: ``"ok"`` (possibly with a note) or why the answer is invalid.
        fallback: best-effort command for an invalid answer (equals ``action`` when valid).
    """

    action: str | None
    valid: bool
    reason: str
    fallback: str = ""


def sanitize_text(text: str | bytes, max_chars: int | None = None) -> str:
    """Make ``text`` a clean ``str``: UTF-8 decoded, surrogates replaced, NULs dropped, cut.

    Example:
        >>> sanitize_text(b"go to \\xff desk\\x00")
        'go to \\ufffd desk'
    """
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text[: None if max_chars is None else 4 * max_chars]).decode("utf-8", "replace")
    elif not isinstance(text, str):
        text = str(text)
    if max_chars is not None:
        text = text[:max_chars]
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text.replace("\x00", "")


def _clean(s: str) -> str:
    return _WS.sub(" ", s).strip()


def _tail(s: str) -> str:
    return _clean(s)[-FALLBACK_CHARS:]


def _extract_action(text: str, start: int, max_action_chars: int) -> ParsedAction:
    opened = _ACTION_OPEN.search(text, start)
    if opened is None:
        return ParsedAction(None, False, "missing <action> tag", _tail(text))
    closed = _ACTION_CLOSE.search(text, opened.end())
    if closed is None:
        body = _clean(text[opened.end() :])[:max_action_chars]
        return ParsedAction(None, False, "unclosed <action> tag", body)
    body = _clean(text[opened.end() : closed.start()])
    if not body:
        return ParsedAction(None, False, "empty action", "")
    if len(body) > max_action_chars:
        return ParsedAction(None, False, f"action longer than {max_action_chars} characters", body[:max_action_chars])
    if _ACTION_OPEN.search(body):
        # "<action><action>x</action>": nested open tag, ambiguous.
        return ParsedAction(None, False, "nested <action> tag", _tail(body))
    extra = len(_ACTION_OPEN.findall(text, closed.end()))
    reason = "ok" if extra == 0 else f"ok ({extra + 1} <action> tags, used the first)"
    return ParsedAction(body, True, reason, body)


def parse_action(
    text: str | bytes,
    fmt: str = "think_action",
    *,
    max_action_chars: int = 512,
    max_scan_chars: int = 65536,
) -> ParsedAction:
    """Parse ``text`` in format ``fmt`` (see the module docstring). Never raises on bad text."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")
    text = sanitize_text(text, max_scan_chars)
    if not text.strip():
        return ParsedAction(None, False, "empty output", "")
    if fmt == "raw":
        for line in text.splitlines():
            line = _clean(line)
            if line:
                if len(line) > max_action_chars:
                    return ParsedAction(
                        None, False, f"action longer than {max_action_chars} characters", line[:max_action_chars]
                    )
                return ParsedAction(line, True, "ok", line)
        return ParsedAction(None, False, "empty output", "")
    if fmt == "action":
        close = _THINK_CLOSE.search(text)
        start = close.end() if close is not None and _ACTION_OPEN.search(text, close.end()) else 0
        return _extract_action(text, start, max_action_chars)
    # think_action
    t_open = _THINK_OPEN.search(text)
    if t_open is None:
        parsed = _extract_action(text, 0, max_action_chars)
        return ParsedAction(None, False, "missing <think> tag", parsed.fallback)
    t_close = _THINK_CLOSE.search(text, t_open.end())
    if t_close is None:
        parsed = _extract_action(text, t_open.end(), max_action_chars)
        return ParsedAction(None, False, "unclosed <think> tag", parsed.fallback)
    return _extract_action(text, t_close.end(), max_action_chars)
