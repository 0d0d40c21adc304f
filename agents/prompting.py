"""Prompt construction from the per-environment templates in ``agents/templates/*.yaml``.

A prompt holds the task, the step count, the last ``k`` (observation, action) pairs, the
current observation and the admissible commands, followed by the answer-format instruction.
Templates are data: edit the YAML (or pass your own file path as ``env_name``) to change them.

Example:
    >>> msgs = build_messages("alfworld", goal="put a clean mug in coffeemachine.",
    ...                       observation="You arrive at countertop 1.",
    ...                       admissible=["look", "take mug 1 from countertop 1"],
    ...                       history=[("You are in the middle of a room.", "go to countertop 1")],
    ...                       step=1, k=2, fmt="action")
    >>> [m["role"] for m in msgs]
    ['system', 'user']
    >>> "Action 1: 'go to countertop 1'" in msgs[1]["content"]
    True
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml

from agents.memory import MEMORY_KINDS, alfworld_memory
from agents.parsing import FORMATS, sanitize_text
from wrappers.errors import UserError

__all__ = [
    "PromptTemplate",
    "TemplateError",
    "admissible_commands",
    "build_messages",
    "fill_placeholders",
    "goal_text",
    "load_template",
    "render_prompt",
    "template_name",
]

_ALIASES = {
    "alfworld": "alfworld",
    "progpo-alfworld-v0": "alfworld",
    "webshop": "webshop",
    "progpo-webshop-v0": "webshop",
    "alfworld-memory": "alfworld-memory",
    "alfworld-notes": "alfworld-notes",
    "alfworld-task-notes": "alfworld-task-notes",
    "webshop-notes": "webshop-notes",
}
_TEMPLATES = Path(__file__).resolve().parent / "templates"
#: templates shipped in agents/templates/ (``alfworld-memory``: compact, with a transcript memory;
#: ``alfworld-notes``: the same with a note before each scored command; ``alfworld-task-notes``:
#: the notes and memory of the task only, no exploration hints; ``webshop-notes``: compact WebShop
#: with a note before each scored command)
_BUILTIN = {
    "alfworld": "alfworld",
    "webshop": "webshop",
    "alfworld-memory": "alfworld_memory",
    "alfworld-notes": "alfworld_notes",
    "alfworld-task-notes": "alfworld_task_notes",
    "webshop-notes": "webshop_notes",
}
#: the largest template file read
_MAX_TEMPLATE_BYTES = 2**20
_FALLBACK_CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class TemplateError(UserError, ValueError):
    """A prompt template that cannot be loaded; the message names the file and the problem."""


@dataclass(frozen=True)
class PromptTemplate:
    """One environment's prompt template (the fields of its YAML file)."""

    name: str
    system: str
    user_first: str
    user: str
    history_item: str
    format_instructions: dict[str, str]
    history_separator: str = "\n"
    admissible_item: str = "'{command}'"
    admissible_separator: str = ", "
    noop_action: str = ""
    max_observation_chars: int = 2000
    max_admissible: int = 60
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>") -> "PromptTemplate":
        required = ("name", "system", "user_first", "user", "history_item", "format_instructions")
        missing = [k for k in required if k not in data]
        if missing:
            raise TemplateError(f"prompt template {source} lacks the field(s) {missing}")
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["noop_action"] = kwargs.get("noop_action") or ""
        for key, value in kwargs.items():
            if key in ("max_observation_chars", "max_admissible"):
                ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
                kind = "an integer > 0"
            elif key == "format_instructions":
                ok = isinstance(value, dict) and all(
                    isinstance(k, str) and isinstance(v, str) for k, v in value.items()
                )
                kind = "a mapping of format name: text"
            else:
                ok, kind = isinstance(value, str), "a string"
            if not ok:
                raise TemplateError(f"prompt template {source}: {key} must be {kind}, got {type(value).__name__}")
        return cls(**kwargs, extra={k: v for k, v in data.items() if k not in known})


