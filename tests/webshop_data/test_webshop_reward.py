"""The WebShop reward: hand-computed purchases, the original's quirks, and the fuzzy scorer.

Goal used by most cases (|A| = 2 attributes, |O| = 2 options, so the denominator is 5):
    name "Acme Women's Running Shoes" -> rule nouns [acme, women, running, shoes]
"""

from __future__ import annotations

import random

import pytest
from thefuzz import fuzz

from progpo_envs.webshop import reward as reward_mod
from progpo_envs.webshop.data import convert_product, draw_prices
from progpo_envs.webshop.reward import (
    get_option_reward,
    get_reward,
    get_type_reward,
    normalize_color,
    token_set_ratio,
)
from progpo_envs.webshop.title_nouns import TitleNouns

NOUNS = TitleNouns(backend="rules")
SHOES_CAT = "Clothing, Shoes & Jewelry › Women › Shoes › Athletic › Running"


def _goal(**over):
    """The goal the test product answers: navy blue, size 8.5, under $50, non slip with arch support."""
    goal = dict(
        asin="B0GOAL0001", name="Acme Women's Running Shoes", query="women's athletic shoes", category="fashion"
    )
    goal.update(product_category=SHOES_CAT, attributes=["non slip", "arch support"])
    goal.update(goal_options={"color": "navy blue", "size": "8.5"}, price_upper=50.0)
    return {**goal, **over}


def _product(**over):
    product = {
        "asin": "B0GOAL0001",
        "name": "Acme Women's Running Shoes",
        "Title": "Acme Women's Running Shoes",
        "query": "women's athletic shoes",
        "product_category": SHOES_CAT,
        "Attributes": ["non slip", "arch support", "memory foam"],
        "BulletPoints": ["Breathable mesh upper"],
        "Description": "A light shoe for daily runs.",
    }
    product.update(over)
    if "name" in over and "Title" not in over:
        product["Title"] = over["name"]
    return product


def score(product, goal, price, options):
    return get_reward(product, goal, price, options, nouns=NOUNS, verbose=True)


def test_exact_match_scores_one() -> None:
    r, info = score(_product(), _goal(), 39.0, {"color": "navy blue", "size": "8.5"})
    assert r == 1.0
    assert (info["r_type"], info["r_att"], info["r_option"], info["r_price"]) == (1.0, 1.0, 1.0, True)
    assert info["w_att"] == 2 / 5 and info["w_option"] == 2 / 5 and info["w_price"] == 1 / 5
    assert info["query_match"] and info["category_match"] and info["title_score"] == 1.0


def test_wrong_option_loses_one_fifth() -> None:
    # colour "navy blue" -> "blue" still matches the pair ("color", "navy blue"); size 10 != 8.5
    r, info = score(_product(), _goal(), 39.0, {"color": "navy blue", "size": "10"})
    assert r == pytest.approx(4 / 5) and info["r_option"] == 0.5
    assert info["num_option_matches"] == 1


def test_no_option_chosen() -> None:
    r, info = score(_product(), _goal(), 39.0, {})
    assert r == pytest.approx(3 / 5) and info["r_option"] == 0.0


def test_over_price_loses_the_price_point() -> None:
    r, info = score(_product(), _goal(), 55.0, {"color": "navy blue", "size": "8.5"})
    assert r == pytest.approx(4 / 5) and info["r_price"] is False
    # the cap itself is allowed (price <= price_upper)
    assert score(_product(), _goal(), 50.0, {"color": "navy blue", "size": "8.5"})[0] == 1.0


def test_attribute_only_in_description_counts() -> None:
    product = _product(Attributes=[], Description="Cushioned insole with arch support for long runs.")
    r, info = score(product, _goal(), 39.0, {"color": "navy blue", "size": "8.5"})
    # "arch support" found in the description, "non slip" nowhere: N_att = 1
    assert r == pytest.approx(4 / 5) and info["r_att"] == 0.5


def test_attribute_in_title_and_bullets_counts() -> None:
    product = _product(
        name="Acme Non Slip Women's Running Shoes",
        Attributes=["DUMMY_ATTR"],
        BulletPoints=["ARCH SUPPORT: keeps feet comfortable"],
    )
    r, info = score(product, _goal(), 39.0, {"color": "navy blue", "size": "8.5"})
    assert info["r_att"] == 1.0 and r == 1.0


