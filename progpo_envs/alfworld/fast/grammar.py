"""Grammar cache of the fast path: one TatSu parse per grammar version, memoized derivation.

* :func:`game_logic` -- the parsed ``GameLogic`` of (domain, grammar), cached per sha256; games
  whose grammars differ only in the task sentence share one parse (the sentence is substituted
  into a copy of the "task" rule). Every query and expression is parsed/compiled up front.
* :class:`FastGrammar` -- ``ContextSensitiveGrammar`` whose snippets and conjunctive queries are
  parsed once (memoized on their text), whose symbol trees are cloned node by node and whose
  contexts are copied shallowly (derivation never mutates the entities it reads).
* :func:`template_is_static` -- whether a command template reads only facts no action changes.

Each re-implementation mirrors textworld 1.7.0 (the version ``progpo[alfworld]`` pins).
"""

from __future__ import annotations

import copy
import re
from collections import defaultdict
from typing import Any, Mapping

import textworld.envs.pddl.textgen as tg
from textworld.envs.pddl import logic as pddl_logic
from textworld.logic import Rule

from progpo_envs.alfworld.engine import eval_expression
from progpo_envs.alfworld.fast.memo import LRU, sha

__all__ = ["FastGrammar", "game_logic", "template_is_static"]

_CACHE_SIZE = 64
_LOGIC = LRU(_CACHE_SIZE)
_SYMBOLS = LRU(4096)
_QUERIES = LRU(4096)
_EVALS = LRU(4096)


def _clone(symbol: Any) -> Any:
    """Copy of a parsed symbol tree (nodes copied, strings shared): what ``deepcopy`` gives for
    freshly parsed symbols, whose contexts are empty, at a fraction of the cost."""
    c = object.__new__(type(symbol))
    c.__dict__.update(symbol.__dict__)
    if isinstance(symbol, tg.ListSymbol):
        c.symbol = _clone(symbol.symbol)
    elif isinstance(symbol, tg.ConditionalSymbol):
        c.expression = _clone(symbol.expression)
    return c


def _parsed(text: str) -> list[Any]:
    return _SYMBOLS.get_or_make(text, lambda: tg._parse_and_convert(text, rule_name="symbols"))


def _symbols(text: str) -> list[Any]:
    """Parsed symbols of a grammar snippet (fresh copy: derivation assigns contexts to them)."""
    return [_clone(s) for s in _parsed(text)]


def _compiled(expression: str) -> Any:
    return _EVALS.get_or_make(expression, lambda: compile(expression, "<twl2>", "eval"))


def _prewarm(symbols: list[Any]) -> None:
    """Parse/compile every query and expression inside ``symbols`` now rather than mid-episode."""
    stack = list(symbols)
    while stack:
        s = stack.pop()
        if isinstance(s, tg.ListSymbol):
            stack.append(s.symbol)
        elif isinstance(s, tg.ConditionalSymbol):
            if s.given:
                _query_rule(s.given)
            stack.append(s.expression)
        elif isinstance(s, tg.EvalSymbol):
            _compiled(s.expression)


def _query_rule(expr: str) -> Any:
    return _QUERIES.get_or_make(expr, lambda: Rule.parse_conjunctive_query(expr))


def _copy_context(context: Mapping[str, Any]) -> dict[str, Any]:
    # textworld 1.7.0 textgen.copy_context, without deep-copying the entities it only reads
    return {
        "state": context["state"],
        "facts": context["facts"],
        "variables": dict(context["variables"]),
        "mapping": dict(context["mapping"]),
        "entity_infos": context["entity_infos"],
    }


def _query(expression: str, context: Mapping[str, Any]) -> list[dict[str, Any]]:
    # textworld 1.7.0 textgen.query, with the conjunctive query parsed once
    rule = _query_rule(expression)
    contexts = []
    for mapping in context["state"].all_assignments(rule, context["mapping"]):
        ctx = _copy_context(context)
        ctx["variables"].update({ph.name: ctx["entity_infos"][var.name] for ph, var in mapping.items()})
        ctx["mapping"].update(mapping)
        contexts.append(ctx)
    return contexts


def _copy_symbol(symbol: Any, context: Mapping[str, Any]) -> Any:
    clone = _clone(symbol)
    clone.context = _copy_context(context)
    return clone


def _derive_symbol(symbol: Any) -> list[Any]:
    """One derivation step of a non-terminal-free symbol: textworld 1.7.0's
    ``ConditionalSymbol.derive``, ``EvalSymbol.derive`` and ``ListSymbol.derive``."""
    if isinstance(symbol, tg.ConditionalSymbol):
        if len(symbol.context) == 0:
            raise ValueError("Empty context")
        context = _copy_context(symbol.context)
        contexts = _query(symbol.given, context) if symbol.given else [context]
        return [_copy_symbol(symbol.expression, c) for c in contexts]
    if isinstance(symbol, tg.EvalSymbol):
        return [tg.TerminalSymbol(eval_expression(_compiled(symbol.expression), symbol, symbol.context))]
    if isinstance(symbol, tg.ListSymbol):
        inner = symbol.symbol
        inner.context = symbol.context
        return tg.display_list(_derive_symbol(inner), symbol.context)
    raise NotImplementedError(f"Unknown symbol: {type(symbol)}")


