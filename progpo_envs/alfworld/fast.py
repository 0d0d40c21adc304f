"""The fast path of the ALFWorld engine: same transcripts as the stock engine, less work.

Where the stock TextWorld PDDL backend spends its time, and what this module does instead:

* **load**: TatSu parses the whole twl2 grammar for every game file. Here the parsed
  ``GameLogic`` is cached per sha256 of (domain, grammar); games whose grammars differ only in
  the task sentence (all games of one grammar version) share one parse, the sentence being
  substituted into a copy of the "task" rule. Every query and expression of the grammar is
  parsed/compiled at that point, not mid-episode.
* **reset**: the PDDL problem is translated to SAS twice (once for play, once "optimized" for
  the planner) on every load and every reset. Here the play translation, reduced to what the
  engine reads, is cached per sha256 of (fast-downward version, domain, problem) in memory and
  on disk (``$PROGPO_CACHE_DIR/alfworld-sas``, gzip'd JSON, ~10 KB a game;
  ``PROGPO_ALFWORLD_SAS_CACHE=0`` turns the disk part off); the planner's translation is made
  only if the planner is asked for (``replan``), which the env never does.
* **step**: every applicable action's command template is re-parsed by TatSu and derived with
  deep-copied contexts. Here grammar snippets and conjunctive queries are parsed once
  (memoized on their text), symbol trees are cloned node by node, contexts are copied
  shallowly (derivation never mutates the entities it reads), the per-operator part of the
  applicable actions (name, argument mapping) is built once per game, and the command of an
  action whose template only reads static facts (predicates that no PDDL action changes, e.g.
  ``receptacleAtLocation``) is derived once per operator and game.

Cache keys are content hashes of the texts that determine the result, so two games sharing a
grammar share the parse, and a game file changed on disk is a new key: a cache cannot go stale.
In-memory caches are per process (fast-downward's translator is not thread-safe: use
processes) and LRU bounded; :func:`clear_caches` empties them. :func:`warm_translation_cache`
fills the disk cache ahead of rollout workers.

``eval`` of grammar expressions passes the variables explicitly, so this path does not depend on
the pre-3.13 ``locals()`` behaviour that makes the stock ``EvalSymbol.derive`` raise
``NameError`` on Python 3.13.

Memory: the first engine of a process loads fast-downward's ``libdownward.so`` from its installed
path (one copy in the OS page cache, shared by every worker process); further engines in the
same process get a private temporary copy as the stock engine does (the library keeps its
state in globals, so two engines must not share one mapping).

Identity with the stock engine is tested (``tests/alfworld``) and checked for every game by
``python -m progpo_envs.alfworld.identity``.
"""
from __future__ import annotations

import copy
import hashlib
import json
import re
import threading
from collections import Counter, OrderedDict, defaultdict
from typing import Any, Callable, Mapping

from progpo_envs.alfworld.engine import StockEngine, _Argv, require_engine

_CACHE_SIZE = 64


class _LRU:
    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[Any, Any] = OrderedDict()
        self.lock = threading.Lock()

    def get_or_make(self, key: Any, make: Callable[[], Any]) -> Any:
        with self.lock:
            if key in self.data:
                self.data.move_to_end(key)
                return self.data[key]
        value = make()
        with self.lock:
            self.data[key] = value
            while len(self.data) > self.size:
                self.data.popitem(last=False)
        return value

    def clear(self) -> None:
        with self.lock:
            self.data.clear()


_LOGIC = _LRU(_CACHE_SIZE)
_TASKS = _LRU(_CACHE_SIZE)
_SYMBOLS = _LRU(4096)
_QUERIES = _LRU(4096)
_EVALS = _LRU(4096)


def clear_caches() -> None:
    """Drop every cached parse and translation of this process."""
    for c in (_LOGIC, _TASKS, _SYMBOLS, _QUERIES, _EVALS):
        c.clear()


