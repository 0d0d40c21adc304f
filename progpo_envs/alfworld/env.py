"""``ProGPO-ALFWorld-v0``: the real ALFWorld text engine as a Gymnasium environment.

The engine is ALFWorld's own: the game's PDDL domain and twl2 grammar played by TextWorld's PDDL
backend (fast-downward), object names demangled as ALFWorld shows them ("cabinet 3"). Each game
is played with the grammar it embeds, so the real ``json_2.1.1`` games (old "put X in/on Y"
grammar) and the wheel's newer "move X to Y" games both work.

Example (needs the ``alfworld`` extra; runs offline on the embedded games)::

    >>> import gymnasium as gym, progpo_envs                       # doctest: +SKIP
    >>> env = gym.make("ProGPO-ALFWorld-v0")                       # doctest: +SKIP
    >>> obs, info = env.reset(seed=0)                              # doctest: +SKIP
    >>> info["goal"], info["admissible_commands"][:2]              # doctest: +SKIP
    ('put a clean mug in coffeemachine.', ['go to cabinet 1', 'go to cabinet 2'])
    >>> obs, r, terminated, truncated, info = env.step("go to cabinet 1")  # doctest: +SKIP

``info`` keys: ``admissible_commands`` (list[str], sorted as the engine lists them), ``task_id``
(``<task_folder>/<trial_folder>``), ``task_type`` (one of the six), ``goal`` (the
"Your task is to: ..." sentence), ``won``, ``valid_action`` (the command was admissible),
``step`` (steps taken this episode), ``outcome`` (1.0 once won else 0.0).

Reward 1.0 on the step that wins, else 0.0; ``terminated`` once won; ``truncated`` at
``max_episode_steps`` (50 when built directly; through ``gym.make`` the registered 50 or
``gym.make(..., max_episode_steps=N)``, applied by Gymnasium's ``TimeLimit``: the env then adds no
limit of its own). A command that is not admissible (empty, 1 MB, non-ASCII, unknown) gets the
engine's "Nothing happens." with ``valid_action=False``, reward 0, and the episode goes on.

Game sources: ``data_dir`` (or ``$ALFWORLD_DATA``) in the original layout, with ``split`` one of
its folders (``train``, ``valid_seen``, ``valid_unseen``); with neither, the embedded generated
set with ``split`` in ``train`` / ``valid`` / ``hard`` / ``easy-train`` / ``easy-valid``
(``difficulty="hard"`` is the same as ``split="hard"``; ``difficulty="easy"`` picks ``easy-train``,
or ``easy-valid`` with ``split="valid"``). ``easy`` games are small rooms (at most 8 receptacles,
one instance per object class, targets never inside closed receptacles) on the same disjoint
train / held-out floor plans as ``train`` / ``valid``: the CPU learning demo trains on
``easy-train`` and evaluates on ``easy-valid``.

Engine: ``fast=True`` (default) plays through :mod:`progpo_envs.alfworld.fast`, which caches the
grammar parse, the PDDL->SAS translation (also on disk, under ``$PROGPO_CACHE_DIR``; set
``PROGPO_ALFWORLD_SAS_CACHE=0`` to disable) and the command text of each operator, with
transcripts identical to the stock engine (``python -m progpo_envs.alfworld.identity`` checks every
game); ``fast=False`` is the stock TextWorld engine. Use processes, not threads, for parallel envs
(fast-downward's translator swaps ``sys.argv``/``sys.stdout``). Python 3.13: textworld's stock
``EvalSymbol.derive`` relies on the pre-3.13 ``locals()`` behaviour and raises ``NameError``;
both engines evaluate grammar expressions with explicit variables there
(:func:`progpo_envs.alfworld.engine.eval_expression`); CI runs the fast suite on 3.11 and 3.13.
"""

from __future__ import annotations

import os
import string
from typing import Any, SupportsFloat

import gymnasium as gym
from gymnasium import spaces

from progpo_envs.alfworld import text as patterns
from progpo_envs.alfworld.embedded import embedded_root
from progpo_envs.alfworld.engine import StockEngine
from progpo_envs.alfworld.expert import ExpertError, HandcodedExpert, solve
from progpo_envs.alfworld.games import ALFWorldDataError, GameRecord, check_split, discover_games, resolve_data_dir
from progpo_envs.alfworld.install import require_engine
from progpo_envs.alfworld.tasks import TaskSpec