class FastGrammar(tg.ContextSensitiveGrammar):
    """``ContextSensitiveGrammar`` with memoized parsing and shallow context copies."""

    def replace(self, start: Any) -> list[Any]:
        # textworld 1.7.0 ContextSensitiveGrammar.replace: first rule whose condition holds
        rules = self._rules.get(str(start))
        if not rules:
            raise tg.CSGUnknownSymbolError(start)
        chosen = None
        for rule in rules:
            if not rule.condition:
                chosen = rule
                break
            q = _query_rule(rule.condition)
            if any(True for _ in start.context["state"].all_assignments(q, start.context["mapping"])):
                chosen = rule
                break
        if chosen is None:
            raise IndexError("list index out of range")  # what the stock engine raises
        symbols = [_clone(sym) for sym in chosen.rhs]
        for symbol in symbols:
            symbol.context = _copy_context(start.context)
        return symbols

    def derive(self, start: str, context: Mapping[str, Any] = {}) -> str:  # stock signature
        # textworld 1.7.0 ContextSensitiveGrammar.derive: depth-first, left to right
        derivation = _symbols(start)[::-1]
        for symbol in derivation:
            symbol.context = _copy_context(context)
        derived = []
        while derivation:
            symbol = derivation.pop()
            if isinstance(symbol, tg.TerminalSymbol):
                derived.append(symbol)
            elif isinstance(symbol, tg.NonterminalSymbol):
                derivation += self.replace(symbol)[::-1]
            else:
                derivation += _derive_symbol(symbol)[::-1]
        return "".join(map(str, derived))


# The task sentence is the only part of the twl2 text that differs between the games of a
# grammar version; parsing a copy with a placeholder lets all those games share one TatSu parse.
_TASK_RULE = re.compile(r'("task"\s*:\s*\[\s*\{\s*"rhs"\s*:\s*"Your task is to: )([^"]*)(")')
_PLAIN = re.compile(r"[A-Za-z0-9 ,.'-]*")
_PLACEHOLDER = "PROGPOTASKSENTENCEPLACEHOLDER"


def _parse_logic(domain: str, grammar: str) -> Any:
    logic = pddl_logic.GameLogic(domain=domain, grammar=grammar)
    fast = FastGrammar()
    fast._rules = logic.grammar._rules
    logic.grammar = fast
    for rules in list(fast._rules.values()):
        for rule in rules:
            if rule.condition:
                _query_rule(rule.condition)
            _prewarm(rule.rhs)
    for action in logic.actions.values():
        _prewarm(_parsed(action.template))
        _prewarm(_parsed(action.feedback_rule))
    _prewarm(_parsed("#intro#"))
    return logic


def game_logic(domain: str, grammar: str) -> Any:
    """Parsed ``GameLogic`` of (domain, grammar), sharing the parse across task sentences."""
    matches = list(_TASK_RULE.finditer(grammar))
    sentence = matches[0].group(2) if len(matches) == 1 else None
    if sentence is None or not _PLAIN.fullmatch(sentence) or _PLACEHOLDER in grammar:
        return _LOGIC.get_or_make(sha(domain, grammar), lambda: _parse_logic(domain, grammar))

    def make() -> Any:
        m = matches[0]
        base_text = grammar[: m.start(2)] + _PLACEHOLDER + grammar[m.end(2) :]
        base = _LOGIC.get_or_make(sha(domain, base_text), lambda: _parse_logic(domain, base_text))
        return _with_sentence(base, sentence)

    return _LOGIC.get_or_make(sha(domain, grammar), make)


def _with_sentence(base: Any, sentence: str) -> Any:
    """A copy of ``base`` whose "task" rule says ``sentence`` instead of the placeholder."""
    logic = copy.copy(base)
    grammar = FastGrammar()
    grammar._rules = defaultdict(list, base.grammar._rules)
    rules = []
    for rule in base.grammar._rules["task"]:
        rhs = copy.deepcopy(rule.rhs)
        for sym in rhs:
            if isinstance(sym, tg.TerminalSymbol) and isinstance(sym.symbol, str):
                sym.symbol = sym.symbol.replace(_PLACEHOLDER, sentence)
        rules.append(tg.ProductionRule(lhs=rule.lhs, rhs=rhs, weight=rule.weight, condition=rule.condition))
    grammar._rules["task"] = rules
    logic.grammar = grammar
    return logic


def template_is_static(template: str, dynamic: set[str]) -> bool:
    """True when deriving ``template`` reads no fact that an action can change."""
    stack = list(_symbols(template))
    while stack:
        s = stack.pop()
        if isinstance(s, (tg.TerminalSymbol, tg.EvalSymbol)):
            continue
        if isinstance(s, tg.ListSymbol):
            stack.append(s.symbol)
        elif isinstance(s, tg.ConditionalSymbol):
            if s.given:
                rule = _query_rule(s.given)
                if any(p.name.lower() in dynamic for p in rule.preconditions):
                    return False
            stack.append(s.expression)
        else:  # a non-terminal: its rules may have conditions; derive every time
            return False
    return True