def test_attribute_fuzzy_match_is_token_set() -> None:
    # "arch-support" -> "arch support": 100; "slip resistant" vs "non slip": 57 -> no match
    product = _product(Attributes=["arch-support", "slip resistant"])
    r, info = score(product, _goal(), 39.0, {"color": "navy blue", "size": "8.5"})
    assert info["num_attr_matches"] == 1 and r == pytest.approx(4 / 5)


def test_other_product_same_category() -> None:
    # different query, category shares Clothing..Women..Shoes, nouns {women, shoes} of 4 -> 0.5
    flats = "Clothing, Shoes & Jewelry › Women › Shoes › Flats"
    other = dict(asin="B0OTHER001", name="Zeta Women's Walking Shoes", query="women's flats", product_category=flats)
    product = _product(**other, Attributes=["non slip"])
    r, info = score(product, _goal(), 30.0, {"color": "black", "size": "8.5"})
    assert info["title_score"] == 0.5 and info["category_match"] and not info["query_match"]
    assert info["r_type"] == 1.0
    # N_att = 1 (non slip), N_opt = 1 (size), price ok: 3 / 5
    assert r == pytest.approx(3 / 5)


def test_unrelated_product_scores_zero() -> None:
    cable = dict(asin="B0CABLE001", name="Belsa HDMI Cable", query="hdmi cables")
    product = _product(
        **cable, product_category="Electronics › Accessories › Cables", Attributes=["non slip", "arch support"]
    )
    r, info = score(product, _goal(), 9.0, {"color": "navy blue", "size": "8.5"})
    assert info["title_score"] == 0.0 and info["r_type"] == 0.0 and r == 0.0


def test_r_type_half_when_nothing_matches_well() -> None:
    goal = _goal(name="Acme Trail Runner Sneaker Boots")  # 5 nouns
    product = _product(
        name="Kappa Sneaker Lace Set", query="shoe care", product_category="Clothing, Shoes & Jewelry › Shoe Care"
    )
    r, info = score(product, goal, 39.0, {"color": "navy blue", "size": "8.5"})
    # 1 shared noun of 5 = 0.2 (not > 0.2), 1 shared category level, query differs
    assert info["title_score"] == pytest.approx(0.2) and info["r_type"] == 0.5
    assert r == pytest.approx(0.5)


def test_r_type_tenth_when_title_overlap_is_tiny() -> None:
    goal = _goal(name="Acme Trail Runner Sneaker Boots Hiker Sole Grip Mesh Heel Toe Lace")
    product = _product(name="Omega Lace Pack")  # same query and category, 1 of 12 nouns
    r, info = score(product, goal, 39.0, {"color": "navy blue", "size": "8.5"})
    assert info["title_score"] == pytest.approx(1 / 12) and info["r_type"] == 0.1
    assert r == pytest.approx(0.1)


def test_goal_name_without_nouns_gives_title_score_point_two() -> None:
    goal = _goal(name="Extra Large")
    t = get_type_reward(_product(query="other", product_category="X › Y"), goal, NOUNS)
    assert t["title_score"] == 0.2 and t["r_type"] == 0.5


def test_name_value_pair_quirk_for_dict_goal_options() -> None:
    goal = _goal(attributes=["non slip"], goal_options={"size": "xl"})
    # the pair ("size", "xl") is stringified to "size xl": a chosen "xl" scores 100
    r, info = score(_product(), goal, 39.0, {"size": "xl"})
    assert r == 1.0 and info["r_option"] == 1.0
    # "x-large" is not "xl": token_set_ratio("x large", "size xl") = 43
    assert score(_product(), goal, 39.0, {"size": "x-large"})[1]["r_option"] == 0.0
    # and the pair makes "large" match a goal "x-large" (tokens {size, x, large})
    goal2 = _goal(attributes=["non slip"], goal_options={"size": "x-large"})
    assert score(_product(), goal2, 39.0, {"size": "large"})[0] == 1.0
    # the option *name* is matched too: choosing a value equal to the name matches
    assert get_option_reward(["size"], {"size": "8.5"}.items()) == (1.0, 1)