def admissible_commands(info: Any) -> list[str]:
    """``info["admissible_commands"]`` as a list of str (missing/None -> ``[]``; numpy arrays ok)."""
    cmds = info.get("admissible_commands") if hasattr(info, "get") else None
    if cmds is None:
        return []
    if isinstance(cmds, (str, bytes)):
        cmds = [cmds]
    return [c.decode("utf-8", "replace") if isinstance(c, bytes) else str(c) for c in list(cmds)]


_PLACEHOLDER = re.compile(r"\[\s*<[^<>\[\]]*>\s*\]")


def goal_text(goal: Any) -> str:
    """The instruction of a goal (a dict goal: ``instruction_text``, ``instruction`` or ``query``)."""
    if isinstance(goal, dict):
        return str(goal.get("instruction_text") or goal.get("instruction") or goal.get("query") or "")
    return "" if goal is None else str(goal)


def fill_placeholders(command: str, info: dict[str, Any]) -> str:
    """``command`` as score mode offers it: whitespace-normalized, a ``[<query>]`` placeholder
    filled with the goal instruction (lower-cased, first 100 characters).

    >>> fill_placeholders("search[<query>]", {"goal": {"instruction_text": "Red  Shoes, size 7"}})
    'search[red shoes, size 7]'
    """
    fill = " ".join(goal_text(info.get("goal", "")).lower().split())[:100] or "item"
    c = " ".join(sanitize_text(command, 1000).split())
    return _PLACEHOLDER.sub(lambda _m: f"[{fill}]", c)


def template_name(env_name: str) -> str:
    """Normalize ``"ProGPO-ALFWorld-v0"``/``"alfworld"`` -> ``"alfworld"`` (paths are kept)."""
    return _ALIASES.get(str(env_name).strip().lower(), str(env_name))


@functools.lru_cache(maxsize=32)
def load_template(env_name: str) -> PromptTemplate:
    """The template for ``env_name`` (``alfworld``, ``alfworld-memory``, ``webshop``, a gym id, or a YAML path).

    A template file may start from another one: ``extends: <template>`` takes that template's
    fields, then its own override them (``alfworld-task-notes`` is ``alfworld-notes`` with another
    ``memory``). Chains may be of any depth; a relative parent path is read from the folder of the
    file that names it; a cycle is refused. Any problem raises :class:`TemplateError` in one line.
    """
    data, source = _resolved(env_name, None, ())
    return PromptTemplate.from_dict(data, source)


