"""The one cache root shared by the whole package (embedded ALFWorld games, PDDL->SAS
translations, the SmolLM2 fp32 copy, tiny tokenizers/models).

``$PROGPO_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/progpo``, else ``~/.cache/progpo``.

Example: ``PROGPO_CACHE_DIR=/scratch/progpo python -m trainers.progpo`` keeps the SmolLM2 fp32
copy, the tiny tokenizers and the materialized ALFWorld games under ``/scratch/progpo``.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_root"]

#: the environment variable that moves every cache of the package
CACHE_ENV = "PROGPO_CACHE_DIR"


def cache_root() -> Path:
    """Root of progpo's caches (read at each call, so tests may move it with the env var)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "progpo"