def test_colour_normalization() -> None:
    assert normalize_color("navy blue") == "blue"
    assert normalize_color("violet lavender") == "lavender"  # COLOR_SET order, not text order
    assert normalize_color("black forest") == "black"
    assert normalize_color("123alabaster") == "alabaster"
    assert normalize_color("webshop") == "webshop" and normalize_color("") == ""
    # human goals (list of strings): "navy blue" and a chosen "royal blue" both become "blue"
    assert get_option_reward(["royal blue"], ["navy blue"]) == (1.0, 1)
    # a pair equal to a colour name is normalised: ("color", "navy") -> "navy";
    # the chosen "midnight navy" -> "midnight" (listed first): no match any more
    goal = _goal(attributes=["non slip"], goal_options={"color": "navy"})
    assert score(_product(), goal, 39.0, {"color": "midnight navy"})[1]["r_option"] == 0.0
    # and "blueberry" -> "blue" misses the goal pair ("flavor name", "blueberry")
    goal = _goal(attributes=["non slip"], goal_options={"flavor name": "blueberry"})
    r, info = score(_product(), goal, 39.0, {"flavor name": "blueberry"})
    assert info["r_option"] == 0.0 and r == pytest.approx(2 / 3)


def test_range_price_drawn_once_at_load() -> None:
    raw = {"asin": "B0RANGE001", "name": "Acme Women's Running Shoes", "category": "fashion", "pricing": "$10.00$30.00"}
    raw.update(query="women's athletic shoes", product_category=SHOES_CAT)
    raw.update(small_description=[], full_description="", customization_options="")
    product = convert_product(raw, {"attributes": ["non slip", "arch support"]})
    prices = draw_prices([product], random.Random(0))
    expected = random.Random(0).uniform(10.0, 30.0)  # 26.888...
    assert prices["B0RANGE001"] == expected == product["Price"]
    goal = _goal(goal_options={}, price_upper=20.0)
    r, info = score(product, goal, prices["B0RANGE001"], {})
    assert info["r_price"] is False and r == pytest.approx(2 / 3)
    r, info = score(product, _goal(goal_options={}, price_upper=30.0), prices["B0RANGE001"], {})
    assert info["r_price"] is True and r == 1.0


def test_human_goal_without_options() -> None:
    goal = _goal(goal_options=[])
    r, info = score(_product(), goal, 39.0, {"color": "red"})
    assert r == 1.0 and info["r_option"] is None
    assert info["w_option"] == 0.0


def test_the_original_signature_and_return_types() -> None:
    """As ``web_agent_site.engine.goal.get_reward``: the reward alone by default (a float), and
    ``(reward, info)`` with ``verbose=True``, whose info holds every key of the original's."""
    r = get_reward(_product(), _goal(), 39.0, {"size": "8.5"}, nouns=NOUNS)
    assert isinstance(r, float) and r == pytest.approx(4 / 5)
    same, info = get_reward(_product(), _goal(), 39.0, {"size": "8.5"}, verbose=True, nouns=NOUNS)
    assert same == r
    assert {
        "r_type",
        "r_att",
        "w_att",
        "query_match",
        "category_match",
        "title_score",
        "r_option",
        "w_option",
        "r_price",
        "w_price",
    } <= set(info)
    assert info["w_att"] + info["w_option"] + info["w_price"] == pytest.approx(1.0)


def test_cases_in_the_originals_format() -> None:
    """The original's test layout: ``get_reward(purchased_product, goal, price, options)`` compared
    with its expected total, and ``verbose=True`` unpacked as two values."""
    cases = [  # (goal over, product over, price, options, expected reward)
        ({}, {}, 39.0, {"color": "navy blue", "size": "8.5"}, 1.0),
        ({}, {}, 61.0, {"color": "navy blue", "size": "8.5"}, 4 / 5),  # over the price limit
        ({}, {}, 39.0, {"size": "8.5"}, 4 / 5),  # one option missing
        ({"goal_options": []}, {}, 39.0, {"color": "red"}, 1.0),
    ]
    for goal_over, product_over, price, options, expected in cases:
        goal, product = _goal(**goal_over), _product(**product_over)
        total_reward = get_reward(product, goal, price, options)
        assert total_reward == pytest.approx(expected)
        total_reward, info = get_reward(product, goal, price, options, verbose=True)
        assert total_reward == pytest.approx(expected) and isinstance(info, dict)


