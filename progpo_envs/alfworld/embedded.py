"""The embedded default task set: games this package generated itself, shipped compactly.

``data/generated_games.json.xz`` holds, per game, its split, folder names, PDDL problem, task
sentence, walkthrough and a small ``traj_data.json``. The domain and grammar are NOT stored: they
are read from the installed ``alfworld`` wheel. On first use the archive is written out in the
original ALFWorld layout under a cache directory keyed by a content hash of (archive, domain,
grammar), so a new archive or another wheel can never be served from a stale cache::

    $PROGPO_CACHE_DIR (default ~/.cache/progpo)/alfworld/<hash>/json_2.1.1/{train,valid,hard,easy-train,easy-valid}/...

>>> sorted(EMBEDDED_SPLITS)
['easy-train', 'easy-valid', 'hard', 'train', 'valid']
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, Iterable

from progpo_envs.alfworld.install import alfworld_logic_files
from progpo_envs.cache import cache_root  # re-exported: older callers import it from here

ARCHIVE = Path(__file__).parent / "data" / "generated_games.json.xz"
EMBEDDED_SPLITS = ("train", "valid", "hard", "easy-train", "easy-valid")
FORMAT = 1


def _logic_hash(domain: str, grammar: str) -> str:
    return hashlib.sha256((domain + "\0" + grammar).encode()).hexdigest()


def pack_games(games: Iterable[Any], archive: Path, seed: int) -> Path:
    """Write generated games (``generate.GeneratedGame``) into a compact ``.json.xz`` archive."""
    domain, grammar = alfworld_logic_files()
    records = []
    for g in games:
        if g.game["pddl_domain"] != domain:
            raise ValueError(f"{g.task_id}: domain differs from the wheel's alfred.pddl")
        sentence = g.traj["turk_annotations"]["anns"][0]["task_desc"]
        if g.game["grammar"] != grammar.replace("UNKNOWN GOAL", sentence):
            raise ValueError(f"{g.task_id}: grammar is not the wheel's alfred.twl2 with its task sentence")
        records.append(
            {
                "split": g.split,
                "task_folder": g.task_folder,
                "trial": g.trial,
                "difficulty": g.difficulty,
                "sentence": sentence,
                "pddl_problem": g.game["pddl_problem"],
                "walkthrough": g.game["walkthrough"],
                "traj_data": g.traj,
            }
        )
    payload = {"format": FORMAT, "seed": seed, "logic_sha256": _logic_hash(domain, grammar), "games": records}
    archive = Path(archive)
    archive.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    archive.write_bytes(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
    return archive


def load_archive(archive: Path = ARCHIVE) -> dict[str, Any]:
    """The archive's content (raises FileNotFoundError with the fix when it is missing)."""
    if not Path(archive).is_file():
        raise FileNotFoundError(
            f"embedded ALFWorld games not found at {archive}: reinstall progpo, or rebuild them with "
            "`python -m progpo_envs.alfworld.generate --build-default`"
        )
    payload = json.loads(lzma.decompress(Path(archive).read_bytes()))
    if payload.get("format") != FORMAT:
        raise ValueError(f"{archive}: unknown archive format {payload.get('format')!r} (expected {FORMAT})")
    return payload


def embedded_root(archive: Path = ARCHIVE, cache_dir: Path | None = None) -> Path:
    """Materialize the embedded set (once) and return the root that holds ``json_2.1.1/``.

    Content-addressed: the folder name is a hash of the archive bytes and the wheel's domain and
    grammar; it is written to a temporary folder and renamed into place, so concurrent processes
    are safe and a half-written cache is never used.
    """
    domain, grammar = alfworld_logic_files()
    raw = Path(archive).read_bytes() if Path(archive).is_file() else b""
    key = hashlib.sha256(raw + b"\0" + _logic_hash(domain, grammar).encode()).hexdigest()[:16]
    base = Path(cache_dir) if cache_dir is not None else cache_root() / "alfworld"
    root = base / key
    if (root / "json_2.1.1").is_dir():
        return root
    payload = load_archive(archive)
    if payload["logic_sha256"] != _logic_hash(domain, grammar):
        warnings.warn(
            "the installed alfworld wheel's alfred.pddl/alfred.twl2 differ from the ones the embedded "
            "games were validated with (pin alfworld==0.4.2)",
            RuntimeWarning,
            stacklevel=2,
        )
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=base))
    try:
        for rec in payload["games"]:
            d = tmp / "json_2.1.1" / rec["split"] / rec["task_folder"] / rec["trial"]
            d.mkdir(parents=True, exist_ok=True)
            game = {
                "pddl_domain": domain,
                "grammar": grammar.replace("UNKNOWN GOAL", rec["sentence"]),
                "pddl_problem": rec["pddl_problem"],
                "solvable": True,
                "walkthrough": rec["walkthrough"],
            }
            (d / "game.tw-pddl").write_text(json.dumps(game))
            (d / "traj_data.json").write_text(json.dumps(rec["traj_data"]))
        try:
            os.rename(tmp, root)
        except OSError:  # another process won the race
            if not (root / "json_2.1.1").is_dir():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return root
