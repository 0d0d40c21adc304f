"""Where ALFWorld games come from: a data dir in the original layout, or the embedded set.

Order: an explicit ``data_dir``; else ``$ALFWORLD_DATA``; else the embedded set. A data dir is
the folder that holds ``json_2.1.1/`` (the folder ``json_2.1.1`` itself is accepted too)::

    <data_dir>/json_2.1.1/<split>/<task_folder>/<trial_folder>/game.tw-pddl (+ traj_data.json)

As ALFWorld's own loader does, folders whose path contains "movable" or "Sliced" are skipped,
and so are games without ``"solvable": true`` (logged at INFO). A game whose files are truncated
or unreadable, lack ``traj_data.json`` or name no known task type is skipped with a WARNING,
once per game and process; a ``game.tw-pddl`` or ``traj_data.json`` that parses to something
other than a JSON object (``[]``, a string) raises :class:`ALFWorldDataError`.

>>> task_id_of(Path("json_2.1.1/valid_unseen/pick_two_obj_and_place-CD-None-Safe-308/trial_T1/game.tw-pddl"))
'pick_two_obj_and_place-CD-None-Safe-308/trial_T1'
"""

from __future__ import annotations

import json
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from progpo_envs.alfworld.embedded import EMBEDDED_SPLITS
from progpo_envs.alfworld.tasks import TASK_TYPES, task_type_of_folder
from wrappers.errors import UserError


class ALFWorldDataError(UserError, ValueError):
    """Bad game-source configuration: missing data dir, empty split, unknown task id."""


@dataclass(frozen=True)
class GameRecord:
    """One playable game: ``task_id`` is ``<task_folder>/<trial_folder>``."""

    task_id: str
    path: Path
    task_type: str


def task_id_of(game_file: Path) -> str:
    return f"{game_file.parent.parent.name}/{game_file.parent.name}"


def _alfworld_default_cache() -> str:
    # ``import alfworld`` sets ALFWORLD_DATA to this when unset; it is not a user choice.
    return os.path.expanduser("~/.cache/alfworld")


def resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> Path | None:
    """The json_2.1.1 folder to read, or None for the embedded set."""
    if data_dir is None:
        env = os.environ.get("ALFWORLD_DATA")
        if not env or (
            os.path.normpath(env) == os.path.normpath(_alfworld_default_cache())
            and not os.path.isdir(os.path.join(env, "json_2.1.1"))
        ):
            return None
        data_dir, origin = env, "$ALFWORLD_DATA"
    else:
        origin = "data_dir"
    root = Path(data_dir).expanduser()
    if root.name == "json_2.1.1" and root.is_dir():
        return root
    if (root / "json_2.1.1").is_dir():
        return root / "json_2.1.1"
    raise ALFWorldDataError(
        f"ALFWorld data not found: {origin}={str(data_dir)!r} has no json_2.1.1/ folder"
        f"{'' if root.is_dir() else ' (the folder does not exist)'}. Point {origin} at the folder that holds "
        "json_2.1.1/<split>/<task>/<trial>/game.tw-pddl (e.g. the one `alfworld-download` fills), "
        "or pass data_dir=None and unset ALFWORLD_DATA to use the embedded games."
    )


_log = logging.getLogger(__name__)
_SKIPS_LOGGED: set[tuple[str, str]] = set()


def _skip(path: Path, reason: str, level: int = logging.WARNING) -> None:
    """Log that the game at ``path`` is skipped and why, once per (game, reason) and process."""
    key = (str(path), reason)
    if key not in _SKIPS_LOGGED:
        _SKIPS_LOGGED.add(key)
        _log.log(level, "ALFWorld game %s skipped: %s", path, reason)


class _Unreadable(Exception):
    """A file that cannot be read or parsed (truncated, not JSON): its game is skipped."""


#: A ``game.tw-pddl`` or ``traj_data.json`` larger than this is skipped unread (real ones are
#: about 0.1 MB and 0.5 MB).
MAX_GAME_FILE_BYTES = 16 * 2**20