def test_default_noun_tagger_is_used_without_argument() -> None:
    r, info = get_reward(_product(), _goal(), 39.0, {"color": "navy blue", "size": "8.5"}, verbose=True)
    assert r == 1.0 and info["title_score"] == 1.0


PAIRS = [
    ("xl", ("size", "xl")),
    ("navy blue", "navy"),
    ("Größe XL", "grosse xl"),
    ("", "abc"),
    ("arch support", "arch-support"),
    ("12 fl oz (pack of 2)", ("size", "12 fl oz (pack of 2)")),
    ("black", ("color", "navy blue")),
    ("café crème", "cafe creme"),
    (("a", "b"), ("b", "a")),
    ("slip resistant", "non slip"),
    ("leak proof", "leakproof"),
    ("100% cotton", "cotton"),
]


@pytest.mark.parametrize("a,b", PAIRS)
def test_token_set_ratio_equals_thefuzz(a, b) -> None:
    assert token_set_ratio(a, b) == fuzz.token_set_ratio(a, b)


@pytest.mark.parametrize("a,b", PAIRS)
def test_rapidfuzz_fallback_equals_thefuzz(a, b, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_thefuzz(name, *args, **kwargs):
        if name.startswith("thefuzz"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_thefuzz)
    fallback = reward_mod._thefuzz_scorer()
    monkeypatch.setattr(builtins, "__import__", real_import)
    assert fallback is not fuzz.token_set_ratio
    assert fallback(a, b) == fuzz.token_set_ratio(a, b)


def test_every_generated_goal_is_attainable(catalog_1k) -> None:
    # buying the goal's product with the goal's options scores exactly 1 for every goal
    for goal in catalog_1k.goals:
        product = catalog_1k.by_asin[goal["asin"]]
        r, info = get_reward(
            product, goal, catalog_1k.prices[goal["asin"]], dict(goal["goal_options"]), nouns=NOUNS, verbose=True
        )
        assert r == 1.0, (goal["instruction_text"], info)


def test_vocabulary_option_values_survive_the_colour_quirk() -> None:
    # the generator avoids values like "blueberry" ("blue" after normalisation misses the goal
    # pair ("flavor name", "blueberry")), which no purchase could ever match
    from progpo_envs.webshop.catalog_vocab import OPTION_POOLS, PRODUCT_TYPES

    for ptype in PRODUCT_TYPES:
        for name, pool in ptype.options:
            for value in OPTION_POOLS[pool]:
                v = value.strip().replace("/", " | ").lower()
                assert get_option_reward([v], [(name.lower(), v)]) == (1.0, 1), value
    assert get_option_reward(["blueberry"], [("flavor name", "blueberry")]) == (0.0, 0)


def test_fuzzy_matches_need_a_ratio_strictly_above_85():
    """The original matches a goal attribute or option when ``token_set_ratio > 85``: a pair at
    exactly 85, which real products reach, does not match; one at 86 does."""
    from progpo_envs.webshop.reward import get_attribute_reward, get_option_reward, token_set_ratio

    at, above = ("stainlesssteelcupholder", "stainlesssteelcup"), ("reds", "red")
    assert token_set_ratio(*at) == 85 and token_set_ratio(*above) == 86
    product = {"Attributes": [at[0], above[0]], "Title": "", "BulletPoints": [], "Description": ""}
    assert get_attribute_reward(product, {"attributes": [at[1]]}) == (0.0, 0)
    assert get_attribute_reward(product, {"attributes": [above[1]]}) == (1.0, 1)
    # options are colour-normalised first ("tan" is in "stainless"): a colour-free pair at 85
    option_at, option_above = ("replacementpack", "replacement"), ("replacements", "replacement")
    assert token_set_ratio(*option_at) == 85 and token_set_ratio(*option_above) > 85
    assert get_option_reward([option_at[0]], [option_at[1]]) == (0.0, 0)
    assert get_option_reward([option_above[0]], [option_above[1]]) == (1.0, 1)