def _sha(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# grammar derivation (same algorithm as textworld.envs.pddl.textgen, without the re-parsing)
# ---------------------------------------------------------------------------------------------
def _tg() -> Any:
    import textworld.envs.pddl.textgen as tg

    return tg


def _clone(symbol: Any) -> Any:
    """Copy of a parsed symbol tree (nodes copied, strings shared): what ``deepcopy`` gives for
    freshly parsed symbols, whose contexts are empty, at a fraction of the cost."""
    tg = _tg()
    c = object.__new__(type(symbol))
    c.__dict__.update(symbol.__dict__)
    if isinstance(symbol, tg.ListSymbol):
        c.symbol = _clone(symbol.symbol)
    elif isinstance(symbol, tg.ConditionalSymbol):
        c.expression = _clone(symbol.expression)
    return c


def _parsed(text: str) -> list[Any]:
    tg = _tg()
    return _SYMBOLS.get_or_make(text, lambda: tg._parse_and_convert(text, rule_name="symbols"))


def _symbols(text: str) -> list[Any]:
    """Parsed symbols of a grammar snippet (fresh copy: derivation assigns contexts to them)."""
    return [_clone(s) for s in _parsed(text)]


def _prewarm(symbols: list[Any]) -> None:
    """Parse/compile every query and expression inside ``symbols`` now rather than mid-episode."""
    tg = _tg()
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
            _EVALS.get_or_make(s.expression, lambda: compile(s.expression, "<twl2>", "eval"))


def _query_rule(expr: str) -> Any:
    from textworld.logic import Rule

    return _QUERIES.get_or_make(expr, lambda: Rule.parse_conjunctive_query(expr))


def _copy_context(context: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "state": context["state"],
        "facts": context["facts"],
        "variables": dict(context["variables"]),
        "mapping": dict(context["mapping"]),
        "entity_infos": context["entity_infos"],
    }


def _query(expression: str, context: Mapping[str, Any]) -> list[dict[str, Any]]:
    rule = _query_rule(expression)
    contexts = []
    for mapping in context["state"].all_assignments(rule, context["mapping"]):
        ctx = _copy_context(context)
        ctx["variables"].update({ph.name: ctx["entity_infos"][var.name] for ph, var in mapping.items()})
        ctx["mapping"].update(mapping)
        contexts.append(ctx)
    return contexts


def _eval(symbol: Any, context: Mapping[str, Any]) -> Any:
    code = _EVALS.get_or_make(symbol.expression, lambda: compile(symbol.expression, "<twl2>", "eval"))
    scope = {"self": symbol, "context": context}
    scope.update(context["variables"])
    return eval(code, vars(_tg()), scope)  # noqa: S307 - the game's own grammar, as the stock engine does


def _copy_symbol(symbol: Any, context: Mapping[str, Any]) -> Any:
    clone = _clone(symbol)
    clone.context = _copy_context(context)
    return clone


def _derive_symbol(symbol: Any) -> list[Any]:
    """One derivation step of a non-terminal-free symbol (Conditional, Eval, List)."""
    tg = _tg()
    if isinstance(symbol, tg.ConditionalSymbol):
        if len(symbol.context) == 0:
            raise ValueError("Empty context")
        context = _copy_context(symbol.context)
        contexts = _query(symbol.given, context) if symbol.given else [context]
        return [_copy_symbol(symbol.expression, c) for c in contexts]
    if isinstance(symbol, tg.EvalSymbol):
        return [tg.TerminalSymbol(_eval(symbol, symbol.context))]
    if isinstance(symbol, tg.ListSymbol):
        inner = symbol.symbol
        inner.context = symbol.context
        return tg.display_list(_derive_symbol(inner), symbol.context)
    raise NotImplementedError(f"Unknown symbol: {type(symbol)}")


def _make_fast_grammar_class() -> type:
    tg = _tg()

    class FastGrammar(tg.ContextSensitiveGrammar):
        """``ContextSensitiveGrammar`` with memoized parsing and shallow context copies."""

        def replace(self, start: Any) -> list[Any]:
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

        def derive(self, start: str, context: Mapping[str, Any] = {}) -> str:  # noqa: B006 - stock signature
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

    return FastGrammar


_FAST_GRAMMAR: type | None = None


def _fast_grammar_class() -> type:
    global _FAST_GRAMMAR
    if _FAST_GRAMMAR is None:
        _FAST_GRAMMAR = _make_fast_grammar_class()
    return _FAST_GRAMMAR


# ---------------------------------------------------------------------------------------------
# cached game logic and PDDL translation
# ---------------------------------------------------------------------------------------------
# The task sentence is the only part of the twl2 text that differs between the games of a
# grammar version; parsing a copy with a placeholder lets all those games share one TatSu parse.
_TASK_RULE = re.compile(r'("task"\s*:\s*\[\s*\{\s*"rhs"\s*:\s*"Your task is to: )([^"]*)(")')
_PLAIN = re.compile(r"[A-Za-z0-9 ,.'-]*")
_PLACEHOLDER = "PROGPOTASKSENTENCEPLACEHOLDER"


def _parse_logic(domain: str, grammar: str) -> Any:
    from textworld.envs.pddl import logic as pddl_logic

    logic = pddl_logic.GameLogic(domain=domain, grammar=grammar)
    fast = _fast_grammar_class()()
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


def _game_logic(domain: str, grammar: str) -> Any:
    """Parsed ``GameLogic`` of (domain, grammar), sharing the parse across task sentences."""
    matches = list(_TASK_RULE.finditer(grammar))
    sentence = matches[0].group(2) if len(matches) == 1 else None
    if sentence is None or not _PLAIN.fullmatch(sentence) or _PLACEHOLDER in grammar:
        return _LOGIC.get_or_make(_sha(domain, grammar), lambda: _parse_logic(domain, grammar))

    def make() -> Any:
        m = matches[0]
        base_text = grammar[: m.start(2)] + _PLACEHOLDER + grammar[m.end(2):]
        base = _LOGIC.get_or_make(_sha(domain, base_text), lambda: _parse_logic(domain, base_text))
        return _with_sentence(base, sentence)

    return _LOGIC.get_or_make(_sha(domain, grammar), make)


def _with_sentence(base: Any, sentence: str) -> Any:
    """A copy of ``base`` whose "task" rule says ``sentence`` instead of the placeholder."""
    tg = _tg()
    logic = copy.copy(base)
    grammar = _fast_grammar_class()()
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


class _Param:
    __slots__ = ("name", "type_name")

    def __init__(self, name: str, type_name: str) -> None:
        self.name, self.type_name = name, type_name


class _ActionSchema:
    """What the engine reads of a translated action: its typed parameters."""

    __slots__ = ("name", "parameters")

    def __init__(self, name: str, parameters: list[_Param]) -> None:
        self.name, self.parameters = name, parameters


class _Translation:
    """The PDDL -> SAS translation of one (domain, problem), reduced to what the engine reads.

    Built by fast-downward's translator (the non-optimized translation used for play), or read
    back from the disk cache. The "optimized" translation used only by the planner (replan) is
    made on demand.
    """

    def __init__(self, domain: str, problem: str, record: dict[str, Any]) -> None:
        self.domain, self.problem = domain, problem
        self.sas_bytes: bytes = record["sas"].encode("utf-8")
        self.types: list[tuple[str, list[str]]] = [(n, list(st)) for n, st in record["types"]]
        self.name2type: dict[str, str] = dict(record["objects"])
        self.actions = {n: _ActionSchema(n, [_Param(pn, pt) for pn, pt in params]) for n, params in record["actions"].items()}
        self.dynamic_predicates = set(record["dynamic"])
        self._init = record["init"]
        self.init_facts: list[Any] | None = None
        self.state_facts: list[Any] | None = None
        self._replan: bytes | None = None

    @staticmethod
    def translate(domain: str, problem: str) -> dict[str, Any]:
        import fast_downward

        with _Argv():
            task, sas = fast_downward.pddl2sas(domain, problem, verbose=False)
        name2type = {o.name: o.type_name for o in task.objects}
        init = []
        for atom in task.init:  # what PddlState's _atom2proposition keeps, in the same order
            if isinstance(atom, fast_downward.translate.pddl.conditions.Atom):
                if atom.predicate == "=":
                    continue
                init.append([atom.predicate, [[a, name2type[a]] for a in atom.args]])
            elif isinstance(atom, fast_downward.translate.pddl.f_expression.Assign):
                if atom.fluent.symbol == "total-cost":
                    continue
                name = "{}".format(atom.expression.value)
                if str.isdigit(name):
                    continue
                init.append([name, [[a, name2type[a]] for a in atom.fluent.args]])
        return {
            "sas": sas,
            "types": [[t.name, list(t.supertype_names)] for t in task.types],
            "objects": sorted(name2type.items()),
            "actions": {a.name: [[p.name, p.type_name] for p in a.parameters] for a in task.actions},
            "dynamic": sorted({eff.literal.predicate.lower() for a in task.actions for eff in a.effects}),
            "init": init,
        }

    def initial_facts(self) -> list[Any]:
        if self.init_facts is None:
            from textworld.logic import Proposition, Variable

            self.init_facts = [Proposition(n, [Variable(a, t) for a, t in args]) for n, args in self._init]
        return self.init_facts

    def replan_sas(self) -> bytes:
        if self._replan is None:
            import fast_downward

            with _Argv():
                _, sas = fast_downward.pddl2sas(self.domain, self.problem, verbose=False, optimize=True)
            self._replan = sas.encode("utf-8")
        return self._replan


_DISK_FORMAT = "1"


def _disk_cache_dir() -> Any:
    """Folder of the on-disk translation cache, or None when ``PROGPO_ALFWORLD_SAS_CACHE=0``."""
    import os

    if os.environ.get("PROGPO_ALFWORLD_SAS_CACHE", "1") in ("0", "false", "no", ""):
        return None
    from progpo_envs.alfworld.embedded import cache_root

    return cache_root() / "alfworld-sas"


def _translation(domain: str, problem: str) -> _Translation:
    def make() -> _Translation:
        import gzip
        import os
        import tempfile
        from importlib.metadata import PackageNotFoundError, version

        try:
            fd_version = version("fast-downward-textworld")
        except PackageNotFoundError:
            fd_version = "?"
        folder = _disk_cache_dir()
        path = None if folder is None else folder / f"{_sha(_DISK_FORMAT, fd_version, domain, problem)}.json.gz"
        if path is not None and path.is_file():
            try:
                return _Translation(domain, problem, json.loads(gzip.decompress(path.read_bytes())))
            except (OSError, ValueError, KeyError):
                pass  # unreadable entry: translate again and overwrite it
        record = _Translation.translate(domain, problem)
        if path is not None:
            try:
                folder.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
                with os.fdopen(fd, "wb") as f:
                    f.write(gzip.compress(json.dumps(record).encode("utf-8"), compresslevel=6))
                os.replace(tmp, path)
            except OSError:
                pass  # a read-only cache dir only costs speed
        return _Translation(domain, problem, record)

    return _TASKS.get_or_make(_sha(domain, problem), make)


def warm_translation_cache(game_files: "list[str] | tuple[str, ...]") -> int:
    """Translate ``game_files`` into the on-disk cache now (e.g. before starting rollout workers,
    whose first load of each game then skips fast-downward's translator). Returns the count."""
    for path in game_files:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        _translation(data["pddl_domain"], data["pddl_problem"])
    return len(game_files)


def _make_state_class() -> type:
    import fast_downward
    import textworld
    from textworld.envs.pddl import logic as pddl_logic
    from textworld.logic import Action, Placeholder, Variable

    class FastPddlState(pddl_logic.PddlState):
        """``PddlState`` built from a cached translation (same facts, inserted in the same order)."""

        def __init__(self, downward_lib: Any, pddl_problem: str, logic: Any, tr: _Translation,
                     op_table: dict[int, Any]) -> None:
            self._op_table = op_table
            self._facts = defaultdict(set)
            self._vars_by_name = {}
            self._vars_by_type = defaultdict(set)
            self._var_counts = Counter()
            self._logic = logic
            self.downward_lib = downward_lib
            self.pddl_problem = pddl_problem
            self._tr = tr
            self._replan_loaded = False
            self._actions = tr.actions
            for name, supertypes in tr.types:
                try:
                    logic.types.add(textworld.logic.Type(name, supertypes))
                except ValueError:
                    pass
            self.downward_lib.load_sas(tr.sas_bytes)
            self.name2type = tr.name2type
            self.add_facts(tr.initial_facts())
            if tr.state_facts is None:
                atoms = (pddl_logic.Atom * self.downward_lib.get_state_size())()
                self.downward_lib.get_state(atoms)
                facts = [atom.get_fact(self.name2type) for atom in atoms]
                tr.state_facts = [f for f in facts if not f.is_negation]
            self.add_facts(tr.state_facts)

        def all_applicable_actions(self) -> list[Any]:
            """Same actions, same order as the stock method; per-operator parts built once."""
            lib = self.downward_lib
            operators = (fast_downward.Operator * lib.get_applicable_operators_count())()
            lib.get_applicable_operators(operators)
            self._operators = {op.id: op for op in operators}
            table = self._op_table
            logic_actions = self._logic.actions
            actions, seen = [], set()
            for op in operators:
                entry = table.get(op.id)
                if entry is None:
                    op_name = op.name
                    name, *arguments = op_name.split()
                    mapping = {Placeholder(p.name.strip("?"), p.type_name): Variable(arg, p.type_name)
                               for p, arg in zip(self._actions[name].parameters, arguments)}
                    entry = table[op.id] = (op_name, name, mapping)
                op_name, name, mapping = entry
                if op_name in seen:
                    continue
                seen.add(op_name)
                action = Action(name=name, preconditions=[], postconditions=[])
                action.id = op.id
                action.mapping = mapping
                action.command_template = logic_actions[name].template
                action.feedback_rule = logic_actions[name].feedback_rule
                action.op_name = op_name
                actions.append(action)
            return actions

        def replan(self, infos: Any) -> Any:
            if not self._replan_loaded:  # the planner's translation, made on first use only
                self.downward_lib.load_sas_replan(self._tr.replan_sas())
                self._replan_loaded = True
            return super().replan(infos)

    return FastPddlState


# ---------------------------------------------------------------------------------------------
# fast-downward library: the installed copy for the first engine of a process
# ---------------------------------------------------------------------------------------------
_LIB_LOCK = threading.Lock()
_LIB_POOL: list[Any] = []  # loaded libraries no engine holds right now (never dlclose'd)
_INSTALLED_LIB_LOADED = False


def _load_lib() -> tuple[Any, bool]:
    """(library, pooled): a libdownward handle for one engine of this process.

    fast-downward's plugin registry lives in a GNU-unique static (``RawRegistry::instance``)
    that every copy of ``libdownward.so`` in a process binds to. ``dlclose``-ing one copy and
    ``dlopen``-ing another later runs the static initializers against a registry that points
    into unmapped code: a segfault on the second or third engine of a process (seen with three
    envs created, closed and created again). So handles are never closed: a released handle is
    ``cleanup()``-ed and kept in a process-wide pool for the next engine (``load_sas`` resets it,
    as it does between resets of one stock env). The first handle maps the installed file
    itself (no 33 MB temporary copy); further concurrent engines get the stock private copies.
    """
    global _INSTALLED_LIB_LOADED
    import fast_downward
    from fast_downward import interface

    with _LIB_LOCK:
        if _LIB_POOL:
            return _LIB_POOL.pop(), True
        if not _INSTALLED_LIB_LOADED:
            from unittest import mock

            # Reuse the stock loader (it sets every argtypes/restype) but have it open the
            # installed file instead of its private temporary copy.
            with mock.patch.object(interface, "cdll", _InstalledLoader()):
                lib = fast_downward.load_lib()
            _INSTALLED_LIB_LOADED = True
            return lib, True
    return fast_downward.load_lib(), True


class _InstalledLoader:
    """Stands in for ``ctypes.cdll`` inside ``fast_downward.interface.load_lib``."""

    def LoadLibrary(self, _path: str) -> Any:  # noqa: N802 - ctypes' name
        from ctypes import cdll

        from fast_downward import interface

        return cdll.LoadLibrary(interface.DOWNWARD_LIB_PATH)


def _release_lib(lib: Any, pooled: bool, close_lib: Callable[[Any], None]) -> None:
    """Give a handle back: ``cleanup()`` it and keep it for the next engine (see _load_lib)."""
    if not pooled:
        close_lib(lib)
        return
    try:
        lib.cleanup()
    except Exception:  # noqa: BLE001 - best effort (e.g. at interpreter shutdown)
        return  # a handle whose cleanup failed is not reused
    with _LIB_LOCK:
        _LIB_POOL.append(lib)


# ---------------------------------------------------------------------------------------------
# the engine
# ---------------------------------------------------------------------------------------------
def _make_env_class() -> type:
    import textworld
    from textworld.core import GameState
    from textworld.envs import PddlEnv

    state_cls = _make_state_class()

    class FastPddlEnv(PddlEnv):
        """``PddlEnv`` with cached logic/translation and per-operator command caching."""

        def __init__(self, infos: Any) -> None:
            from fast_downward import interface

            textworld.Environment.__init__(self, infos)
            self.downward_lib, self._pooled_lib = _load_lib()
            self._close_lib = interface.close_lib
            self._commands: dict[str, tuple[str, str]] = {}
            self._static_templates: dict[str, bool] = {}

        def load(self, filename_or_data: Any) -> None:
            if isinstance(filename_or_data, Mapping):
                data, self._game_file = filename_or_data, None
            else:
                with open(filename_or_data, encoding="utf-8") as f:
                    data = json.load(f)
                self._game_file = filename_or_data
            self._game_data = data
            self.walkthrough = data.get("walkthrough", None)
            self._logic = _game_logic(data["pddl_domain"], data["grammar"])
            self._tr = _translation(data["pddl_domain"], data["pddl_problem"])
            self._op_table: dict[int, Any] = {}
            self._pddl_state = state_cls(self.downward_lib, data["pddl_problem"], self._logic, self._tr, self._op_table)
            self._entity_infos = self._get_entity_infos()
            self._commands = {}
            self._static_templates = {}
            self._templates = sorted(set(action.template for action in self._logic.actions.values()))

        def reset(self) -> Any:
            self._pddl_state = state_cls(self.downward_lib, self._game_data["pddl_problem"], self._logic, self._tr, self._op_table)
            self.prev_state = None
            self.state = GameState()
            self._last_action = None
            self._moves = 0
            context = {"state": self._pddl_state, "facts": list(self._pddl_state.facts), "variables": {},
                       "mapping": {}, "entity_infos": self._entity_infos}
            self.state.feedback = self._logic.grammar.derive("#intro#", context)
            self.state.raw = self.state.feedback
            self._gather_infos()
            if "walkthrough" in self.request_infos.extras:
                self.state["extra.walkthrough"] = self.walkthrough or self._pddl_state.replan(self._entity_infos)
            return self.state

        def _is_static(self, action_name: str, template: str) -> bool:
            hit = self._static_templates.get(action_name)
            if hit is None:
                hit = _template_is_static(template, self._tr.dynamic_predicates)
                self._static_templates[action_name] = hit
            return hit

        def _gather_infos(self) -> None:
            st, ps = self.state, self._pddl_state
            st["command_templates"] = self._templates
            st["won"] = ps.check_goal()
            st["lost"] = False
            st["_entity_infos"] = dict(self._entity_infos)
            facts = list(ps.facts)
            st["_facts"] = facts
            if self.request_infos.facts:
                st["facts"] = list(map(self._get_human_readable_fact, facts))
            st["last_action"] = None
            st["_last_action"] = self._last_action
            actions = list(ps.all_applicable_actions())
            st["_valid_actions"] = actions
            mapping = None
            commands = []
            for action in actions:
                key = action.op_name
                hit = self._commands.get(key)
                if hit is None:
                    if mapping is None:
                        mapping = {k: info.name for k, info in self._entity_infos.items()}
                    context = {"state": ps, "facts": facts,
                               "variables": {ph.name: self._entity_infos[var.name] for ph, var in action.mapping.items()},
                               "mapping": action.mapping, "entity_infos": self._entity_infos}
                    template = action.command_template
                    derived = self._logic.grammar.derive(template, context)
                    action.command_template = derived
                    hit = (derived, action.format_command(mapping))
                    if self._is_static(action.name, template):
                        self._commands[key] = hit
                else:
                    action.command_template = hit[0]
                commands.append(hit[1])
            st["_valid_commands"] = commands
            st["admissible_commands"] = sorted(set(commands))
            if self.request_infos.moves:
                st["moves"] = self._moves
            if self.request_infos.policy_commands:
                st["policy_commands"] = ps.replan(self._entity_infos)

        def close(self) -> None:
            if getattr(self, "downward_lib", None) is not None:
                _release_lib(self.downward_lib, self._pooled_lib, self._close_lib)
                self.downward_lib = None

    return FastPddlEnv


def _template_is_static(template: str, dynamic: set[str]) -> bool:
    """True when deriving ``template`` reads no fact that an action can change."""
    tg = _tg()
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


_FAST_ENV: type | None = None


class FastEngine(StockEngine):
    """Drop-in replacement of :class:`~progpo_envs.alfworld.engine.StockEngine` (same transcripts)."""

    def __init__(self) -> None:
        global _FAST_ENV
        require_engine()
        import textworld

        if _FAST_ENV is None:
            _FAST_ENV = _make_env_class()
        self._env = _FAST_ENV(textworld.EnvInfos(admissible_commands=True, won=True))
        self._state = None
        self._loaded = None

    def close(self) -> None:
        super().close()
        self._env.close()
