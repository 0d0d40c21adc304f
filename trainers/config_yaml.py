"""A config as YAML: its sections (``advantage: {estimator: ...}``) and the flat keys they hold
(:data:`SECTIONS`), the earlier names of renamed fields (:data:`RENAMED`), and reading a file
(:func:`load_yaml`: strict YAML, a size limit, one line for what is wrong)."""

from __future__ import annotations

import difflib
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable

from trainers.advantages.options import yaml11_float
from trainers.advantages.registry import flat_options
from trainers.config_sections import SETTINGS, ConfigError, owner_of
from trainers.strict_yaml import StrictYAMLError, load_strict

__all__ = [
    "RENAMED",
    "SECTIONS",
    "SECTION_OF",
    "coerce_value",
    "flatten_sections",
    "is_field",
    "load_yaml",
    "upgrade_names",
]


#: fields renamed for clarity: the old name -> the new one. The old names still work in YAML
#: files and as CLI flags for one release, each with a one-line deprecation notice.
RENAMED = {
    "init": "warm_start",
    "init_weights": "weights_file",
    "init_std": "tiny_init_std",
    "progress": "progress_bars",
    "extra": "notes",
    "fmt": "answer_format",
    "lam": "progress_lambda",
    "norm": "group_norm",
}


#: YAML sections, each the fields of one part of a method: section -> {its key: the TrainConfig
#: field}. A sectioned field written at the top level is read for one more release, with a
#: deprecation line; the flags stay flat (``--gamma``, ``--tree-branches``, ``--distill-tau``).
SECTIONS: dict[str, dict[str, str]] = {
    "advantage": {
        **{
            name: name
            for name in (
                "estimator",
                "gamma",
                "omega",
                "progress_lambda",
                "group_norm",
                "coverage",
                "state_key",
                "scope",
                "tau_r",
                "tau_p",
                "progress_gate",
                "shuffle_coverage",
                *(flag for flag, _, _ in flat_options()),
            )
        },
        "options": "estimator_options",
    },
    "tree": {
        name.removeprefix("tree_"): name
        for name in (
            "tree_branches",
            "tree_interval",
            "tree_children",
            "tree_top_k",
            "tree_prune_margin",
            "tree_repeat_limit",
            "tree_budget",
            "tree_scorer",
            "tree_loop_penalty",
        )
    },
    "distill": {
        "mode": "distill",
        "skill_writer": "skill_writer",
        "tau": "distill_tau",
        "lambda": "distill_lambda",
        "gate_beta": "distill_gate_beta",
        "top_k": "distill_top_k",
        "options": "teacher_options",
    },
    "ppo": {
        name: name
        for name in (
            "lr",
            "weight_decay",
            "clip_eps",
            "kl_coef",
            "entropy_coef",
            "max_grad_norm",
            "loss_agg",
            "lr_warmup_iterations",
            "ppo_epochs",
            "num_minibatches",
            "micro_batch_size",
            "micro_batch_tokens",
            "batch_decisions",
            "recompute_old_logprobs",
            "skip_zero_advantage",
            "gradient_checkpointing",
            "logit_chunk_tokens",
        )
    },
}


#: a sectioned field -> (its section, its key there)
SECTION_OF: dict[str, tuple[str, str]] = {f: (sec, key) for sec, keys in SECTIONS.items() for key, f in keys.items()}
#: :data:`SECTIONS`, then each of the config's sections not among them (``task``, ``budget``, ...)
#: by its fields' own names: a config may be written in the sections ``--print-config`` names too
_ALL_SECTIONS: dict[str, dict[str, str]] = {
    **SECTIONS,
    **{name: {f.name: f.name for f in fields(cls)} for name, cls in SETTINGS if name not in SECTIONS},
}


def is_field(name: str) -> bool:
    """Whether ``name`` is a :class:`TrainConfig` field (``distill`` is one, and a section too)."""
    return name == "plugins" or owner_of(name) is not None


