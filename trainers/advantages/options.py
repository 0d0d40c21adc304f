"""An estimator's options: a frozen dataclass whose every field is an :func:`option` (default,
one line of help, bounds or choices), and the check of given values against it
(:func:`check_options`). Standard library and the package's types only, so that a registry, a
config and verl's estimator functions share one schema.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Demo:
...     weight: float = option(0.5, "a weight", ge=0.0)
>>> check_options("demo", Demo, {"weight": "1e-3"})
{'weight': 0.001}
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Mapping, Sequence

__all__ = ["check_options", "option", "option_fields", "yaml11_float"]


def option(
    default: Any,
    help: str,
    *,
    flag: str | None = None,
    ge: float | None = None,  # argparse's word
    le: float | None = None,
    choices: Sequence[Any] | None = None,
    train: bool = True,
    shared: bool = False,
    exclusive: bool = False,
) -> Any:
    """A field of an estimator's options dataclass: its default, its one line of help, its bounds
    (``ge`` / ``le``) or ``choices``. ``flag``: the flat name the trainer's flags, YAML and verl's
    config spell it with (default ``<base>_<field>``); ``train=False``: set by the trainer itself
    (PlanPO's per-iteration weight), not a flag of its own; ``shared``: the value of the shared
    option of that name (``omega``) unless given; ``exclusive``: set away from its default while
    another base trains, it is an error (a feature that would silently do nothing)."""
    return dataclasses.field(
        default=default,
        metadata={
            "help": help,
            "flag": flag,
            "ge": ge,
            "le": le,
            "choices": tuple(choices) if choices else None,
            "train": train,
            "shared": shared,
            "exclusive": exclusive,
        },
    )


def option_fields(options: type | None) -> tuple[dataclasses.Field[Any], ...]:
    """The fields of an options dataclass (none for ``None``)."""
    return dataclasses.fields(options) if options is not None else ()


#: a float in exponent form without a dot, which YAML 1.1 (PyYAML) reads as a string
_YAML11_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def yaml11_float(value: Any) -> Any:
    """``value`` as a float where it is a string YAML 1.1 left unread (``1e-3``, no dot: a user
    means a number, as YAML 1.2 reads it); any other value as it is.

    >>> yaml11_float("1e-3"), yaml11_float(" 2E5 "), yaml11_float("1e"), yaml11_float(3)
    (0.001, 200000.0, '1e', 3)
    """
    return float(value) if isinstance(value, str) and _YAML11_FLOAT.fullmatch(value.strip()) else value


def _check_value(owner: str, f: dataclasses.Field[Any], value: Any) -> Any:
    """``value`` checked against the field's default type, bounds and choices; ints are read as floats."""
    meta, default = f.metadata, f.default
    what = meta.get("flag") or f"{owner} option {f.name}"
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f"{what} must be true or false, got {value!r}")
    elif isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{what} must be an integer, got {value!r}")
    elif isinstance(default, float):
        value = yaml11_float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{what} must be a finite number, got {value!r}")
        value = float(value)
    elif isinstance(default, str) and not isinstance(value, str):
        raise ValueError(f"{what} must be a string, got {value!r}")
    if meta.get("ge") is not None and value < meta["ge"]:
        raise ValueError(f"{what} must be >= {meta['ge']}, got {value!r}")
    if meta.get("le") is not None and value > meta["le"]:
        raise ValueError(f"{what} must be <= {meta['le']}, got {value!r}")
    if meta.get("choices") and value not in meta["choices"]:
        raise ValueError(f"{what} must be one of {', '.join(map(str, meta['choices']))}, got {value!r}")
    return value


def check_options(owner: str, options: type | None, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` checked against the options dataclass: no unknown name, each value of its type,
    in its bounds and choices. Returns the values with ints made floats where a float is meant.

    >>> from trainers.advantages.hgpo import HGPOConfig
    >>> check_options("hgpo", HGPOConfig, {"depth": 3})
    {'depth': 3}
    >>> check_options("hgpo", HGPOConfig, {"dept": 3})
    Traceback (most recent call last):
    ...
    ValueError: hgpo has no option 'dept'; it takes depth, alpha, fusion, potential_credit, omega
    """
    known = {f.name: f for f in option_fields(options)}
    out = {}
    for name, value in values.items():
        if name not in known:
            takes = ", ".join(known) if known else "no options"
            raise ValueError(f"{owner} has no option {name!r}; it takes {takes}")
        out[name] = _check_value(owner, known[name], value)
    return out
