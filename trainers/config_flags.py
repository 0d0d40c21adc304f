"""The command line of ``python -m trainers.progpo``: a flag per config field, in its section's
group, with its help text (:func:`build_parser`), and :func:`parse_args` (defaults < ``--config``
< the flags given).

>>> cfg, extra = parse_args(["--estimator", "grpo", "--iterations", "3"])
>>> cfg.estimator, cfg.iterations, extra.resume
('grpo', 3, None)
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

from trainers.advantages.options import yaml11_float
from trainers.advantages.registry import estimator_names
from trainers.config import TrainConfig, config_fields
from trainers.config_checks import spelling_conflict
from trainers.config_sections import ConfigError, closed_choices
from trainers.config_yaml import RENAMED, SECTION_OF, load_yaml, upgrade_names
from trainers.plugins import load_plugins, resolved
from trainers.teachers.registry import teacher_names

__all__ = ["PLUGIN_HINT", "build_parser", "parse_args"]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


#: what an unknown estimator or teacher most likely lacks
PLUGIN_HINT = "; a plug-in's is known once its module loads: pass --plugin MODULE_OR_FILE (or plugins: in --config)"


class _Parser(argparse.ArgumentParser):
    """argparse with a short error: one usage line and the error, with the closest flag or choice
    suggested (``--estimater`` -> ``--estimator``), instead of the whole usage of 100 flags."""

    def error(self, message: str) -> NoReturn:

        hint = ""
        unknown = re.match(r"unrecognized arguments: (\S+)", message)
        choice = re.match(r"argument (\S+?)(?:/\S+)?: invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if unknown:
            flags = [o for a in self._actions for o in a.option_strings if a.help != argparse.SUPPRESS]
            close = difflib.get_close_matches(unknown.group(1).split("=")[0], flags, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else ""
        elif choice:
            options = [c.strip().strip("'") for c in choice.group(3).split(",")]
            close = difflib.get_close_matches(choice.group(2), options, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]}?" if close else ""
            if not close and choice.group(1) in ("--estimator", "--distill"):
                hint = PLUGIN_HINT
        self.exit(2, f"usage: {self.prog} [options] (--help lists them)\nerror: {message}{hint}\n")


def _yaml_section(group: str) -> str:
    """Where a ``--help`` group's fields go in a YAML config, when in a section."""
    names = [f.name for f in config_fields() if f.metadata["group"] == group]
    found = sorted({SECTION_OF[n][0] for n in names if n in SECTION_OF})
    return f" (in a YAML config: under {', '.join(s + ':' for s in found)})" if found else ""


def _field_help(name: str) -> str:
    return next(f.metadata["help"] for f in config_fields() if f.name == name)