def flatten_sections(data: dict[str, Any], source: str = "config", warn: bool = True) -> dict[str, Any]:
    """``data`` with its sections (:data:`SECTIONS`, and the config's own sections by their fields'
    names: ``budget: {iterations: 30}``) spread into fields; a field of :data:`SECTIONS` at the top
    level is kept, with one deprecation line on stderr when ``warn``. A field set twice, or a key
    a section does not have, is an error (before any line is printed).

    >>> flatten_sections({"advantage": {"estimator": "gigpo"}, "tree": {"branches": 2}, "seed": 3})
    {'estimator': 'gigpo', 'tree_branches': 2, 'seed': 3}
    >>> flatten_sections({"task": {"env": "rooms"}, "budget": {"iterations": 2}})
    {'env': 'rooms', 'iterations': 2}
    """

    out: dict[str, Any] = {}
    flat_sectioned: list[str] = []
    for key, value in data.items():
        if key in _ALL_SECTIONS and not isinstance(value, dict) and not is_field(key):
            raise ConfigError(
                f"{source}: {key}: is a section, a mapping of its keys (e.g. {key}: "
                f"{{{next(iter(_ALL_SECTIONS[key]))}: {value!r}}}); it takes {', '.join(_ALL_SECTIONS[key])}"
            )
        if key in _ALL_SECTIONS and isinstance(value, dict):
            entries = []
            for sub, sub_value in value.items():
                name = _ALL_SECTIONS[key].get(sub) if isinstance(sub, str) else None
                if name is None:
                    home = [
                        f"{sec}: {{{sub}: ...}}" for sec, keys in _ALL_SECTIONS.items() if sec != key and sub in keys
                    ]
                    close = difflib.get_close_matches(str(sub), list(_ALL_SECTIONS[key]), n=1, cutoff=0.6)
                    raise ConfigError(
                        f"{source}: {key}: has no key {sub!r}"
                        + (
                            f"; {sub} goes under {' or '.join(home)}"
                            if home
                            else f"; did you mean {close[0]}?"
                            if close
                            else f"; it takes {', '.join(_ALL_SECTIONS[key])}"
                        )
                    )
                entries.append((name, sub_value))
        else:
            entries = [(key, value)]
            if isinstance(key, str) and key in SECTION_OF:  # (an old name gets its own line)
                flat_sectioned.append(key)
        for name, v in entries:
            if name in out:
                raise ConfigError(f"{source}: {name} is set twice (in its section and at the top level); keep one")
            out[name] = v
    for key in flat_sectioned if warn else ():
        section, sub = SECTION_OF[key]
        print(
            f"deprecated: {source}: {key}: at the top level is now {section}: {{{sub}: ...}} (read there for one "
            "more release)",
            file=sys.stderr,
        )
    return out


def upgrade_names(
    data: dict[str, Any], source: str = "config", warn: bool = True, spell: Callable[[str], str] = str
) -> dict[str, Any]:
    """``data`` with every renamed field under its new name (``RENAMED``); one deprecation line on
    stderr per old name when ``warn`` (``spell`` writes a name as the user wrote it: a YAML key, a
    flag). Both names at once is an error.

    >>> upgrade_names({"init": "bc", "lr": 0.1}, warn=False)
    {'warm_start': 'bc', 'lr': 0.1}
    """
    for old in (k for k in data if k in RENAMED):
        new = RENAMED[old]
        if new in data:
            raise ConfigError(
                f"{source}: both {spell(old)} and {spell(new)} are set; {spell(old)} is the old name of "
                f"{spell(new)}: keep {spell(new)}"
            )
        if warn:
            print(
                f"deprecated: {source}: {spell(old)} is now {spell(new)} (the old name is read for one more release)",
                file=sys.stderr,
            )
    return {RENAMED.get(k, k): v for k, v in data.items()}


def coerce_value(name: str, value: Any, default: Any, source: str) -> Any:
    """Check a YAML value against the field's default type (ints are accepted for floats)."""
    if default is None:
        return value
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: {name} must be true or false, got {value!r}")
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{source}: {name} must be an integer, got {value!r}")
        return value
    if isinstance(default, float):
        value = yaml11_float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{source}: {name} must be a number, got {value!r}")
        return float(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise ConfigError(f"{source}: {name} must be a string, got {value!r}")
    return value


#: the largest ``--config`` file read
MAX_CONFIG_BYTES = 2**20


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping; any problem becomes a one-line :class:`ConfigError`."""
    import yaml  # the [train] extra

    p = Path(path)
    try:
        if not p.is_file():  # a FIFO would block the read forever, /dev/zero fill memory
            what = "does not exist" if not p.exists() else "is not a regular file"
            raise ConfigError(f"config {p} {what}; pass a YAML file")
        if p.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"config {p} is over {MAX_CONFIG_BYTES // 2**20} MiB; a config is a short YAML mapping")
        with p.open("rb") as fh:
            text = fh.read(MAX_CONFIG_BYTES + 1).decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read config {p}: {err.__class__.__name__}: {err}") from err
    try:
        data = load_strict(text)
    except StrictYAMLError as err:
        raise ConfigError(f"config {p} {err}") from None
    except yaml.YAMLError as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(f"config {p} is not valid YAML ({first})") from err
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config {p} must be a YAML mapping of field: value, got {type(data).__name__}")
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise ConfigError(
            f"config {p}: keys must be field names, got {', '.join(repr(k) for k in bad)}; run with --help for the list"
        )
    return data
