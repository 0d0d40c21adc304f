"""WebShop goals, built as the original ``web_agent_site/engine/goal.py`` builds them.

* :func:`get_synthetic_goals`: one goal per combination of a product's option values, for every
  product that has an instruction; text = instruction + ``" with k: v, and k2: v2"`` + price
  text; price cap drawn from the next multiples of 10 above the product's price; weight =
  mean over the goal's attributes of 1 / (number of goals having that attribute).
* :func:`get_human_goals`: goals from the original ``items_human_ins.json`` (attached to the
  products as ``product["instructions"]``), weight 1.
* :func:`shuffle_goals`: the original server shuffles the goal list once with
  ``random.seed(233)``; goal index ``i`` refers to the shuffled list (test split = 0-499).
* :func:`load_human_instructions` / :func:`parse_human_instruction`: the free-text human
  instructions (``human_goals.json``, a list of strings) as instruction-only goals (no target
  product: usable as task text or search input, not for the reward).

The original draws from Python's global ``random``; here every function takes an explicit
``random.Random`` so that a catalog loaded with one seed always gets the same goals.

Example:
    >>> import random
    >>> product = {"asin": "B0000000AA", "category": "food", "query": "coffee",
    ...            "name": "Acme Ground Coffee", "Title": "Acme Ground Coffee",
    ...            "product_category": "Grocery & Gourmet Food › Beverages › Coffee",
    ...            "instruction_text": "Find me usda organic coffee",
    ...            "instruction_attributes": ["usda organic"],
    ...            "options": {"size": ["12 ounce", "2 pound"]}}
    >>> goals = get_synthetic_goals([product], {"B0000000AA": 23.5}, rng=random.Random(0))
    >>> [g["instruction_text"] for g in goals]  # doctest: +NORMALIZE_WHITESPACE
    ['Find me usda organic coffee with size: 12 ounce, and price lower than 60.00 dollars',
     'Find me usda organic coffee with size: 2 pound, and price lower than 60.00 dollars']
    >>> goals[0]["goal_options"], goals[0]["price_upper"], goals[0]["weight"]
    ({'size': '12 ounce'}, 60.0, 0.5)
"""

from __future__ import annotations

import itertools
import random
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from progpo_envs.webshop.data_io import WebShopDataError, read_json

__all__ = [
    "PRICE_RANGE",
    "NO_PRICE_CAP",
    "SHUFFLE_SEED",
    "price_cap",
    "get_synthetic_goals",
    "get_human_goals",
    "shuffle_goals",
    "load_human_instructions",
    "parse_human_instruction",
]

#: Candidate price caps: 10, 20, ..., 990 dollars (as the original).
PRICE_RANGE: tuple[float, ...] = tuple(10.0 * i for i in range(1, 100))
#: Cap used when fewer than two candidates lie above the price (the original's 1000000).
NO_PRICE_CAP = 1000000
#: The original server shuffles its goal list with ``random.seed(233)``.
SHUFFLE_SEED = 233


def price_cap(price: float, rng: random.Random) -> tuple[float, str]:
    """Draw ``(price_upper, price_text)`` as the original: two of the (up to) four multiples
    of 10 above ``price``, sorted, keep the larger.

    >>> price_cap(23.5, random.Random(0))
    (60.0, ', and price lower than 60.00 dollars')
    >>> price_cap(985.0, random.Random(0))
    (1000000, '')
    """
    candidates = [p for p in PRICE_RANGE if p > price][:4]
    if len(candidates) < 2:
        return NO_PRICE_CAP, ""
    _, upper = sorted(rng.sample(candidates, 2))
    return upper, f", and price lower than {upper:.2f} dollars"


def _goal_price_cap(prices: dict[str, float] | None, asin: str, rng: random.Random) -> tuple[float, str]:
    """:func:`price_cap` of the product's price; without prices no cap and no text (as the original)."""
    if prices is None:
        return NO_PRICE_CAP, ""
    return price_cap(prices[asin], rng)


