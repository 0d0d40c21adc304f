"""SAS translation cache of the fast path: fast-downward's PDDL -> SAS translation, made once.

The stock engine translates the PDDL problem twice (for play, and "optimized" for the planner)
on every load and every reset. Here the play translation, reduced to what the engine reads
(:class:`Translation`), is cached per sha256 of (fast-downward version, domain, problem) in
memory and on disk; the planner's translation is made only if the planner is asked for.

Disk cache: ``$PROGPO_CACHE_DIR/alfworld-sas/<key>.json.gz`` (~10 KB a game;
``PROGPO_ALFWORLD_SAS_CACHE=0`` turns it off). An entry is gzip'd ``PROGPO-SAS <format> <key>
<sha256>\\n<record JSON>``, written to a temporary file and renamed into place (atomic). On read
the key and the sha256 of the record are checked and the record is rebuilt; an entry that fails
any check is deleted and translated again with a ``RuntimeWarning``, so a damaged cache never
reaches fast-downward (whose ``load_sas`` exits the process on a bad SAS text) and never makes a
good game file look broken. :func:`warm_translation_cache` fills it ahead of rollout workers.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import tempfile
import warnings
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Sequence

import fast_downward
from textworld.logic import Proposition, Variable

from progpo_envs.alfworld.fast.memo import LRU, sha
from progpo_envs.alfworld.install import RestoreArgv
from progpo_envs.cache import cache_root

__all__ = ["CACHE_ENV_SWITCH", "Translation", "disk_cache_dir", "translation", "warm_translation_cache"]

#: set to 0 to keep translations in memory only
CACHE_ENV_SWITCH = "PROGPO_ALFWORLD_SAS_CACHE"
_DISK_FORMAT = "2"  # 2: checksummed header (format 1 entries, unchecked, are never read)
_MAGIC = "PROGPO-SAS"
_TASKS = LRU(64)


class _Param:
    __slots__ = ("name", "type_name")

    def __init__(self, name: str, type_name: str) -> None:
        self.name, self.type_name = name, type_name


class _ActionSchema:
    """What the engine reads of a translated action: its typed parameters."""

    __slots__ = ("name", "parameters")

    def __init__(self, name: str, parameters: list[_Param]) -> None:
        self.name, self.parameters = name, parameters


class Translation:
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
        self.actions = {
            n: _ActionSchema(n, [_Param(pn, pt) for pn, pt in params]) for n, params in record["actions"].items()
        }
        self.dynamic_predicates = set(record["dynamic"])
        self._init = record["init"]
        self.init_facts: list[Any] | None = None
        self.state_facts: list[Any] | None = None
        self._replan: bytes | None = None

    @staticmethod
    def translate(domain: str, problem: str) -> dict[str, Any]:
        with RestoreArgv():
            task, sas = fast_downward.pddl2sas(domain, problem, verbose=False)
        name2type = {o.name: o.type_name for o in task.objects}
        init = []
        # textworld 1.7.0 PddlState.__init__'s _atom2proposition: the atoms it keeps, in order
        for atom in task.init:
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
            self.init_facts = [Proposition(n, [Variable(a, t) for a, t in args]) for n, args in self._init]
        return self.init_facts

    def replan_sas(self) -> bytes:
        if self._replan is None:
            with RestoreArgv():
                _, sas = fast_downward.pddl2sas(self.domain, self.problem, verbose=False, optimize=True)
            self._replan = sas.encode("utf-8")
        return self._replan


def disk_cache_dir() -> Path | None:
    """Folder of the on-disk translation cache, or None when ``PROGPO_ALFWORLD_SAS_CACHE=0``."""
    if os.environ.get(CACHE_ENV_SWITCH, "1") in ("0", "false", "no", ""):
        return None
    return cache_root() / "alfworld-sas"


@functools.lru_cache(maxsize=1)
def _fd_version() -> str:
    # read once per process: a metadata lookup costs ~4 ms, a third of a cold game load
    try:
        return version("fast-downward-textworld")
    except PackageNotFoundError:
        return "?"


class _BadEntry(Exception):
    """A disk cache entry that must not be used (the message says why)."""


def _encode(key: str, record: dict[str, Any]) -> bytes:
    payload = json.dumps(record).encode("utf-8")
    header = f"{_MAGIC} {_DISK_FORMAT} {key} {hashlib.sha256(payload).hexdigest()}\n".encode("ascii")
    return gzip.compress(header + payload, compresslevel=6, mtime=0)  # same bytes for the same record


def _decode(raw: bytes, key: str, domain: str, problem: str) -> Translation:
    """The entry's translation, checked end to end, or :class:`_BadEntry`."""
    try:
        data = gzip.decompress(raw)
    except (OSError, EOFError, ValueError) as exc:
        raise _BadEntry(f"not gzip ({exc})") from None
    header, sep, payload = data.partition(b"\n")
    fields = header.decode("ascii", errors="replace").split(" ")
    if not sep or len(fields) != 4 or fields[0] != _MAGIC or fields[1] != _DISK_FORMAT:
        raise _BadEntry("no valid header")
    if fields[2] != key:
        raise _BadEntry("written for another game")
    if hashlib.sha256(payload).hexdigest() != fields[3]:
        raise _BadEntry("checksum mismatch")
    try:
        tr = Translation(domain, problem, json.loads(payload))
        tr.initial_facts()
    except Exception as exc:  # any malformed record (KeyError, TypeError, ValueError...)
        raise _BadEntry(f"malformed record ({type(exc).__name__}: {exc})") from None
    if not tr.sas_bytes.startswith(b"begin_version"):
        raise _BadEntry("SAS text does not start with begin_version")
    return tr


def _write_atomic(folder: Path, path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder and a rename."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass  # a read-only cache dir only costs speed


def _read_or_translate(domain: str, problem: str) -> Translation:
    folder = disk_cache_dir()
    if folder is None:
        return Translation(domain, problem, Translation.translate(domain, problem))
    key = sha(_DISK_FORMAT, _fd_version(), domain, problem)
    path = folder / f"{key}.json.gz"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raw = None
    except OSError as exc:
        raw = None
        warnings.warn(
            f"ALFWorld translation cache entry {path} is unreadable ({exc}): translating again",
            RuntimeWarning,
            stacklevel=3,
        )
    if raw is not None:
        try:
            return _decode(raw, key, domain, problem)
        except _BadEntry as bad:
            warnings.warn(
                f"ALFWorld translation cache entry {path} is corrupt ({bad}): deleted, translating "
                "again (the game file is fine)",
                RuntimeWarning,
                stacklevel=3,
            )
            path.unlink(missing_ok=True)
    record = Translation.translate(domain, problem)
    _write_atomic(folder, path, _encode(key, record))
    return Translation(domain, problem, record)


def translation(domain: str, problem: str) -> Translation:
    """The play translation of (domain, problem): memory, else the disk cache, else fast-downward."""
    return _TASKS.get_or_make(sha(domain, problem), lambda: _read_or_translate(domain, problem))


def warm_translation_cache(game_files: Sequence[str]) -> int:
    """Translate ``game_files`` into the on-disk cache now (e.g. before starting rollout workers,
    whose first load of each game then skips fast-downward's translator). Returns the count."""
    for path in game_files:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        translation(data["pddl_domain"], data["pddl_problem"])
    return len(game_files)