#: every character the engine prints (ASCII) plus Latin-1 and typographic punctuation that
#: human-written task sentences may contain.
CHARSET = (
    string.ascii_letters
    + string.digits
    + string.punctuation
    + " \n\t"
    + "".join(chr(c) for c in range(0xA0, 0x100))
    + "\u2018\u2019\u201c\u201d\u2013\u2014\u2026"
)
MAX_OBS_CHARS = 1 << 16
MAX_ACTION_CHARS = 1 << 12


def make_engine(fast: bool) -> StockEngine:
    """The engine for ``fast`` (the cached fast path) or the stock one (one clear error without
    the ``alfworld`` extra)."""
    require_engine()
    if fast:
        from progpo_envs.alfworld.fast import FastEngine  # needs the alfworld extra: imported on use

        return FastEngine()
    return StockEngine()


def _as_text(action: Any) -> str:
    if isinstance(action, str):
        return action
    if isinstance(action, (bytes, bytearray)):
        return bytes(action).decode("utf-8", errors="replace")
    return str(action)


class ALFWorldEnv(gym.Env[str, str]):
    """ALFWorld over the real TextWorld PDDL engine (see the module docstring).

    ``privileged_info=True`` adds ``info["privileged_text"]`` to every reset: the expert's plan of
    the game (its stored walkthrough, else the handcoded expert's), for a teacher that may read
    what the agent cannot (``--distill privileged``). Off by default: an agent must never see it.
    """

    metadata = {
        "render_modes": ["ansi", "human"],
        "render_fps": 4,
        "step_timeout": 120.0,
    }  # stock planner steps: up to ~93 s

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        split: str = "train",
        max_episode_steps: int = 50,
        task_id: str | None = None,
        fast: bool = True,
        difficulty: str | None = None,
        task_types: list[str] | tuple[str, ...] | None = None,
        render_mode: str | None = None,
        privileged_info: bool = False,
    ) -> None:
        self.privileged_info = bool(privileged_info)
        if max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1, got {max_episode_steps}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None")
        json_dir = resolve_data_dir(data_dir)
        if difficulty is not None:
            if difficulty not in ("easy", "normal", "hard"):
                raise ValueError(f"difficulty must be 'easy', 'normal' or 'hard', got {difficulty!r}")
            if json_dir is not None:
                raise ValueError("difficulty= selects a split of the embedded games; with a data_dir use split=")
            if difficulty == "hard":
                split = "hard"
            elif difficulty == "easy":
                split = split if split.startswith("easy-") else f"easy-{'valid' if split == 'valid' else 'train'}"
        if json_dir is None:
            check_split(split)
            json_dir = embedded_root() / "json_2.1.1"
        games = discover_games(json_dir, split)
        if task_types is not None:
            games = [g for g in games if g.task_type in set(task_types)]
            if not games:
                raise ALFWorldDataError(f"no game of task types {list(task_types)} in split {split!r} at {json_dir}")
        self.data_dir = json_dir
        self.split = split
        self.max_episode_steps = int(max_episode_steps)
        self.fast = bool(fast)
        self.render_mode = render_mode
        self._games: dict[str, GameRecord] = {g.task_id: g for g in games}
        self._order: list[str] = [g.task_id for g in games]
        self._fixed_task = None if task_id is None else self._record(task_id).task_id
        self.observation_space = spaces.Text(max_length=MAX_OBS_CHARS, min_length=0, charset=CHARSET)
        self.action_space = spaces.Text(max_length=MAX_ACTION_CHARS, min_length=0, charset=CHARSET)
        self._engine: Any = None
        self._loaded: str | None = None
        self._game: GameRecord | None = None
        self._goal = ""
        self._obs = ""
        self._steps = 0
        self._won = False
        self._history: list[str] = []
        self._expert: Any = None
        self._plans: dict[str, list[str] | None] = {}

    # -- public helpers -------------------------------------------------------------------------
    @property
    def task_ids(self) -> list[str]:
        """Task ids of this split, in the order seeds index them."""
        return list(self._order)

    def _record(self, task_id: str) -> GameRecord:
        rec = self._games.get(task_id)
        if rec is None:
            sample = ", ".join(self._order[:3])
            raise ALFWorldDataError(
                f"unknown ALFWorld task_id {task_id!r} in split {self.split!r} at {self.data_dir} "
                f"({len(self._order)} games, e.g. {sample}); see env.unwrapped.task_ids"
            )
        return rec

    # -- Gymnasium API --------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        task_id = options.get("task_id") or self._fixed_task
        if task_id is None:
            task_id = self._order[int(self.np_random.integers(len(self._order)))]
        rec = self._record(str(task_id))
        if self._engine is None:
            self._engine = make_engine(self.fast)
        if self._loaded != str(rec.path):
            self._loaded = None
            try:
                self._engine.load(str(rec.path))
            except Exception as exc:  # a corrupt game file fails deep inside TatSu / fast-downward
                raise ALFWorldDataError(
                    f"cannot load ALFWorld game {rec.path}: {type(exc).__name__}: {exc}. The file must be a "
                    "game.tw-pddl JSON with pddl_domain, grammar and pddl_problem (regenerate or re-download it)."
                ) from exc
            self._loaded = str(rec.path)
        self._game = rec
        self._obs = self._engine.reset()
        m = patterns.GOAL.search(self._obs)
        self._goal = m.group(1).strip() if m else ""
        self._steps = 0
        self._won = bool(self._engine.won)
        self._history = []
        self._expert = None
        info = self._info(valid=True)
        if self.privileged_info:
            plan = self.expert_plan()
            info["privileged_text"] = ("Expert plan: " + "; ".join(plan) + ".") if plan else ""
        return self._obs, info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._game is None:
            raise RuntimeError("ALFWorldEnv.step() called before reset()")
        command = _as_text(action)
        was_won = self._won
        self._obs, valid = self._engine.step(command)
        self._history.append(command)
        self._steps += 1
        self._won = bool(self._engine.won)
        reward = 1.0 if (self._won and not was_won) else 0.0
        terminated = self._won
        truncated = (not terminated) and self._steps >= self._step_limit()
        if self.render_mode == "human":
            self.render()
        return self._obs, reward, terminated, truncated, self._info(valid=valid)

    def _step_limit(self) -> float:
        # gym.make(..., max_episode_steps=N) consumes N for its TimeLimit wrapper and gives the env a
        # minimal spec (max_episode_steps=None): under gym.make the TimeLimit alone truncates
        return float("inf") if getattr(self, "spec", None) is not None else self.max_episode_steps

    def _info(self, valid: bool) -> dict[str, Any]:
        assert self._game is not None
        return {
            "admissible_commands": self._engine.admissible_commands,
            "task_id": self._game.task_id,
            "task_type": self._game.task_type,
            "goal": self._goal,
            "won": self._won,
            "valid_action": bool(valid),
            "step": self._steps,
            "outcome": 1.0 if self._won else 0.0,
        }

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._obs
        if self.render_mode == "human":
            print(self._obs)
        return None

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None
            self._loaded = None

    # -- experts --------------------------------------------------------------------------------
    def expert_action(self) -> str | None:
        """Next command of the handcoded full-knowledge expert from the current state (None if stuck)."""
        if self._game is None:
            raise RuntimeError("call reset() first")
        if self._expert is None:
            self._expert = HandcodedExpert(TaskSpec.from_goal_pddl(self._engine.problem_text))
        try:
            return self._expert.next_command(self._engine.facts(), self._engine.ground_actions())
        except ExpertError:
            return None

    def expert_plan(self) -> list[str] | None:
        """Walkthrough of the current game from its reset (None if unknown).

        The game file's stored walkthrough when it has one; else the handcoded expert's, computed
        once per game by playing it on this env's engine, after which the current episode is
        restored exactly (reset + replay of the commands played so far).
        """
        if self._game is None:
            raise RuntimeError("call reset() first")
        stored = self._engine.walkthrough
        if stored:
            return stored
        key = self._game.task_id
        if key not in self._plans:
            try:
                self._plans[key] = solve(self._engine)
            except ExpertError:
                self._plans[key] = None
            self._engine.reset()
            for cmd in self._history:
                self._engine.step(cmd)
        plan = self._plans[key]
        return list(plan) if plan else None