def get_synthetic_goals(
    products: Sequence[dict[str, Any]],
    prices: dict[str, float] | None,
    *,
    rng: random.Random | None = None,
) -> list[dict[str, Any]]:
    """One goal per option combination of each product with an instruction (original order).

    Products need the loaded form (:func:`progpo_envs.webshop.data.convert_product`): ``asin,
    category, query, name, Title, product_category, options, instruction_text,
    instruction_attributes``. ``prices=None`` gives no price text and cap 1000000 (as the
    original). Goal keys: ``asin, category, query, name (= the product's Title),
    product_category, instruction_text, attributes, price_upper, goal_options (dict),
    weight``. Products whose instruction has no attribute are skipped (the original asserts).
    """
    rng = rng if rng is not None else random.Random(0)
    goals: list[dict[str, Any]] = []
    attr_counts: dict[str, int] = defaultdict(int)
    for product in products:
        instruction = product.get("instruction_text")
        if instruction is None:
            continue
        attributes = list(product.get("instruction_attributes") or [])
        if not attributes:
            continue
        asin = product["asin"]
        upper, price_text = _goal_price_cap(prices, asin, rng)
        options: dict[str, list[str]] = product.get("options") or {}
        names = sorted(options)
        for combination in itertools.product(*(options[n] for n in names)):
            goal_options = dict(zip(names, combination))
            option_text = ", and ".join(f"{k}: {v}" for k, v in goal_options.items())
            option_text = f" with {option_text}" if option_text else ""
            goals.append(
                {
                    "asin": asin,
                    "category": product["category"],
                    "query": product["query"],
                    "name": product["Title"],
                    "product_category": product["product_category"],
                    "instruction_text": f"{instruction}{option_text}{price_text}",
                    "attributes": attributes,
                    "price_upper": upper,
                    "goal_options": goal_options,
                }
            )
            for att in attributes:
                attr_counts[att] += 1
    for goal in goals:
        atts = goal["attributes"]
        goal["weight"] = sum(1.0 / attr_counts[a] for a in atts) / len(atts)
    return goals


def get_human_goals(
    products: Sequence[dict[str, Any]],
    prices: dict[str, float] | None,
    *,
    rng: random.Random | None = None,
) -> list[dict[str, Any]]:
    """Goals from human instructions attached as ``product["instructions"]`` (original format:
    a list of ``{"instruction", "instruction_attributes", "instruction_options"}``).

    Instructions without attributes are skipped (as the original); ``goal_options`` is the
    human instruction's option list (a list, not a dict); weight 1.
    """
    rng = rng if rng is not None else random.Random(0)
    goals: list[dict[str, Any]] = []
    for product in products:
        for entry in product.get("instructions") or ():
            attributes = list(entry.get("instruction_attributes") or [])
            if not attributes:
                continue
            asin = product["asin"]
            upper, price_text = _goal_price_cap(prices, asin, rng)
            goals.append(
                {
                    "asin": asin,
                    "category": product["category"],
                    "query": product["query"],
                    "name": product["name"],
                    "product_category": product["product_category"],
                    "instruction_text": str(entry["instruction"]).strip(".") + price_text,
                    "attributes": attributes,
                    "price_upper": upper,
                    "goal_options": list(entry.get("instruction_options") or []),
                    "weight": 1,
                }
            )
    return goals


def shuffle_goals(goals: Iterable[dict[str, Any]], seed: int = SHUFFLE_SEED) -> list[dict[str, Any]]:
    """A copy of ``goals`` shuffled with ``random.Random(seed).shuffle`` (original: seed 233).

    >>> shuffle_goals([{"i": 0}, {"i": 1}, {"i": 2}], seed=233) == shuffle_goals(
    ...     [{"i": 0}, {"i": 1}, {"i": 2}], seed=233)
    True
    """
    out = list(goals)
    random.Random(seed).shuffle(out)
    return out


def load_human_instructions(path: str | Path) -> list[str]:
    """Read a list of free-text human instructions (``human_goals.json``).

    Raises :class:`progpo_envs.webshop.data_io.WebShopDataError` naming the path when the file
    is missing, not JSON, or not a list of strings.
    """
    data = read_json(Path(path), what="human instructions")
    if not isinstance(data, list) or not all(isinstance(s, str) for s in data):
        raise WebShopDataError(
            f"{path}: expected a JSON list of instruction strings (as WebShop's "
            f"baseline_models/data/human_goals.json); fix or replace the file"
        )
    return data


