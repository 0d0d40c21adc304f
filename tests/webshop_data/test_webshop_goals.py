"""Goal construction as the original: option combinations, texts, price caps, weights, shuffle;
real human instructions as instruction-only goals."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from progpo_envs.webshop.data import WebShopDataError
from progpo_envs.webshop.goals import (
    NO_PRICE_CAP,
    get_human_goals,
    get_synthetic_goals,
    load_human_instructions,
    parse_human_instruction,
    price_cap,
    shuffle_goals,
)


def _product(asin, instruction, attrs, options):
    return {
        "asin": asin,
        "category": "fashion",
        "query": "men's jeans",
        "name": f"{asin} Jeans",
        "Title": f"{asin} Jeans",
        "product_category": "Clothing › Men › Jeans",
        "instruction_text": instruction,
        "instruction_attributes": attrs,
        "options": options,
    }


def test_one_goal_per_option_combination_with_original_text() -> None:
    products = [
        _product(
            "B0A",
            "Find me slim fit men's jeans",
            ["slim fit", "machine wash"],
            {"size": ["30w x 30l", "32w x 32l"], "color": ["black", "blue"]},
        ),
        _product("B0B", None, None, {"size": ["s"]}),  # no instruction: no goal
        _product("B0C", "Find me machine wash men's jeans", ["machine wash"], {}),  # one goal
    ]
    goals = get_synthetic_goals(products, {"B0A": 23.0, "B0C": 995.0}, rng=random.Random(1))
    assert [g["asin"] for g in goals] == ["B0A"] * 4 + ["B0C"]
    # option names sorted, values in the product's order, itertools.product order
    assert [g["goal_options"] for g in goals[:4]] == [
        {"color": "black", "size": "30w x 30l"},
        {"color": "black", "size": "32w x 32l"},
        {"color": "blue", "size": "30w x 30l"},
        {"color": "blue", "size": "32w x 32l"},
    ]
    cap = goals[0]["price_upper"]
    assert all(g["price_upper"] == cap for g in goals[:4]) and cap in (40.0, 50.0, 60.0)
    assert goals[0]["instruction_text"] == (
        f"Find me slim fit men's jeans with color: black, and size: 30w x 30l, and price lower than {cap:.2f} dollars"
    )
    # price 995: fewer than two caps above it -> no price text, cap 1000000
    assert goals[4]["instruction_text"] == "Find me machine wash men's jeans"
    assert goals[4]["price_upper"] == NO_PRICE_CAP and goals[4]["goal_options"] == {}
    # weight = mean over attributes of 1 / count(goals with that attribute):
    # "slim fit" in 4 goals, "machine wash" in 5
    assert goals[0]["weight"] == pytest.approx((1 / 4 + 1 / 5) / 2)
    assert goals[4]["weight"] == pytest.approx(1 / 5)
    assert goals[0]["name"] == "B0A Jeans" and goals[0]["attributes"] == ["slim fit", "machine wash"]
    assert set(goals[0]) == {
        "asin",
        "category",
        "query",
        "name",
        "product_category",
        "instruction_text",
        "attributes",
        "price_upper",
        "goal_options",
        "weight",
    }


def test_price_cap_draws_from_the_next_four_multiples_of_ten() -> None:
    seen = {price_cap(23.0, random.Random(s))[0] for s in range(200)}
    assert seen == {40.0, 50.0, 60.0}  # larger of two of {30, 40, 50, 60}
    assert price_cap(20.0, random.Random(0))[0] in {40.0, 50.0, 60.0}  # strictly above
    assert price_cap(975.0, random.Random(0)) == (990.0, ", and price lower than 990.00 dollars")
    assert price_cap(985.0, random.Random(0)) == (NO_PRICE_CAP, "")


def test_no_prices_means_no_cap() -> None:
    goals = get_synthetic_goals([_product("B0A", "Find me x", ["x"], {})], None)
    assert goals[0]["price_upper"] == NO_PRICE_CAP and goals[0]["instruction_text"] == "Find me x"


def test_shuffle_is_the_seeded_original_shuffle() -> None:
    goals = [{"i": i} for i in range(20)]
    expected = list(goals)
    random.Random(233).shuffle(expected)
    assert shuffle_goals(goals) == expected and goals == [{"i": i} for i in range(20)]


def test_human_goals_keep_list_options_and_strip_dots() -> None:
    product = {"asin": "B0H", "category": "beauty", "query": "q", "name": "N", "product_category": "A › B"}
    instruction = {"instruction": "i want red lipstick.", "instruction_attributes": ["lipstick"]}
    product["instructions"] = [{**instruction, "instruction_options": ["red"]}]
    goals = get_human_goals([product], {"B0H": 5.0}, rng=random.Random(0))
    assert len(goals) == 1 and goals[0]["goal_options"] == ["red"] and goals[0]["weight"] == 1
    assert goals[0]["instruction_text"].startswith("i want red lipstick, and price lower than")


def test_real_human_instructions_parse(shared_data: Path) -> None:
    path = shared_data / "webshop-real" / "human_goals.json"
    texts = load_human_instructions(path)
    assert len(texts) == 12087
    vocab = ["machine wash", "non slip", "gluten free", "long lasting", "high quality"]
    goals = [parse_human_instruction(t, vocab) for t in texts]
    assert all(g["instruction_text"] and g["asin"] is None for g in goals)
    sizes = [g for g in goals if "size" in g["goal_options"]]
    colors = [g for g in goals if "color" in g["goal_options"]]
    assert len(sizes) > 1500 and len(colors) > 1400
    assert sum(bool(g["attributes"]) for g in goals) > 500
    g = parse_human_instruction("looking for grand court adidas for everyday wear size 9 in white")
    assert g["goal_options"] == {"size": "9"}
    g = parse_human_instruction("im looking for a queen size bedspread set in the color redwood")
    assert g["goal_options"] == {"size": "queen", "color": "redwood"}
    g = parse_human_instruction("gluten free snacks under 30 dollars", vocab)
    assert g["price_upper"] == 30.0 and g["attributes"] == ["gluten free"]


def test_bad_human_instruction_files(tmp_path: Path) -> None:
    with pytest.raises(WebShopDataError, match="not found"):
        load_human_instructions(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    with pytest.raises(WebShopDataError, match="not valid JSON"):
        load_human_instructions(bad)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps([1, 2]))
    with pytest.raises(WebShopDataError, match="list of instruction strings"):
        load_human_instructions(wrong)