def _name_value(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` of ``--estimator-option``, the value read as a YAML scalar (``0.5``, ``true``, ``power``)."""
    import yaml  # the [train] extra

    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        parsed = yaml.safe_load(value) if value.strip() else value
    except yaml.YAMLError:
        parsed = value
    parsed = yaml11_float(parsed)
    return name.strip(), parsed if isinstance(parsed, (bool, int, float, str)) else value


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(
        prog="python -m trainers.progpo",
        description="Train an LLM agent with ProGPO (or GRPO / RLOO / GiGPO) on ALFWorld or WebShop. "
        "With no arguments: the CPU learning demo (tiny-128x2 cloned from the searching expert on the "
        "embedded easy-train ALFWorld games, then ProGPO(GiGPO); eval on the held-out easy-valid games).",
    )
    _add_command_flags(ap)
    choices = {**closed_choices(), "estimator": estimator_names(), "distill": teacher_names()}
    _add_field_flags(ap, choices)
    _add_renamed_flags(ap, choices)
    return ap


def _add_command_flags(ap: argparse.ArgumentParser) -> None:
    """The flags that are not fields: the config file, resume and overwrite, plug-ins and named options."""
    ap.add_argument(
        "--config",
        help="YAML file of field: value, a method's fields in the sections advantage:, tree:, "
        "distill: and ppo: (CLI flags override it)",
    )
    ap.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        default=None,
        help="continue from the latest checkpoint of --output-dir (or from the given checkpoint file)",
    )
    ap.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier run's files in --output-dir (a fresh run refuses a used directory)",
    )
    ap.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved config as the YAML a run would write (config.yaml) and exit; "
        "--config takes it back as it is",
    )
    ap.add_argument(
        "--accept-plugin-change",
        action="store_true",
        help="with --resume: train on although a plug-in's file changed since the run's last process "
        "(recorded in provenance.jsonl; without it such a resume is refused)",
    )
    ap.add_argument(
        "--plugin", dest="plugins", action="append", default=None, metavar="MODULE_OR_FILE", help=_field_help("plugins")
    )
    for owner in ("estimator", "teacher"):  # a plug-in's (or a built-in's) options by name, repeated
        ap.add_argument(
            f"--{owner}-option",
            dest=f"{owner}_options",
            action="append",
            default=None,
            type=_name_value,
            metavar="NAME=VALUE",
            help=_field_help(f"{owner}_options"),
        )


def _add_field_flags(ap: argparse.ArgumentParser, choices: dict[str, Any]) -> None:
    """One flag per config field, in its section's group, with its help text and default."""
    sections: dict[str, argparse._ArgumentGroup] = {}
    for f in config_fields():
        if f.name in ("notes", "plugins", "estimator_options", "teacher_options"):
            continue
        group = f.metadata["group"]
        if group not in sections:
            sections[group] = ap.add_argument_group(group + _yaml_section(group))
        default = f.default
        text = f"{f.metadata['help']} (default: {default!r})"
        if isinstance(default, bool):
            sections[group].add_argument(
                _flag(f.name), dest=f.name, action=argparse.BooleanOptionalAction, default=None, help=text
            )
        else:
            sections[group].add_argument(
                _flag(f.name), dest=f.name, type=type(default), default=None, choices=choices.get(f.name), help=text
            )


def _add_renamed_flags(ap: argparse.ArgumentParser, choices: dict[str, Any]) -> None:
    """The earlier names of renamed fields: not listed in --help, read with a deprecation line."""
    for old, new in RENAMED.items():
        if new == "notes":
            continue
        default = next(f.default for f in config_fields() if f.name == new)
        if isinstance(default, bool):
            ap.add_argument(
                _flag(old),
                dest=f"renamed_{old}",
                action=argparse.BooleanOptionalAction,
                default=None,
                help=argparse.SUPPRESS,
            )
        else:
            ap.add_argument(
                _flag(old),
                dest=f"renamed_{old}",
                type=type(default),
                default=None,
                choices=choices.get(new),
                help=argparse.SUPPRESS,
            )


def _early_plugins(argv: list[str] | None) -> None:
    """Load the plug-ins that ``--plugin`` and the ``--config`` file's ``plugins:`` name before the
    flags are built, so that ``--estimator`` offers their estimators."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--config")
    early.add_argument("--plugin", action="append", default=[])
    ns, _ = early.parse_known_args(argv)
    names = list(ns.plugin)
    if ns.config:
        try:
            listed = load_yaml(ns.config).get("plugins", [])
        except ConfigError:
            listed = []  # the file's own error is said once, by the full parse
        here = Path(ns.config).resolve().parent
        names += [resolved(p, here) for p in listed if isinstance(p, str)] if isinstance(listed, list) else []
    try:
        load_plugins([resolved(p) for p in names])
    except ValueError as err:
        raise ConfigError(str(err)) from None


def parse_args(argv: list[str] | None = None) -> tuple[TrainConfig, argparse.Namespace]:
    """CLI -> (config, namespace with ``config`` and ``resume``)."""
    _early_plugins(sys.argv[1:] if argv is None else argv)
    ns = build_parser().parse_args(argv)
    data: dict[str, Any] = load_yaml(ns.config) if ns.config else {}
    if isinstance(data.get("plugins"), list):  # a relative file is the YAML's neighbour, stored absolute
        here = Path(ns.config).resolve().parent
        data["plugins"] = [resolved(p, here) if isinstance(p, str) else p for p in data["plugins"]]
    source = f"config {ns.config}" if ns.config else "config"
    if ns.config and not data:  # an empty file, or one of comments only: said, not silently the defaults
        print(f"note: {source} sets nothing: every field not given as a flag is at its default", file=sys.stderr)
    cfg = TrainConfig.from_dict(data, source)
    skip = ("notes", "plugins", "estimator_options", "teacher_options")
    overrides = {
        f.name: getattr(ns, f.name) for f in config_fields() if f.name not in skip and getattr(ns, f.name) is not None
    }
    renamed = {old: getattr(ns, f"renamed_{old}") for old in RENAMED if getattr(ns, f"renamed_{old}", None) is not None}
    overrides = upgrade_names({**overrides, **renamed}, source="command line", spell=_flag)
    if ns.plugins:
        overrides["plugins"] = list(dict.fromkeys([*cfg.plugins, *(resolved(p) for p in ns.plugins)]))
    if ns.estimator_options:
        overrides["estimator_options"] = {**cfg.estimator_options, **dict(ns.estimator_options)}
        # given on one command line, even at the flag's default value
        conflict = spelling_conflict(
            overrides.get("estimator", cfg.estimator), overrides, overrides["estimator_options"]
        )
        if conflict:
            raise ConfigError(conflict)
    if ns.teacher_options:
        overrides["teacher_options"] = {**cfg.teacher_options, **dict(ns.teacher_options)}
    if overrides:
        cfg = dataclasses.replace(cfg, **overrides)
    return cfg, ns
