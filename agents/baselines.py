"""Scripted baseline agents with the batched ``act(observations, infos) -> list[str]`` interface.

* :class:`RandomAgent`: a uniformly random admissible command (seeded).
* :class:`ALFWorldExpertAgent`: replays an expert plan (the game's walkthrough).
* :class:`WebShopOracleAgent`: searches, opens the goal product, clicks the goal options and
  buys it -- the upper bound a policy can reach on a WebShop goal.

They also accept (and ignore) the ``histories`` argument and ``seed`` keyword of
:meth:`agents.policy_base.LLMPolicy.act`, so a trainer or evaluation loop can swap them in.

Example:
    >>> agent = RandomAgent(seed=0)
    >>> agent.act(["obs"], [{"admissible_commands": ["look", "inventory"]}])[0] in ("look", "inventory")
    True
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import numpy as np

from agents.contract import Histories, Infos, Observations, StepOutput
from agents.prompting import admissible_commands

__all__ = [
    "ALFWorldExpertAgent",
    "PASSIVE",
    "RandomAgent",
    "WebShopOracleAgent",
    "expert_plans_from_envs",
    "passive",
    "templated",
]


#: commands that never change an ALFWorld state: the evaluation's random baseline leaves them out
PASSIVE = ("look", "inventory", "examine ", "help")


def templated(command: str) -> bool:
    """A command with a slot to fill (WebShop's ``search[<query>]``): no command as it stands."""
    return "<" in command


def passive(command: str) -> bool:
    """A command that never changes an ALFWorld state (:data:`PASSIVE`)."""
    return command.startswith(PASSIVE)


class RandomAgent:
    """A uniformly random admissible command per observation (seeded): the floor a trained
    policy is read against.

    Args:
        seed: seeds the draws (``act(..., seed=)`` seeds them again).
        fallback: the answer where no command is admissible.
        leave_out: commands not drawn while another is admissible (default :func:`templated`;
            the evaluation's random baseline: :func:`passive`).
        step_outputs: answer :class:`agents.contract.StepOutput` objects (a rollout's policy
            interface) instead of strings.
    """

    def __init__(
        self,
        seed: int | None = 0,
        fallback: str = "look",
        leave_out: Callable[[str], bool] = templated,
        step_outputs: bool = False,
    ) -> None:
        self.rng = np.random.default_rng(seed)
        self.fallback, self.leave_out, self.step_outputs = fallback, leave_out, step_outputs

    def act(
        self, observations: Observations, infos: Infos, histories: Histories = None, *, seed: int | None = None
    ) -> list[Any]:

        if seed is not None:
            self.rng = np.random.default_rng(seed)
        out: list[Any] = []
        for info in infos:
            cmds = admissible_commands(info)
            cmds = [c for c in cmds if not self.leave_out(c)] or cmds
            action = str(cmds[int(self.rng.integers(len(cmds)))]) if cmds else self.fallback
            out.append(StepOutput(action=action) if self.step_outputs else action)
        return out


def expert_plans_from_envs(envs: Sequence[Any]) -> list[list[str]]:
    """``env.unwrapped.expert_plan()`` of each env (an empty plan where it returns ``None``)."""
    plans = []
    for env in envs:
        fn: Callable[[], Any] | None = getattr(getattr(env, "unwrapped", env), "expert_plan", None)
        if fn is None:
            raise TypeError(f"{type(env).__name__} has no expert_plan(); pass plans to ALFWorldExpertAgent.reset")
        plans.append(list(fn() or []))
    return plans


class ALFWorldExpertAgent:
    """Replays one expert plan per env, indexed by ``info["step"]``.

    Plans come from :meth:`reset` (e.g. ``agent.reset(expert_plans_from_envs(envs))`` right
    after the envs reset), from the constructor, or from ``info["expert_plan"]`` /
    ``info["walkthrough"]`` when the env puts one there. Past the end of its plan (or without
    one) the agent sends ``fallback``.

    Example:
        >>> agent = ALFWorldExpertAgent([["go to desk 1", "take mug 1 from desk 1"]])
        >>> agent.act(["..."], [{"step": 1}])
        ['take mug 1 from desk 1']
    """

    def __init__(self, plans: Sequence[Sequence[str]] | None = None, fallback: str = "look") -> None:
        self.fallback = fallback
        self.plans: list[list[str]] = [list(p) for p in plans] if plans is not None else []
        self._cursor: list[int] = [0] * len(self.plans)

    def reset(self, plans: Sequence[Sequence[str] | None]) -> None:
        """Set the plans for a new batch of episodes (one per env)."""
        self.plans = [list(p or []) for p in plans]
        self._cursor = [0] * len(self.plans)

    def act(
        self, observations: Observations, infos: Infos, histories: Histories = None, *, seed: int | None = None
    ) -> list[str]:
        out = []
        for i, info in enumerate(infos):
            plan = info.get("expert_plan") or info.get("walkthrough")
            if plan is None and i < len(self.plans):
                plan = self.plans[i]
            plan = list(plan or [])
            if "step" in info and info["step"] is not None:
                k = int(info["step"])
            else:
                while len(self._cursor) <= i:
                    self._cursor.append(0)
                k = self._cursor[i]
                self._cursor[i] += 1
            out.append(plan[k] if 0 <= k < len(plan) else self.fallback)
        return out


_BRACKETS = re.compile(r"[\[\]]")


def _norm(s: Any) -> str:
    return " ".join(str(s).lower().replace("/", " | ").split())


class WebShopOracleAgent:
    """Buys the goal product with the goal options, from ``info["goal"]``.

    Uses ``goal["asin"]``, ``goal["goal_options"]`` (a dict name -> value or a list of
    values), ``goal["query"]`` (else the instruction) and the env's ``admissible_commands`` /
    ``page``. Per page: search -> ``search[query]``; results -> ``click[asin]`` when listed,
    else ``click[next >]`` (at most ``max_pages``), else a search with the instruction; item ->
    each goal option not yet chosen, then ``click[buy now]``; sub-page -> ``click[< prev]``.

    Example:
        >>> agent = WebShopOracleAgent()
        >>> info = {"page": "search", "admissible_commands": ["search[<query>]"], "step": 0,
        ...         "goal": {"asin": "B01", "goal_options": {"color": "red"}, "query": "red shoes"}}
        >>> agent.act(["..."], [info])
        ['search[red shoes]']
    """

    def __init__(self, max_pages: int = 5) -> None:
        self.max_pages = max_pages
        self._state: dict[int, dict[str, Any]] = {}

    def reset(self) -> None:
        """Forget per-env progress (also done automatically when ``info["step"] == 0``)."""
        self._state.clear()

    @staticmethod
    def _options(goal: dict[str, Any]) -> list[str]:
        opts = goal.get("goal_options") or []
        values = opts.values() if isinstance(opts, dict) else opts
        return [_norm(v) for v in values if str(v).strip()]

    def _one(self, i: int, info: dict[str, Any]) -> str:
        goal = info.get("goal")
        if not isinstance(goal, dict) or not goal.get("asin"):
            raise ValueError("WebShopOracleAgent needs info['goal'] as a dict with 'asin' and 'goal_options'")
        st = self._state.get(i)
        if st is None or int(info.get("step", -1) or 0) == 0 or st.get("asin") != goal["asin"]:
            st = self._state[i] = {"asin": goal["asin"], "chosen": [], "pages": 0, "searches": 0}
        cmds = [_norm(c) for c in admissible_commands(info)]
        asin = _norm(goal["asin"])
        page = str(info.get("page", ""))
        has_search = any(c.startswith("search[") for c in cmds)
        if f"click[{asin}]" in cmds:
            st["pages"] = 0
            return f"click[{asin}]"
        if "click[buy now]" in cmds:  # item page
            for opt in self._options(goal):
                if opt not in st["chosen"] and f"click[{opt}]" in cmds:
                    st["chosen"].append(opt)
                    return f"click[{opt}]"
            return "click[buy now]"
        if page == "results" or "click[next >]" in cmds:
            if st["pages"] < self.max_pages and "click[next >]" in cmds:
                st["pages"] += 1
                return "click[next >]"
            if "click[back to search]" in cmds:
                st["pages"] = self.max_pages + 1
                return "click[back to search]"
        if has_search:
            st["searches"] += 1
            st["pages"] = 0
            text = goal.get("query") if st["searches"] == 1 else None
            text = text or goal.get("instruction_text") or goal.get("instruction") or goal.get("name") or ""
            query = _norm(_BRACKETS.sub(" ", str(text)))
            return f"search[{query}]"
        if "click[< prev]" in cmds:
            return "click[< prev]"
        if "click[back to search]" in cmds:
            return "click[back to search]"
        return cmds[0] if cmds else "click[back to search]"

    def act(
        self, observations: Observations, infos: Infos, histories: Histories = None, *, seed: int | None = None
    ) -> list[str]:
        return [self._one(i, dict(info)) for i, info in enumerate(infos)]
