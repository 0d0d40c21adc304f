"""The WebShop purchase reward, as the original ``web_agent_site/engine/goal.py`` computes it.

::

    R = r_type * (N_att + N_opt + 1[price <= price_upper]) / (|A_goal| + |O_goal| + 1)

* ``N_att``: goal attributes matched by a product attribute with ``token_set_ratio > 85``, or
  found as a substring of the lower-cased title, bullet points or description.
* ``N_opt``: goal options matched by a chosen option value (``token_set_ratio > 85``), after
  :func:`normalize_color` on both sides. For synthetic goals ``goal_options`` is a dict and the
  original passes its ``(name, value)`` *pairs*: a pair is left as is by the colour
  normalisation unless the pair itself equals a colour name (never), and the fuzzy matcher
  stringifies it (``"('size', 'xl')"`` -> ``"size xl"``), so a chosen ``"xl"`` scores 100 and
  matches; this quirk is reproduced on purpose.
* ``r_type``: 1.0; 0.5 when neither the query, the category (>= 2 shared ``›`` levels) nor the
  title nouns (``title_score > 0.2``) match; 0.1 when ``title_score < 0.1``; 0.0 when it is 0.
  ``title_score = |nouns(purchased name) ∩ nouns(goal name)| / len(nouns(goal name))``, 0.2
  when the goal name has no noun (see :mod:`progpo_envs.webshop.title_nouns`).

Example:
    >>> product = {"asin": "B0", "name": "Acme Ground Coffee", "Title": "Acme Ground Coffee",
    ...            "query": "coffee", "product_category": "Grocery › Beverages › Coffee",
    ...            "Attributes": ["usda organic"], "BulletPoints": [], "Description": ""}
    >>> goal = {"asin": "B0", "name": "Acme Ground Coffee", "query": "coffee",
    ...         "product_category": "Grocery › Beverages › Coffee", "attributes": ["usda organic"],
    ...         "goal_options": {"size": "2 pound"}, "price_upper": 30.0}
    >>> get_reward(product, goal, price=35.0, options={"size": "12 ounce"})  # 1 of 3, as the original: a float
    0.3333333333333333
    >>> score, info = get_reward(product, goal, price=21.0, options={"size": "2 pound"}, verbose=True)
    >>> score, info["r_type"], info["r_att"], info["r_option"], info["r_price"], info["w_price"]
    (1.0, 1.0, 1.0, 1.0, True, 0.3333333333333333)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, overload

from progpo_envs.webshop.title_nouns import default_title_nouns

__all__ = [
    "COLOR_SET",
    "MATCH_THRESHOLD",
    "normalize_color",
    "token_set_ratio",
    "get_type_reward",
    "get_attribute_reward",
    "get_option_reward",
    "get_reward",
]

#: Fuzzy scores strictly above this count as a match (attributes and options).
MATCH_THRESHOLD = 85

#: The original colour list (``web_agent_site/engine/normalize.py``), in its order: the first
#: entry found as a substring wins (``"violet lavender"`` -> ``"lavender"``).
COLOR_SET: tuple[str, ...] = (
    "alabaster",
    "apricot",
    "aqua",
    "ash",
    "asphalt",
    "azure",
    "banana",
    "beige",
    "black",
    "blue",
    "blush",
    "bordeaux",
    "bronze",
    "brown",
    "burgundy",
    "camel",
    "camo",
    "caramel",
    "champagne",
    "charcoal",
    "cheetah",
    "chestnut",
    "chocolate",
    "christmas",
    "coffee",
    "cognac",
    "copper",
    "coral",
    "cranberry",
    "cream",
    "crystal",
    "dark",
    "denim",
    "eggplant",
    "elephant",
    "espresso",
    "fuchsia",
    "gold",
    "granite",
    "grape",
    "graphite",
    "grass",
    "gray",
    "green",
    "grey",
    "heather",
    "indigo",
    "ivory",
    "ivy",
    "khaki",
    "lavender",
    "lemon",
    "leopard",
    "light",
    "lilac",
    "lime",
    "magenta",
    "maroon",
    "mauve",
    "merlot",
    "midnight",
    "mint",
    "mocha",
    "multicolor",
    "mushroom",
    "mustard",
    "natural",
    "navy",
    "nude",
    "olive",
    "orange",
    "peach",
    "pewter",
    "pink",
    "plum",
    "purple",
    "rainbow",
    "red",
    "rose",
    "royal",
    "rust",
    "sand",
    "sapphire",
    "seashell",
    "silver",
    "skull",
    "slate",
    "steel",
    "stone",
    "stonewash",
    "sunflower",
    "tan",
    "taupe",
    "teal",
    "tiger",
    "turquoise",
    "violet",
    "walnut",
    "wheat",
    "white",
    "wine",
    "yellow",
)


def normalize_color(value: Any) -> Any:
    """The first :data:`COLOR_SET` entry found ``in`` ``value``, else ``value`` unchanged.

    ``in`` is a substring test for strings and a membership test for tuples (the
    ``(name, value)`` pairs of synthetic goals), as in the original.

    >>> normalize_color("navy blue"), normalize_color("violet lavender"), normalize_color("xl")
    ('blue', 'lavender', 'xl')
    >>> normalize_color("standard")  # the original's substring quirk: "tan" in "standard"
    'tan'
    >>> normalize_color(("color", "navy blue")), normalize_color(("size", "red"))
    (('color', 'navy blue'), 'red')
    """
    for color in COLOR_SET:
        try:
            if color in value:
                return color
        except TypeError:
            return value
    return value


_HIGH_LATIN = {i: None for i in range(128, 256)}


def _process(value: Any) -> str:
    from rapidfuzz.utils import default_process  # the [webshop] extra

    return default_process(str(value).translate(_HIGH_LATIN))


def _thefuzz_scorer() -> Callable[[Any, Any], int]:
    try:
        from thefuzz import fuzz  # the [webshop] extra

        return fuzz.token_set_ratio
    except ImportError:  # thefuzz is a thin wrapper over rapidfuzz: same processing below
        from rapidfuzz import fuzz as rf  # the [webshop] extra

        def scorer(a: Any, b: Any) -> int:
            if a is None or b is None:
                return 0
            return int(round(rf.token_set_ratio(_process(a), _process(b))))

        return scorer


_SCORER = _thefuzz_scorer()


def token_set_ratio(a: Any, b: Any) -> int:
    """``thefuzz.fuzz.token_set_ratio`` (non-strings are stringified, then only letters and
    digits kept, lower-cased, characters 128-255 dropped; integer 0-100).

    >>> token_set_ratio("xl", ("size", "xl")), token_set_ratio("X-Large", "x large")
    (100, 100)
    """
    return _SCORER(a, b)


def get_type_reward(
    purchased_product: Mapping[str, Any], goal: Mapping[str, Any], nouns: Callable[[str], list[str]] | None = None
) -> dict[str, Any]:
    """``r_type`` and its parts: ``query_match``, ``category_match``, ``title_score``."""
    nouns = nouns if nouns is not None else default_title_nouns()
    query_match = purchased_product["query"] == goal["query"]
    purchased_cat = {x.strip() for x in str(purchased_product["product_category"]).split("›")}
    goal_cat = {x.strip() for x in str(goal["product_category"]).split("›")}
    category_match = len(purchased_cat & goal_cat) >= 2

    purchased_nouns = nouns(str(purchased_product["name"]))
    desired_nouns = nouns(str(goal["name"]))
    if desired_nouns:
        title_score = len(set(purchased_nouns) & set(desired_nouns)) / len(desired_nouns)
    else:
        title_score = 0.2

    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match, "title_score": title_score}


def get_attribute_reward(purchased_product: Mapping[str, Any], goal: Mapping[str, Any]) -> tuple[float | None, int]:
    """``(r_att, N_att)``: goal attributes found among the product's attributes (fuzzy) or in its
    title / bullet points / description (substring, lower-cased)."""
    goal_attrs = list(goal["attributes"])
    purchased_attrs = list(purchased_product.get("Attributes") or [])
    title = str(purchased_product.get("Title", "")).lower()
    bullets = " ".join(purchased_product.get("BulletPoints") or []).lower()
    description = str(purchased_product.get("Description", "")).lower()
    matches = 0
    for g_attr in goal_attrs:
        if any(token_set_ratio(p_attr, g_attr) > MATCH_THRESHOLD for p_attr in purchased_attrs):
            matches += 1
        elif g_attr in title or g_attr in bullets or g_attr in description:
            matches += 1
    r_att = matches / len(goal_attrs) if goal_attrs else None
    return r_att, matches


def get_option_reward(purchased_options: Iterable[Any], goal_options: Iterable[Any]) -> tuple[float | None, int]:
    """``(r_option, N_opt)``: goal options matched by a chosen option (colour-normalised, fuzzy).

    ``goal_options`` items are matched as given: strings (human goals) or ``(name, value)``
    pairs (synthetic goals, see the module docstring).
    """
    purchased = [normalize_color(o) for o in purchased_options]
    goals = [normalize_color(o) for o in goal_options]
    matches = 0
    for g_option in goals:
        for p_option in purchased:
            if token_set_ratio(p_option, g_option) > MATCH_THRESHOLD:
                matches += 1
                break
    r_option = matches / len(goals) if goals else None
    return r_option, matches


@overload
def get_reward(
    purchased_product: Mapping[str, Any],
    goal: Mapping[str, Any],
    price: float,
    options: Mapping[str, str],
    *,
    verbose: Literal[False] = False,
    nouns: Callable[[str], list[str]] | None = None,
) -> float: ...


@overload
def get_reward(
    purchased_product: Mapping[str, Any],
    goal: Mapping[str, Any],
    price: float,
    options: Mapping[str, str],
    *,
    verbose: Literal[True],
    nouns: Callable[[str], list[str]] | None = None,
) -> tuple[float, dict[str, Any]]: ...


@overload
def get_reward(
    purchased_product: Mapping[str, Any],
    goal: Mapping[str, Any],
    price: float,
    options: Mapping[str, str],
    *,
    verbose: bool,
    nouns: Callable[[str], list[str]] | None = None,
) -> float | tuple[float, dict[str, Any]]: ...


def get_reward(
    purchased_product: Mapping[str, Any],
    goal: Mapping[str, Any],
    price: float,
    options: Mapping[str, str],
    *,
    verbose: bool = False,
    nouns: Callable[[str], list[str]] | None = None,
) -> float | tuple[float, dict[str, Any]]:
    """Score a purchase: the reward in [0, 1], or with ``verbose`` ``(reward, breakdown)``: the
    original's signature and return types, so that code written against
    ``web_agent_site.engine.goal.get_reward`` runs unchanged.

    Args:
        purchased_product: the bought product (loaded form: ``name, Title, query,
            product_category, Attributes, BulletPoints, Description``).
        goal: ``name, query, product_category, attributes, goal_options (dict | list),
            price_upper``.
        price: the price paid (the catalog's drawn price of the product).
        options: the chosen options ``{option name: value}`` (only values are matched).
        verbose: return the breakdown too: the original's keys (``r_type``, ``r_att``, ``w_att``,
            ``query_match``, ``category_match``, ``title_score``, ``r_option`` (``None`` when the
            goal has no option), ``w_option``, ``r_price`` (bool), ``w_price``) and the counts
            ``num_attr_matches``, ``num_option_matches``.
        nouns: title-noun tagger (default: :func:`~progpo_envs.webshop.title_nouns.default_title_nouns`);
            an addition of this package, keyword only.
    """
    type_info = get_type_reward(purchased_product, goal, nouns)
    upper = goal["price_upper"]
    r_price = (price <= upper) if upper > 0 else None
    r_att, n_att = get_attribute_reward(purchased_product, goal)
    goal_options = goal["goal_options"]
    r_option, n_opt = get_option_reward(
        list(options.values()),
        goal_options.items() if isinstance(goal_options, dict) else goal_options,
    )
    denominator = len(goal["attributes"]) + len(goal_options) + 1
    reward = (n_att + n_opt + int(bool(r_price))) / denominator * type_info["r_type"]
    if not verbose:
        return reward
    info: dict[str, Any] = {
        "r_type": type_info["r_type"],
        "r_att": r_att,
        "w_att": len(goal["attributes"]) / denominator,
        "query_match": type_info["query_match"],
        "category_match": type_info["category_match"],
        "title_score": type_info["title_score"],
        "r_option": r_option,
        "w_option": len(goal_options) / denominator,
        "r_price": r_price,
        "w_price": 1 / denominator,
        "num_attr_matches": n_att,
        "num_option_matches": n_opt,
    }
    return reward, info
