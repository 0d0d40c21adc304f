"""YAML for config files, strict where plain ``yaml.safe_load`` is silent or unbounded.

* **A key set twice** in one mapping, at any depth, is refused: ``safe_load`` keeps the last value,
  so ``advantage: {estimator: grpo}`` followed by ``advantage: {gamma: 0.9}`` would silently train
  the default estimator.
* **Aliases** (``*name``) are refused: a few hundred bytes of nested aliases expand into gigabytes
  once the config is copied or written back (a "billion laughs" document), and a config has no need
  to share nodes. Anchors alone (``&name``) are harmless and accepted.
* **Merge keys** (``<<:``) are refused: set twice in one mapping they would slip past the duplicate
  check, and a config needs no merges.
* **Nesting** past :data:`MAX_DEPTH` levels and **integers** of over :data:`MAX_INT_DIGITS` digits
  are refused in one line (PyYAML would recurse out of the stack, Python refuse the conversion).

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

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "StrictLoader", "StrictYAMLError", "load_strict"]


class StrictYAMLError(ValueError):
    """A YAML document that parses but that a config refuses (a duplicate key, an alias)."""


#: the deepest nesting a config may have (a config needs a handful of levels; PyYAML recurses per level)
MAX_DEPTH = 50
#: the longest integer a config may write (Python refuses to read more than 4,300 digits)
MAX_INT_DIGITS = 100


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses aliases, merge keys, keys set twice in one mapping, nesting
    past :data:`MAX_DEPTH` and integers past :data:`MAX_INT_DIGITS` digits."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise StrictYAMLError(
                f"line {event.start_mark.line + 1}: YAML aliases (*{event.anchor}) are not accepted "
                "in a config; write the value out"
            )
        if self._depth >= MAX_DEPTH:
            line = self.peek_event().start_mark.line + 1
            raise StrictYAMLError(f"line {line}: nested more than {MAX_DEPTH} levels deep; a config needs a few")
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node: Any) -> Any:
        digits = sum(c.isdigit() for c in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise StrictYAMLError(
                f"line {node.start_mark.line + 1}: an integer of {digits} digits; a config's numbers have at "
                f"most {MAX_INT_DIGITS}"
            )
        return super().construct_yaml_int(node)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # "<<:" set twice would slip past the check below
                    raise StrictYAMLError(
                        f"line {key_node.start_mark.line + 1}: YAML merge keys (<<) are not accepted in a "
                        "config; write the keys out"
                    )
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


StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)
