"""Reading WebShop data files: one error type and one JSON reader with the fix in its message.

Imported by both :mod:`~progpo_envs.webshop.data` (the catalog loader) and
:mod:`~progpo_envs.webshop.goals` (human instructions), which therefore need not import each
other. ``progpo_envs.webshop.data`` re-exports both names.

>>> issubclass(WebShopDataError, RuntimeError)
True
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wrappers.errors import UserError

__all__ = ["FIX_HINT", "WebShopDataError", "read_json"]

FIX_HINT = (
    "point data_dir (or the WEBSHOP_DATA environment variable) at a folder with the original "
    "WebShop files (items_shuffle*.json and items_ins_v2*.json), or pass data_dir=None and unset "
    "WEBSHOP_DATA to use the embedded generated catalog"
)


class WebShopDataError(UserError, RuntimeError):
    """A WebShop data folder or file is missing, unreadable or malformed (message says the fix)."""


def read_json(path: Path, *, what: str) -> Any:
    """``json.load`` with one clear :class:`WebShopDataError` for missing / corrupt files."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise WebShopDataError(f"{what} file not found: {path}; {FIX_HINT}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise WebShopDataError(
            f"{what} file {path} is not valid JSON ({exc}); re-download or regenerate it "
            f"(python -m progpo_envs.webshop.catalog_gen --out-dir <dir>)"
        ) from None
    except OSError as exc:
        raise WebShopDataError(f"cannot read {what} file {path}: {exc}") from None
