"""``ProGPO-WebShop-v0``: the WebShop benchmark as a Gymnasium env, text or real browser.

Example:
    >>> import gymnasium as gym
    >>> import progpo_envs  # registers the ids
    >>> env = gym.make("ProGPO-WebShop-v0", num_products=200)
    >>> obs, info = env.reset(seed=0)
    >>> obs.startswith("WebShop [SEP] Instruction: [SEP] ")
    True
    >>> info["admissible_commands"], info["page"]
    (['search[<query>]'], 'search')
    >>> obs, reward, terminated, truncated, info = env.step("search[" + info["goal"]["query"] + "]")
    >>> info["page"], info["valid_action"], reward, terminated
    ('results', True, 0.0, False)
    >>> env.step("look")[4]["valid_action"]
    False
    >>> env.close()

Observation: the original ``text`` mode observation (the page's visible text joined with
``" [SEP] "``; see :mod:`progpo_envs.webshop.pages`). Action: ``search[<query>]`` or
``click[<clickable>]`` (grammar in :mod:`progpo_envs.webshop.shop`). Reward: the WebShop
score in [0, 1] on ``click[buy now]`` (the episode terminates), else 0. The episode is
truncated after ``max_episode_steps`` steps (15 by default, as GRPO/GiGPO train). Through
``gym.make`` the limit is the spec's (registered: 15) or ``gym.make(..., max_episode_steps=N)``
(applied by Gymnasium's ``TimeLimit``; the env adds no limit of its own then).

``reset(seed=s)`` draws the goal uniformly from the split with the env's seeded RNG (the same
seed always gives the same goal); ``reset(options={"goal_index": i})`` (or ``"task_id"``)
picks goal ``i`` of the catalog's goal list (test split = goals 0-499, train = 500 on).
``goal_index`` takes an integer only; ``task_id`` also takes its decimal string (``"2226"``),
the form in which cross-env records and dataset columns keep task ids.

``info`` keys (every step):

* ``admissible_commands``: ``["search[<query>]"]`` when the page has a search bar, plus
  ``click[x]`` for each clickable ``x`` (``click[search]`` is never valid, as in WebShop).
* ``available_actions``: ``{"has_search_bar": bool, "clickables": [...]}`` (the original's).
* ``task_id`` (goal index), ``task_type`` (the goal's category), ``instruction`` (text),
  ``goal``: ``{asin, instruction_text, attributes, goal_options, price_upper, query,
  category}`` -- enough for a scripted oracle to buy the right product with the right options.
* ``won`` (score == 1.0), ``valid_action``, ``step``, ``page`` (search / results / item /
  sub-page / done), ``state`` (page, query, page_num, asin, options, sub_page: what
  :func:`~progpo_envs.webshop.canonical.canonicalize_webshop` reads), ``outcome`` (the score
  once purchased, else 0.0), ``score_breakdown`` (after a purchase), ``mode``.
* Browser mode adds ``url`` and, when the browser had to be restarted on reset,
  ``browser_restarted: True``; a browser failure during a step truncates the episode with
  ``browser_error`` set.
"""

from __future__ import annotations

import copy
import re
import string
from typing import Any, Mapping, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from progpo_envs.webshop.browser_mode import BrowserBackend
from progpo_envs.webshop.shop import MAX_ACTION_CHARS, Shop, ShopSession, get_shop

MAX_OBSERVATION_CHARS = 1_000_000
DEFAULT_MAX_EPISODE_STEPS = 15
SEARCH_PLACEHOLDER = "search[<query>]"
GOAL_KEYS = ("asin", "instruction_text", "attributes", "goal_options", "price_upper", "query", "category")


class UnicodeText(spaces.Text):
    """A :class:`gymnasium.spaces.Text` that contains any string up to ``max_length``.

    Samples come from ``charset`` (printable ASCII by default) but membership accepts every
    Unicode character, since product text and agent actions are not restricted to a charset.

    >>> UnicodeText(20).contains("naïve [SEP] ✓"), UnicodeText(3).contains("long")
    (True, False)
    """

    def __init__(self, max_length: int, *, min_length: int = 0, charset: str = string.printable, seed: Any = None):
        super().__init__(max_length, min_length=min_length, charset=charset, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, UnicodeText) and super().__eq__(other)