def _resolved(name: str, folder: Path | None, chain: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    """The fields of template ``name`` with its ``extends`` chain applied (``folder``: where a
    relative ``name`` is read from; ``chain``: the templates that extend it, for the cycle check)."""
    data, source, own_folder = _template_data(name, folder)
    if source in chain:
        raise TemplateError(f"prompt template {chain[0]}: 'extends' forms a cycle ({' -> '.join([*chain, source])})")
    if "extends" not in data:
        return data, source
    parent = data.pop("extends")
    if not isinstance(parent, str) or not parent.strip():
        raise TemplateError(f"prompt template {source}: 'extends' must name a template or a YAML file, got {parent!r}")
    base, _ = _resolved(parent.strip(), own_folder, (*chain, source))
    return {**base, **data}, source


def _template_data(env_name: str, folder: Path | None = None) -> tuple[dict[str, Any], str, Path]:
    """(fields, source, the folder its relative parents are read from) of one template file."""
    name = template_name(env_name)
    if name in _BUILTIN:
        # next to this file (not importlib.resources: a tests/agents/ folder on sys.path can
        # turn "agents" into a namespace package whose first portion is not this one)
        path, source = _TEMPLATES / f"{_BUILTIN[name]}.yaml", f"agents/templates/{_BUILTIN[name]}.yaml"
    else:
        path = Path(name).expanduser()
        if folder is not None and not path.is_absolute():
            path = folder / path
        source = str(path)
        if not path.is_file():
            what = "is not a regular file" if path.exists() else "does not exist"
            raise TemplateError(
                f"no prompt template {env_name!r} ({source} {what}): use 'alfworld', 'alfworld-memory', 'webshop' or "
                "a path to a YAML file with the fields of agents/templates/alfworld.yaml"
            )
        if path.stat().st_size > _MAX_TEMPLATE_BYTES:
            raise TemplateError(f"prompt template {source} is over {_MAX_TEMPLATE_BYTES // 2**20} MiB")
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except yaml.YAMLError as err:  # python tags (!!python/object) included: safe_load constructs none
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise TemplateError(f"prompt template {source} is not valid YAML for a template ({first})") from None
    except (OSError, UnicodeDecodeError) as err:
        raise TemplateError(f"cannot read prompt template {source}: {type(err).__name__}: {err}") from None
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise TemplateError(f"prompt template {source} is not a YAML mapping of field: value")
    return data, source, path.resolve().parent


def _cut(text: Any, limit: int) -> str:
    text = sanitize_text(text if isinstance(text, (str, bytes)) else str(text), 4 * limit + 16)
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + " ..."


def build_messages(
    env_name: str,
    *,
    goal: str,
    observation: str,
    admissible: Sequence[str],
    history: Sequence[tuple[str, str]],
    step: int,
    k: int = 2,
    fmt: str = "think_action",
) -> list[dict[str, str]]:
    """Chat messages (system + user) for one decision.

    Args:
        env_name: ``"alfworld"``, ``"webshop"`` (or their gym ids), or a template YAML path.
        goal: task instruction (``info["goal"]``; a dict goal uses its ``instruction`` text).
        observation: the current observation.
        admissible: the admissible commands (cut to the template's ``max_admissible``).
        history: earlier ``(observation, action)`` pairs, oldest first; the last ``k`` are shown
            (a template with ``memory: alfworld`` also summarizes all of them: pass the whole episode).
        step: how many steps were already taken in this episode.
        k: history length shown (0 hides it).
        fmt: answer format, one of :data:`agents.parsing.FORMATS`.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")
    if k < 0:
        raise ValueError(f"history length k must be >= 0, got {k}")
    tpl = load_template(env_name)
    limit = int(tpl.max_observation_chars)
    if isinstance(goal, dict):
        goal = goal.get("instruction") or goal.get("instruction_text") or goal.get("goal") or ""
    shown = list(history)[-k:] if k > 0 else []
    first_index = max(int(step), len(shown)) - len(shown) + 1
    items = [
        tpl.history_item.format(index=first_index + i, observation=_cut(o, limit // 2), action=_cut(a, 200))
        for i, (o, a) in enumerate(shown)
    ]
    cmds = [_cut(c, 200) for c in list(admissible)[: int(tpl.max_admissible)]]
    values = dict(
        goal=_cut(goal, 1000),
        step=int(step),
        current_step=int(step) + 1,
        history_length=len(shown),
        history=tpl.history_separator.join(items),
        observation=_cut(observation, limit),
        admissible=tpl.admissible_separator.join(tpl.admissible_item.format(command=c) for c in cmds),
        format_instruction=tpl.format_instructions[fmt].strip(),
    )
    memory = tpl.extra.get("memory")
    if memory in MEMORY_KINDS:  # a summary of the whole transcript (agents/memory.py)
        values["memory"] = alfworld_memory(
            str(goal), list(history), str(observation), list(admissible), exploration=memory == "alfworld"
        )
    body = (tpl.user if shown else tpl.user_first).format(**values)
    return [{"role": "system", "content": tpl.system.strip()}, {"role": "user", "content": body}]


def render_prompt(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of ``messages`` rendered with the tokenizer's chat template + generation prompt.

    Tokenizers without a chat template get ChatML. Special tokens come from the template text
    only (no extra BOS is added).
    """
    template = getattr(tokenizer, "chat_template", None) or _FALLBACK_CHATML
    text = tokenizer.apply_chat_template(messages, chat_template=template, tokenize=False, add_generation_prompt=True)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])
