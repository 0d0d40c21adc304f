"""Load a WebShop catalog: the original files or the embedded generated catalog.

:func:`load_catalog` returns a :class:`Catalog`: products in the form the original
``web_agent_site/engine/engine.py:load_products`` gives them, one price per product, and the
synthetic (or human) goals in the original order (shuffled once with seed 233).

Sources, in order:

1. ``data_dir`` (or the environment variable ``WEBSHOP_DATA``): a folder with the original
   files, ``items_shuffle*.json`` (products) and ``items_ins_v2*.json`` (attributes and
   instructions), optionally ``items_human_ins.json`` (human goals). When several files match,
   ``items_shuffle_<num_products>.json`` wins, then ``items_shuffle.json``.
2. Otherwise the embedded catalog, generated in memory by
   :mod:`progpo_envs.webshop.catalog_gen` (deterministic from ``seed``; 1,000 products take
   ~0.1 s).

Randomness follows the original's order of draws, from one ``random.Random(seed)``: first one
uniform price per range-priced product (in product order), then the goals' price caps, then
the goal shuffle with its own ``random.Random(233)``. The original makes the same calls on
Python's global (unseeded) ``random``, so with ``random.seed(seed)`` before its loader it gets
the same prices, caps and goal order as ``seed`` here.

Deviation kept small on purpose: a product's ``Price`` is the drawn price (a float) and the
original's price text (``"$19.99 to $27.99"``) is ``price_tag``.

Example:
    >>> cat = load_catalog(num_products=200, seed=0)
    >>> len(cat.products), cat.source
    (200, 'generated(seed=0)')
    >>> p = cat.products[0]
    >>> all(k in p for k in ("Title", "BulletPoints", "Description", "options", "Attributes"))
    True
    >>> cat.prices[p["asin"]] == p["Price"]
    True
    >>> cat.split("test") == list(range(min(500, len(cat.goals))))
    True
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from progpo_envs.webshop.catalog_gen import iter_catalog
from progpo_envs.webshop.data_io import FIX_HINT, WebShopDataError, read_json
from progpo_envs.webshop.goals import get_human_goals, get_synthetic_goals, shuffle_goals

__all__ = [
    "DATA_ENV_VAR",
    "TEST_GOALS",
    "WebShopDataError",
    "Catalog",
    "load_catalog",
    "convert_product",
    "parse_pricing",
    "draw_prices",
    "read_json",
    "find_data_file",
]

#: Environment variable naming a folder with the original WebShop files.
DATA_ENV_VAR = "WEBSHOP_DATA"
#: Goals 0 .. TEST_GOALS - 1 form the test split (as the published GRPO/GiGPO results use).
TEST_GOALS = 500
_DEFAULT_PRICE = 100.0


@dataclass
class Catalog:
    """A loaded catalog: products, prices and goals.

    Attributes:
        products: products in the original loaded form (see :func:`convert_product`).
        by_asin: ``asin -> product``.
        prices: ``asin -> price`` (a range product's price drawn once, uniformly).
        goals: goals in the original order (after the seed-233 shuffle); each has a ``weight``.
        source: ``"generated(seed=...)"`` or the data folder.
        seed: the seed used for prices and price caps.
        human_goals: whether ``goals`` are human goals.
    """

    products: list[dict[str, Any]]
    by_asin: dict[str, dict[str, Any]]
    prices: dict[str, float]
    goals: list[dict[str, Any]]
    source: str = "generated"
    seed: int = 0
    human_goals: bool = False
    weights: list[float] = field(default_factory=list)

    def split(self, name: str) -> list[int]:
        """Goal indices of a split: ``"test"`` (0-499), ``"train"`` (500 on) or ``"all"``.

        >>> Catalog([], {}, {}, [{}] * 502).split("train")
        [500, 501]
        """
        n = len(self.goals)
        if name == "test":
            return list(range(min(TEST_GOALS, n)))
        if name == "train":
            return list(range(TEST_GOALS, n))
        if name == "all":
            return list(range(n))
        raise ValueError(f"unknown split {name!r}; expected 'train', 'test' or 'all'")


def find_data_file(data_dir: Path, stem: str, num_products: int | None) -> Path:
    """Pick ``<stem>_<n>.json``, else ``<stem>.json``, else the single ``<stem>*.json``."""
    if num_products is not None:
        exact = data_dir / f"{stem}_{num_products}.json"
        if exact.is_file():
            return exact
    plain = data_dir / f"{stem}.json"
    if plain.is_file():
        return plain
    matches = sorted(data_dir.glob(f"{stem}*.json"))
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise WebShopDataError(f"no {stem}*.json in {data_dir}; {FIX_HINT}")
    names = ", ".join(m.name for m in matches)
    raise WebShopDataError(
        f"several {stem}*.json in {data_dir} ({names}) and none named {stem}_{num_products}.json "
        f"or {stem}.json; pass num_products matching one of them or keep only one"
    )


def parse_pricing(pricing: Any) -> list[float]:
    """The original's price list from a ``pricing`` string: ``"$19.99$27.99" -> [19.99, 27.99]``.

    Missing or unparseable pricing gives ``[100.0]`` (the original's default); an already
    parsed list of numbers (a preprocessed file) is kept (first two).

    >>> parse_pricing("$19.99"), parse_pricing("$1,019.99$27.99$3"), parse_pricing("")
    ([19.99], [1019.99, 27.99], [100.0])
    >>> parse_pricing([12, 15.5, 20])
    [12.0, 15.5]
    """
    if isinstance(pricing, (list, tuple)):
        nums = [float(x) for x in pricing if isinstance(x, (int, float)) and not isinstance(x, bool)]
        return nums[:2] if nums else [_DEFAULT_PRICE]
    if not pricing or not isinstance(pricing, str):
        return [_DEFAULT_PRICE]
    values: list[float] = []
    for part in pricing.split("$")[1:]:
        digits = re.sub(r"[^\d.]", "", part)
        try:
            values.append(float(Decimal(digits)))
        except (InvalidOperation, ValueError):
            continue
    return values[:2] if values else [_DEFAULT_PRICE]


def _price_tag(pricing: list[float]) -> str:
    if len(pricing) == 1:
        return f"${pricing[0]}"
    return f"${pricing[0]} to ${pricing[1]}"


def convert_product(
    raw: dict[str, Any],
    attrs: dict[str, Any] | None,
    human_instructions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One raw ``items_shuffle`` item -> the original loaded product form.

    Keys: the raw keys plus ``Title, Description, BulletPoints, Reviews ([]), Rating ("N.A."),
    pricing (list[float]), price_tag ("$19.99" | "$19.99 to $27.99", the original's "Price"
    text), Price (float; set by :func:`load_catalog` to the drawn price), options ({name:
    [values lower-cased, "/" shown as " | "]}), option_to_image, Attributes,
    instruction_text, instruction_attributes, MainImage``, ``query`` lower-cased and stripped.
    ``attrs`` is the product's ``items_ins_v2`` entry (``None``: not listed -> Attributes
    ``["DUMMY_ATTR"]``, no instruction, as the original).
    """
    p = dict(raw)
    p["query"] = str(p.get("query", "")).lower().strip()
    p["category"] = p.get("category", "")
    p["product_category"] = p.get("product_category", "")
    p["name"] = p.get("name", "")
    p["Title"] = p["name"]
    p["Description"] = p.get("full_description", "") or ""
    p["Reviews"] = []
    p["Rating"] = "N.A."
    bullets = p.get("small_description", [])
    p["BulletPoints"] = bullets if isinstance(bullets, list) else [bullets]
    pricing = parse_pricing(p.get("pricing"))
    p["pricing"] = pricing
    p["price_tag"] = _price_tag(pricing)
    p["Price"] = pricing[0]

    options: dict[str, list[str]] = {}
    option_to_image: dict[str, Any] = {}
    custom = p.get("customization_options")
    if isinstance(custom, dict):
        for opt_name, contents in custom.items():
            if contents is None:
                continue
            values = []
            for content in contents:
                if not isinstance(content, dict) or "value" not in content:
                    continue
                value = str(content["value"]).strip().replace("/", " | ").lower()
                values.append(value)
                option_to_image[value] = content.get("image")
            options[str(opt_name).lower()] = values
    p["options"] = options
    p["option_to_image"] = option_to_image

    if attrs is not None and "attributes" in attrs:
        p["Attributes"] = list(attrs["attributes"])
    else:
        p["Attributes"] = ["DUMMY_ATTR"]
    p["instruction_text"] = attrs.get("instruction") if attrs else None
    p["instruction_attributes"] = attrs.get("instruction_attributes") if attrs else None
    if human_instructions is not None:
        p["instructions"] = human_instructions
    images = p.get("images") or []
    p["MainImage"] = images[0] if images else None
    return p


def draw_prices(products: Sequence[dict[str, Any]], rng: random.Random) -> dict[str, float]:
    """One price per product, as the original ``generate_product_prices``: a single price as
    is, a range drawn once uniformly (sets ``product["Price"]`` too)."""
    prices: dict[str, float] = {}
    for p in products:
        pricing = p["pricing"]
        price = pricing[0] if len(pricing) == 1 else rng.uniform(pricing[0], pricing[1])
        prices[p["asin"]] = price
        p["Price"] = price
    return prices


def _dedupe(
    rows: Iterable[tuple[dict[str, Any], dict[str, Any] | None]],
) -> Iterable[tuple[dict[str, Any], dict[str, Any] | None]]:
    seen: set[str] = set()
    for raw, attrs in rows:
        asin = raw.get("asin")
        if not isinstance(asin, str) or asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        yield raw, attrs


def _read_original(data_dir: Path, num_products: int | None, human_goals: bool):
    if not data_dir.is_dir():
        raise WebShopDataError(f"WebShop data folder not found: {data_dir}; {FIX_HINT}")
    items_path = find_data_file(data_dir, "items_shuffle", num_products)
    ins_path = find_data_file(data_dir, "items_ins_v2", num_products)
    items = read_json(items_path, what="products (items_shuffle)")
    if not isinstance(items, list) or not all(isinstance(x, dict) and "asin" in x for x in items[:1000]):
        raise WebShopDataError(
            f"{items_path}: expected a JSON list of products with an 'asin' key (the original "
            f"items_shuffle schema); {FIX_HINT}"
        )
    ins = read_json(ins_path, what="attributes (items_ins_v2)")
    if not isinstance(ins, dict):
        raise WebShopDataError(
            f"{ins_path}: expected a JSON object {{asin: {{attributes, ...}}}} (the original "
            f"items_ins_v2 schema); {FIX_HINT}"
        )
    human: dict[str, Any] = {}
    if human_goals:
        human_path = data_dir / "items_human_ins.json"
        if not human_path.is_file():
            raise WebShopDataError(
                f"human_goals=True needs {human_path} (the original items_human_ins.json); add "
                f"it or use human_goals=False for synthetic goals"
            )
        human = read_json(human_path, what="human instructions (items_human_ins)")
        if not isinstance(human, dict):
            raise WebShopDataError(f"{human_path}: expected a JSON object {{asin: [instructions]}}")
    if num_products is not None:
        items = items[:num_products]
    missing = [k for k in ("name", "category", "query", "product_category") if k not in (items[0] if items else {})]
    if missing:
        raise WebShopDataError(f"{items_path}: products lack keys {missing}; {FIX_HINT}")
    rows = ((raw, ins.get(raw.get("asin"))) for raw in items)
    return rows, human, str(data_dir)


def load_catalog(
    data_dir: str | os.PathLike[str] | None = None,
    *,
    num_products: int | None = 1000,
    seed: int = 0,
    human_goals: bool = False,
) -> Catalog:
    """Load the catalog from ``data_dir`` / ``$WEBSHOP_DATA`` or generate the embedded one.

    Args:
        data_dir: folder with the original files; ``None`` reads ``$WEBSHOP_DATA`` and, when that
            is unset or empty, generates the embedded catalog.
        num_products: first ``num_products`` products (``None``: all of a data file; the
            embedded catalog needs a number).
        seed: seeds the embedded catalog, the range-price draws and the goals' price caps.
        human_goals: goals from ``items_human_ins.json`` instead of synthetic goals.

    Raises:
        WebShopDataError: missing folder / file, corrupt JSON, wrong schema (one message with
            the path and the fix).
    """
    if data_dir is None:
        env = os.environ.get(DATA_ENV_VAR, "").strip()
        data_dir = env or None
    human: dict[str, Any] = {}
    if data_dir is None:
        if human_goals:
            raise WebShopDataError(
                "human_goals=True needs the original items_human_ins.json: pass data_dir (or set "
                "WEBSHOP_DATA) to a folder holding it; the embedded catalog has synthetic goals only"
            )
        if num_products is None or num_products < 1:
            raise ValueError(f"the embedded catalog needs num_products >= 1, got {num_products}")
        rows: Iterable[tuple[dict[str, Any], dict[str, Any] | None]] = iter_catalog(num_products, seed)
        source = f"generated(seed={seed})"
    else:
        rows, human, source = _read_original(Path(data_dir).expanduser(), num_products, human_goals)

    products = [
        convert_product(raw, attrs, human.get(raw["asin"]) if human_goals else None) for raw, attrs in _dedupe(rows)
    ]
    rng = random.Random(seed)
    prices = draw_prices(products, rng)
    if human_goals:
        goals = get_human_goals(products, prices, rng=rng)
    else:
        goals = get_synthetic_goals(products, prices, rng=rng)
    goals = shuffle_goals(goals)
    return Catalog(
        products=products,
        by_asin={p["asin"]: p for p in products},
        prices=prices,
        goals=goals,
        source=source,
        seed=seed,
        human_goals=human_goals,
        weights=[float(g["weight"]) for g in goals],
    )
