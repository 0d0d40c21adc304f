"""State and applicable actions of the fast path: ``PddlState`` built from a cached translation.

:class:`FastPddlState` mirrors textworld 1.7.0's ``textworld.envs.pddl.logic.PddlState``: the
same facts inserted in the same order (from :class:`~progpo_envs.alfworld.fast.translation.Translation`
instead of a fresh translation), and the same applicable actions in the same order, with the
per-operator part (name, argument mapping) built once per game in ``op_table``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import fast_downward
import textworld
from textworld.envs.pddl import logic as pddl_logic
from textworld.logic import Action, Placeholder, Variable

from progpo_envs.alfworld.fast.translation import Translation

__all__ = ["FastPddlState"]


class FastPddlState(pddl_logic.PddlState):
    """``PddlState`` built from a cached translation (same facts, inserted in the same order)."""

    def __init__(
        self, downward_lib: Any, pddl_problem: str, logic: Any, tr: Translation, op_table: dict[int, Any]
    ) -> None:
        # textworld 1.7.0 PddlState.__init__, minus the translation (tr holds it)
        self._op_table = op_table
        self._facts: defaultdict[str, set[Any]] = defaultdict(set)
        self._vars_by_name: dict[str, Any] = {}
        self._vars_by_type: defaultdict[str, set[Any]] = defaultdict(set)
        self._var_counts: Counter[str] = Counter()
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
        """Same actions, same order as textworld 1.7.0 ``PddlState.all_applicable_actions``;
        per-operator parts built once."""
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
                mapping = {
                    Placeholder(p.name.strip("?"), p.type_name): Variable(arg, p.type_name)
                    for p, arg in zip(self._actions[name].parameters, arguments)
                }
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