class WebShopEnv(gym.Env[str, str]):
    """WebShop as a Gymnasium env (see the module docstring for spaces, reward and info).

    Args:
        data_dir: folder with the original WebShop files (``items_shuffle*.json``,
            ``items_ins_v2*.json``); ``None`` uses ``$WEBSHOP_DATA`` or the embedded catalog.
        split: ``"train"`` (goals 500 on), ``"test"`` (goals 0-499) or ``"all"``.
        mode: ``"text"`` (in-process) or ``"browser"`` (local HTTP server + headless Chromium).
        max_episode_steps: truncation limit; ``None`` (default): 15 when the env is built
            directly, none of its own under ``gym.make`` (whose ``TimeLimit`` applies the spec's
            or the caller's ``max_episode_steps``).
        num_products: catalog size (1,000 by default, as the published results use).
        seed: catalog seed (embedded catalog, price draws, price caps).
        goal_index: always play this goal (overrides the seed draw).
        human_goals: use ``items_human_ins.json`` goals (needs ``data_dir``).
        index_cache_dir: keep the search index on disk here between processes.
        shop: use this :class:`~progpo_envs.webshop.shop.Shop` (catalog + index); by default
            envs with the same loader arguments share one (:func:`~progpo_envs.webshop.shop.get_shop`).
        render_mode: ``"ansi"`` returns the observation from :meth:`render`.
        privileged_info: add ``info["privileged_text"]`` to every reset (the target product's
            title and options), for a teacher that may read the answer (``--distill
            privileged``). Off by default: an agent must never see it.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4, "step_timeout": 60.0}  # GroupVectorEnv step_timeout="auto"

    def __init__(
        self,
        data_dir: str | None = None,
        split: str = "train",
        mode: str = "text",
        max_episode_steps: int | None = None,
        num_products: int | None = 1000,
        seed: int = 0,
        goal_index: int | None = None,
        human_goals: bool = False,
        index_cache_dir: str | None = None,
        shop: Shop | None = None,
        render_mode: str | None = None,
        privileged_info: bool = False,
    ):
        if mode not in ("text", "browser"):
            raise ValueError(f"mode must be 'text' or 'browser', got {mode!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if max_episode_steps is not None and int(max_episode_steps) < 1:
            raise ValueError("max_episode_steps must be >= 1")
        if shop is None:
            shop = get_shop(
                data_dir, num_products=num_products, seed=seed, human_goals=human_goals, index_cache_dir=index_cache_dir
            )
        self.shop = shop
        self.split = split
        self.split_goals = shop.catalog.split(split)
        if not self.split_goals:
            raise ValueError(
                f"split {split!r} has no goals in this catalog ({len(shop.goals)} goals; test = "
                f"goals 0-499, train = 500 on): use a larger num_products or another split"
            )
        self.mode = mode
        self._max_steps_arg = None if max_episode_steps is None else int(max_episode_steps)
        self.fixed_goal_index = None if goal_index is None else self._check_goal_index(goal_index)
        self.render_mode = render_mode
        self.privileged_info = bool(privileged_info)
        self.observation_space = UnicodeText(MAX_OBSERVATION_CHARS)
        self.action_space = UnicodeText(MAX_ACTION_CHARS)

        self._session: ShopSession | None = None
        self._goal_index = -1
        self._steps = 0
        self._obs = ""
        self._done = False
        self._truncated = False
        self._score: float | None = None
        self._breakdown: dict[str, Any] | None = None
        self._browser_backend: Any = None
        if mode == "browser":
            self._browser_backend = BrowserBackend(shop)

    # --- helpers -------------------------------------------------------------------------

    @property
    def max_episode_steps(self) -> int | None:
        """The env's own truncation limit (``None`` under ``gym.make``: its ``TimeLimit`` truncates,
        and :class:`EpisodeOver` keeps the truncated episode over)."""
        if self._max_steps_arg is not None:
            return self._max_steps_arg
        return None if self.spec is not None else DEFAULT_MAX_EPISODE_STEPS

    def _check_goal_index(self, index: Any, key: str = "goal_index") -> int:
        # an integer only: int() would play goal 3 for 3.7, goal 1 for True and goal 5 for " 5"
        if key == "task_id" and isinstance(index, str) and re.fullmatch(r"0|[1-9][0-9]*", index):
            index = int(index)  # the exact string of an id: str(info["task_id"])
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
            what = "an integer or its decimal string" if key == "task_id" else "an integer"
            raise ValueError(f"{key} must be {what}, got {index!r} ({type(index).__name__})")
        i = int(index)
        if not 0 <= i < len(self.shop.goals):
            raise ValueError(f"goal_index {i} out of range: this catalog has {len(self.shop.goals)} goals")
        return i

    def _goal_info(self) -> dict[str, Any]:
        goal = self.shop.goals[self._goal_index]
        return copy.deepcopy({k: goal.get(k) for k in GOAL_KEYS})

    def _text_session(self) -> ShopSession:
        """The text mode's session, which reset() opens."""
        if self._session is None:
            raise RuntimeError("WebShop env: call reset() before step()")
        return self._session

    def _info(self, valid: bool) -> dict[str, Any]:
        backend = self._browser_backend
        if backend is not None:
            state, clickables, has_bar = backend.state, backend.clickables, backend.has_search_bar
        else:
            view = self._text_session().view()
            state, clickables, has_bar = view.state, view.clickables(), view.has_search_bar
        commands = [SEARCH_PLACEHOLDER] if has_bar else []
        commands += [f"click[{c}]" for c in clickables if c != "search"]
        goal = self.shop.goals[self._goal_index]
        score = self._score
        info: dict[str, Any] = {
            "admissible_commands": commands,
            "available_actions": {"has_search_bar": has_bar, "clickables": list(clickables)},
            "task_id": self._goal_index,
            "task_type": goal.get("category"),
            "instruction": goal.get("instruction_text", ""),
            "goal": self._goal_info(),
            "won": bool(score is not None and score >= 1.0),
            "valid_action": bool(valid),
            "step": self._steps,
            "page": state.kind,
            "state": state.to_dict(),
            "outcome": float(score) if score is not None else 0.0,
            "mode": self.mode,
        }
        if self._breakdown is not None:
            info["score_breakdown"] = dict(self._breakdown)
        if backend is not None:
            info["url"] = backend.url
        return info

    # --- Gymnasium API -------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        key = "goal_index" if options.get("goal_index") is not None else "task_id"
        index = options.get(key)
        if index is not None:
            self._goal_index = self._check_goal_index(index, key)
        elif self.fixed_goal_index is not None:
            self._goal_index = self.fixed_goal_index
        else:
            self._goal_index = int(self.split_goals[int(self.np_random.integers(len(self.split_goals)))])
        self._steps = 0
        self._done = False
        self._truncated = False
        self._score = None
        self._breakdown = None
        goal = self.shop.goals[self._goal_index]
        extra: dict[str, Any] = {}
        if self._browser_backend is not None:
            self._obs, extra = self._browser_backend.reset(goal)
        else:
            self._session = ShopSession(self.shop, goal)
            self._obs = self._session.view().observation()
        info = self._info(True)
        info.update(extra)
        if self.privileged_info:
            info["privileged_text"] = self._privileged_text(goal)
        return self._obs, info

    def _privileged_text(self, goal: Mapping[str, Any]) -> str:
        """The answer a teacher may read (``privileged_info=True``): the target product's title and options."""
        product = self.shop.by_asin.get(str(goal.get("asin", "")), {})
        options = goal.get("goal_options") or []
        pairs = (f"{k}: {v}" for k, v in options.items()) if isinstance(options, Mapping) else map(str, options)
        opts = ", ".join(pairs)
        return f"Target product: {product.get('Title', '')}. Options: {opts or 'none'}."

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._goal_index < 0:
            raise gym.error.ResetNeeded("call reset() before step()")
        if self._done:  # over (a purchase or the step limit): nothing is played, nothing is paid
            info = self._info(False)
            return self._obs, 0.0, not self._truncated, self._truncated, info
        self._steps += 1
        extra: dict[str, Any] = {}
        if self._browser_backend is not None:
            result, self._obs, extra = self._browser_backend.step(action)
        else:
            session = self._text_session()
            result = session.step(action)
            self._obs = session.view().observation() if result.valid else self._obs
        terminated = bool(result.done)
        reward = float(result.reward) if terminated else 0.0
        if terminated:
            self._done = True
            self._score = reward
            self._breakdown = dict(result.breakdown or {})
        limit = self.max_episode_steps
        truncated = (not terminated) and (
            (limit is not None and self._steps >= limit) or bool(extra.get("browser_error"))
        )
        if truncated:
            self._done, self._truncated = True, True
        info = self._info(result.valid)
        info.update(extra)
        return self._obs, reward, terminated, truncated, info

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._obs
        return None

    def close(self) -> None:
        if self._browser_backend is not None:
            self._browser_backend.close()
        super().close()


class EpisodeOver(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Once a step ends the episode (terminated, or truncated by an outer ``TimeLimit``), later
    steps until ``reset`` play nothing and pay nothing: they repeat the last observation with
    reward 0, the same end flags and ``valid_action=False``. ``gym.make("ProGPO-WebShop-v0")``
    applies it outside its ``TimeLimit``, which truncates without telling the env (so a purchase
    one step late would otherwise still be paid).
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        self._last: tuple[Any, bool, bool, dict[str, Any]] | None = None

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._last = None
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._last is not None:
            obs, terminated, truncated, info = self._last
            return obs, 0.0, terminated, truncated, {**copy.deepcopy(info), "valid_action": False}
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            self._last = (obs, bool(terminated), bool(truncated), copy.deepcopy(info))
        return obs, reward, terminated, truncated, info


__all__ = ["EpisodeOver", "WebShopEnv", "UnicodeText", "SEARCH_PLACEHOLDER", "GOAL_KEYS"]
