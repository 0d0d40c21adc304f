"""YAML for config files, strict where plain ``yaml.safe_load`` is silent or unbounded.

* **A key set twice** in one mapping, at any depth, is refused: ``safe_load`` keeps the last value,
  so ``advantage: {estimator: grpo}`` followed by ``advantage: {gamma: 0.9}`` would silently train
  the default estimator.
* **Aliases** (``*name``) are refused: a few hundred bytes of nested aliases expand into gigabytes
  once the config is copied or written back (a "billion laughs" document), and a config has no need
  to share nodes. Anchors alone (``&name``) are harmless and accepted.

>>> load_strict("a: 1\\nb: {c: 2}\\n")
{'a': 1, 'b': {'c': 2}}
>>> load_strict("a: 1\\nb: {a: 2, a: 3}\\n")
Traceback (most recent call last):
...
trainers.strict_yaml.StrictYAMLError: line 2: key 'a' is set twice in one mapping (first on line 2)
>>> load_strict("x: &big [1, 2]\\ny: *big\\n")
Traceback (most recent call last):
...
trainers.strict_yaml.StrictYAMLError: line 2: YAML aliases (*big) are not accepted in a config; write the value out
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["StrictLoader", "StrictYAMLError", "load_strict"]


class StrictYAMLError(ValueError):
    """A YAML document that parses but that a config refuses (a duplicate key, an alias)."""


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses aliases and keys set twice in one mapping."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise StrictYAMLError(
                f"line {event.start_mark.line + 1}: YAML aliases (*{event.anchor}) are not accepted "
                "in a config; write the value out"
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # "<<:" is resolved by the base class
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in seen:
                        raise StrictYAMLError(
                            f"line {line}: key {key!r} is set twice in one mapping (first on line {seen[key]})"
                        )
                    seen[key] = line
                except TypeError:  # an unhashable key: the base class refuses it with its own message
                    continue
        return super().construct_mapping(node, deep=deep)


def load_strict(text: str) -> Any:
    """``text`` parsed as one YAML document by :class:`StrictLoader`."""
    return yaml.load(text, Loader=StrictLoader)  # StrictLoader is a SafeLoader