_SIZE_VALUE = (
    r"(?:[0-9][\w.\-/]*(?:\s*(?:wide|narrow|x|w|l|inch|inches|ounce|oz|fl oz|ml|mm|cm|pack|count|"
    r"pcs|feet|ft)\b)?|x{1,3}-?(?:small|large)|x-\s?large|small|medium|large|xs|xl|xxl|xxxl|one|"
    r"queen|king|twin|full|travel|petite)"
)
_SIZE_AFTER_RE = re.compile(r"\bsize(?:\s+(?:is|should be|of|in))?\s*:?\s*(" + _SIZE_VALUE + r")")
_SIZE_BEFORE_RE = re.compile(r"(?<![\w-])(" + _SIZE_VALUE + r")[\s-]+sized?\b")
_COLOR_AFTER_RE = re.compile(
    r"\b(?:in (?:the )?colou?r|colou?r(?:ed)?(?: is| should be| of)?\s*:?)\s+([a-z][\w\-]*(?: [a-z][\w\-]*)?)"
)
_COLOR_BEFORE_RE = re.compile(r"\b([a-z][\w\-]*)\s+colou?r(?:ed)?\b")
_PRICE_RE = re.compile(
    r"(?:price lower than|less than|under|below)\s*\$?\s*([0-9]+(?:\.[0-9]+)?)\s*(?:dollars|usd|\$)?"
)
_COLOR_STOP = frozenset(
    "a an the and with that for in size please i it of which is should be any this my same one "
    "color colour colored".split()
)


def _first(*matches: re.Match[str] | None) -> re.Match[str] | None:
    found = [m for m in matches if m is not None]
    return min(found, key=lambda m: m.start()) if found else None


def parse_human_instruction(text: str, attribute_vocab: Iterable[str] = ()) -> dict[str, Any]:
    """An instruction-only goal from a free-text human instruction (heuristic, documented).

    Extracts a price cap (``"under 30 dollars"``, ``"price lower than 30.00 dollars"``), a size
    (``"size 7.5 wide"``, ``"size is 12 pack"``, ``"x-large size"``), a colour (``"in the color
    X"``, ``"color: X"``, ``"X color"``), and the phrases of ``attribute_vocab`` found in the text. The
    goal has no target product (``asin`` etc. are ``None``), so it is task text / search
    input, not something :func:`progpo_envs.webshop.reward.get_reward` can score.

    >>> g = parse_human_instruction("i need black boots in size 9 wide, under 60 dollars",
    ...                             ["steel toe", "wide"])
    >>> g["goal_options"], g["price_upper"], g["attributes"]
    ({'size': '9 wide'}, 60.0, ['wide'])
    """
    clean = " ".join(str(text).split())
    low = clean.lower()
    goal_options: dict[str, str] = {}
    m = _first(_SIZE_AFTER_RE.search(low), _SIZE_BEFORE_RE.search(low))
    if m:
        goal_options["size"] = m.group(1).strip(" ,.-")
    m = _first(_COLOR_AFTER_RE.search(low), _COLOR_BEFORE_RE.search(low))
    if m:
        words = []
        for w in m.group(1).split():
            if w in _COLOR_STOP:
                break
            words.append(w)
        if words:
            goal_options["color"] = " ".join(words)
    m = _PRICE_RE.search(low)
    upper: float | int = float(m.group(1)) if m else NO_PRICE_CAP
    attributes = [
        a for a in dict.fromkeys(attribute_vocab) if a and re.search(r"\b" + re.escape(a.lower()) + r"\b", low)
    ]
    return {
        "asin": None,
        "category": None,
        "query": None,
        "name": None,
        "product_category": None,
        "instruction_text": clean,
        "attributes": attributes,
        "price_upper": upper,
        "goal_options": goal_options,
        "weight": 1,
    }