def _read_object(path: Path) -> dict:
    """A JSON file that must hold an object: :class:`_Unreadable` when it cannot be read or parsed,
    is not a regular file (a FIFO would block, ``/dev/zero`` would never end) or is larger than
    :data:`MAX_GAME_FILE_BYTES`; :class:`ALFWorldDataError` when it parses to something else."""
    try:
        st = os.stat(path)  # follows symlinks: a link to a device or a FIFO is caught here
    except OSError as exc:
        raise _Unreadable(f"{path.name} is unreadable ({type(exc).__name__}: {exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise _Unreadable(f"{path.name} is not a regular file (a device, FIFO or socket, or a link to one)")
    if st.st_size > MAX_GAME_FILE_BYTES:
        raise _Unreadable(
            f"{path.name} is {st.st_size / 2**20:.0f} MiB, over the {MAX_GAME_FILE_BYTES // 2**20} MiB "
            "limit of a game file"
        )
    try:
        with open(path, encoding="utf-8") as f:
            data = json.loads(f.read(MAX_GAME_FILE_BYTES + 1))
    except (OSError, ValueError) as exc:  # ValueError: JSONDecodeError, UnicodeDecodeError
        raise _Unreadable(f"{path.name} is unreadable or truncated ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict):
        raise ALFWorldDataError(
            f"{path} holds a JSON {type(data).__name__}, not an object: a game folder needs game.tw-pddl "
            "(pddl_domain, grammar, pddl_problem, solvable) and traj_data.json as JSON objects; regenerate or "
            "re-download it, or remove the folder."
        )
    return data


def _task_type(trial_dir: Path) -> str | None:
    tt = task_type_of_folder(trial_dir.parent.name)
    if tt is not None:
        return tt
    tt = _read_object(trial_dir / "traj_data.json").get("task_type")
    return tt if tt in TASK_TYPES else None


def check_split(split: str, data_dir: str | os.PathLike[str] | None = None) -> None:
    """Raise :class:`ALFWorldDataError` in one line unless ``split`` exists: in the embedded set
    (no ``data_dir`` / ``$ALFWORLD_DATA``) or as a folder of the original layout. Reads no game.

    >>> check_split("easy-valid")
    >>> check_split("valid_unseen")
    Traceback (most recent call last):
    ...
    progpo_envs.alfworld.games.ALFWorldDataError: split 'valid_unseen' is not in the embedded ALFWorld set ...
    """
    json_dir = resolve_data_dir(data_dir)
    if json_dir is None:
        if split not in EMBEDDED_SPLITS:
            raise ALFWorldDataError(
                f"split {split!r} is not in the embedded ALFWorld set (splits: {list(EMBEDDED_SPLITS)}); "
                "for the original splits pass data_dir=<folder with json_2.1.1> or set ALFWORLD_DATA"
            )
        return
    _require_split_dir(Path(json_dir), split)


def _require_split_dir(json_dir: Path, split: str) -> Path:
    """``json_dir / split``, or :class:`ALFWorldDataError` naming the splits that are there."""
    split_dir = json_dir / split
    if not split_dir.is_dir():
        available = sorted(p.name for p in json_dir.iterdir() if p.is_dir()) if json_dir.is_dir() else []
        raise ALFWorldDataError(
            f"ALFWorld split {split!r} not found: no folder {split_dir}. Available splits there: "
            f"{available or 'none'}; pass split=<one of them>."
        )
    return split_dir


#: the last scan of each split folder, with the file stats it was made from
_SCANS: dict[Path, tuple[tuple, list[GameRecord]]] = {}


def _stat_key(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def discover_games(json_dir: Path, split: str) -> list[GameRecord]:
    """Solvable games of ``split`` under ``json_dir`` (= .../json_2.1.1), sorted by task id.

    A process makes many envs of one split (every member, every evaluation): a rescan whose game
    and ``traj_data.json`` files have the same names, sizes and modification times as the last
    one reuses its result instead of parsing every game again."""
    split_dir = _require_split_dir(Path(json_dir), split)
    files = sorted(split_dir.glob("*/*/game.tw-pddl"))
    signature = tuple((str(f), _stat_key(f), _stat_key(f.parent / "traj_data.json")) for f in files)
    key = split_dir.resolve()
    cached = _SCANS.get(key)
    if cached is not None and cached[0] == signature:
        return list(cached[1])
    games = _scan(split_dir, split, files)
    _SCANS[key] = (signature, list(games))
    return games


def _scan(split_dir: Path, split: str, files: list[Path]) -> list[GameRecord]:
    games = []
    for game_file in files:
        trial_dir = game_file.parent
        rel = str(trial_dir.relative_to(split_dir))
        if "movable" in rel or "Sliced" in rel:
            _skip(game_file, 'its path contains "movable" or "Sliced" (as ALFWorld\'s loader)', logging.INFO)
            continue
        if not (trial_dir / "traj_data.json").is_file():
            _skip(game_file, "no traj_data.json beside it")
            continue
        try:
            if _read_object(game_file).get("solvable") is not True:
                _skip(game_file, 'no "solvable": true (as ALFWorld\'s loader)', logging.INFO)
                continue
            tt = _task_type(trial_dir)
        except _Unreadable as exc:
            _skip(game_file, str(exc))
            continue
        if tt is None:
            _skip(game_file, f"unknown task type (folder {trial_dir.parent.name!r}, traj_data.json task_type)")
            continue
        games.append(GameRecord(task_id_of(game_file), game_file, tt))
    if not games:
        raise ALFWorldDataError(
            f"ALFWorld split {split!r} at {split_dir} holds no playable game (need "
            '<task>/<trial>/game.tw-pddl with "solvable": true and traj_data.json).'
        )
    return games
