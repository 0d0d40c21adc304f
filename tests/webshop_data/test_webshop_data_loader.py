"""load_catalog: embedded catalog, original files (real attributes), errors, determinism, splits."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from progpo_envs.webshop.catalog_gen import generate_catalog, write_catalog
from progpo_envs.webshop.data import (
    Catalog,
    WebShopDataError,
    convert_product,
    load_catalog,
    parse_pricing,
)

PRODUCT_KEYS = {
    "asin",
    "name",
    "category",
    "query",
    "product_category",
    "Title",
    "Description",
    "BulletPoints",
    "Reviews",
    "Rating",
    "MainImage",
    "options",
    "option_to_image",
    "pricing",
    "Price",
    "price_tag",
    "Attributes",
    "instruction_text",
    "instruction_attributes",
}


def test_embedded_products_have_the_original_loaded_form(catalog_1k: Catalog) -> None:
    cat = catalog_1k
    assert len(cat.products) == 1000 and cat.source == "generated(seed=0)"
    assert set(cat.by_asin) == {p["asin"] for p in cat.products}
    for p in cat.products:
        assert PRODUCT_KEYS <= set(p)
        assert p["Title"] == p["name"] and p["Reviews"] == [] and p["Rating"] == "N.A."
        assert p["Description"] == p["full_description"]
        assert p["BulletPoints"] == p["small_description"]
        assert all(isinstance(x, float) for x in p["pricing"]) and 1 <= len(p["pricing"]) <= 2
        assert p["Price"] == cat.prices[p["asin"]]
        assert p["pricing"][0] <= p["Price"] <= p["pricing"][-1]
        for name, values in p["options"].items():
            assert name == name.lower()
            assert all(v == v.lower() and "/" not in v for v in values)
            assert all(v in p["option_to_image"] for v in values)
    # products without pricing cost 100.0, as the original
    assert any(p["pricing"] == [100.0] and p["price_tag"] == "$100.0" for p in cat.products)
    ranged = [p for p in cat.products if len(p["pricing"]) == 2]
    assert ranged and len({round(p["Price"], 6) for p in ranged}) > len(ranged) // 2
    assert all(" to $" in p["price_tag"] for p in ranged)


def test_convert_product_matches_the_original_loader_rules() -> None:
    raw = {
        "asin": "B0TEST0001",
        "name": "Acme Wool Socks",
        "category": "fashion",
        "query": "  Men's Socks ",
        "product_category": "Clothing › Men › Socks",
        "pricing": "$12.50$15.00",
        "small_description": "one bullet",
        "full_description": "Warm socks.",
        "images": ["http://img/1.jpg"],
        "customization_options": {
            "Color": [{"value": " Navy/Grey ", "image": "http://img/c.jpg"}],
            "Size": [{"value": "Large"}],
            "Style": None,
        },
    }
    p = convert_product(
        raw, {"attributes": ["wool"], "instruction": "Find me wool men's socks", "instruction_attributes": ["wool"]}
    )
    assert p["query"] == "men's socks"
    assert p["options"] == {"color": ["navy | grey"], "size": ["large"]}
    assert p["option_to_image"] == {"navy | grey": "http://img/c.jpg", "large": None}
    assert p["BulletPoints"] == ["one bullet"] and p["MainImage"] == "http://img/1.jpg"
    assert p["pricing"] == [12.5, 15.0] and p["price_tag"] == "$12.5 to $15.0"
    assert p["Attributes"] == ["wool"] and p["instruction_attributes"] == ["wool"]
    # not listed in items_ins_v2: the original's DUMMY_ATTR and no instruction
    q = convert_product(raw, None)
    assert q["Attributes"] == ["DUMMY_ATTR"] and q["instruction_text"] is None
    # listed with empty attributes: empty list (not DUMMY_ATTR)
    assert convert_product(raw, {"attributes": []})["Attributes"] == []


@pytest.mark.parametrize(
    "text,expected",
    [
        ("$19.99", [19.99]),
        ("$19.99$27.99", [19.99, 27.99]),
        ("", [100.0]),
        (None, [100.0]),
        ("$1,299.00", [1299.0]),
        ("$5$6$7", [5.0, 6.0]),
        ("$abc", [100.0]),
        ("$1.2.3$4", [4.0]),
        ("$19.99 - $27.99", [19.99, 27.99]),
        ([3, 4.5], [3.0, 4.5]),
        ([], [100.0]),
        (7, [100.0]),
    ],
)
def test_parse_pricing(text, expected) -> None:
    assert parse_pricing(text) == expected


def test_loading_is_deterministic_and_seeded() -> None:
    a = load_catalog(num_products=400, seed=5)
    b = load_catalog(num_products=400, seed=5)
    assert a.prices == b.prices and a.goals == b.goals
    c = load_catalog(num_products=400, seed=6)
    assert c.goals != a.goals


def test_goals_and_splits(catalog_1k: Catalog) -> None:
    cat = catalog_1k
    assert len(cat.goals) > 1000
    with_ins = [p for p in cat.products if p["instruction_text"]]
    expected = sum(len(list(itertools.product(*p["options"].values()))) for p in with_ins)
    assert len(cat.goals) == expected
    assert cat.split("test") == list(range(500))
    assert cat.split("train") == list(range(500, len(cat.goals)))
    assert cat.split("all") == list(range(len(cat.goals)))
    with pytest.raises(ValueError, match="unknown split"):
        cat.split("valid")
    assert cat.weights == [g["weight"] for g in cat.goals]
    for g in cat.goals[:50]:
        product = cat.by_asin[g["asin"]]
        assert g["instruction_text"].startswith(product["instruction_text"])
        assert g["name"] == product["Title"] and g["attributes"] == product["instruction_attributes"]
        assert set(g["goal_options"]) == set(product["options"])


def test_written_files_load_like_the_embedded_catalog(tmp_path: Path) -> None:
    write_catalog(tmp_path, num_products=300, seed=4)
    from_files = load_catalog(tmp_path, num_products=300, seed=4)
    embedded = load_catalog(num_products=300, seed=4)
    assert from_files.products == embedded.products
    assert from_files.goals == embedded.goals and from_files.prices == embedded.prices
    assert from_files.source == str(tmp_path)


def test_env_var_selects_the_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_catalog(tmp_path, num_products=60, seed=1)
    monkeypatch.setenv("WEBSHOP_DATA", str(tmp_path))
    cat = load_catalog(num_products=60, seed=1)
    assert cat.source == str(tmp_path) and len(cat.products) == 60


def test_num_products_truncates_a_bigger_file(tmp_path: Path) -> None:
    items, ins = generate_catalog(80, 0)
    (tmp_path / "items_shuffle.json").write_text(json.dumps(items))
    (tmp_path / "items_ins_v2.json").write_text(json.dumps(ins))
    assert len(load_catalog(tmp_path, num_products=30).products) == 30
    assert len(load_catalog(tmp_path, num_products=None).products) == 80


def test_duplicate_and_bad_asins_are_skipped(tmp_path: Path) -> None:
    items, ins = generate_catalog(10, 0)
    bad = dict(items[1], asin="nan")
    long = dict(items[2], asin="B0TOOLONG123")
    (tmp_path / "items_shuffle.json").write_text(json.dumps(items + [items[0], bad, long]))
    (tmp_path / "items_ins_v2.json").write_text(json.dumps(ins))
    cat = load_catalog(tmp_path, num_products=None)
    assert [p["asin"] for p in cat.products] == [p["asin"] for p in items]


def _real_subset(tmp_path: Path, shared_data: Path, n: int = 120) -> tuple[dict, list]:
    """A tiny items_shuffle keyed to real asins of items_ins_v2_1000 (generated text)."""
    real_ins = json.loads((shared_data / "webshop-real" / "items_ins_v2_1000.json").read_text())
    asins = list(real_ins)[:n]
    items, _ = generate_catalog(n, 0)
    for item, asin in zip(items, asins):
        item["asin"] = asin
    (tmp_path / "items_shuffle_1000.json").write_text(json.dumps(items))
    (tmp_path / "items_ins_v2_1000.json").write_text(
        (shared_data / "webshop-real" / "items_ins_v2_1000.json").read_text()
    )
    return real_ins, items


def test_real_attributes_and_instructions_load(tmp_path: Path, shared_data: Path) -> None:
    real_ins, items = _real_subset(tmp_path, shared_data)
    cat = load_catalog(tmp_path, num_products=1000, seed=0)
    assert len(cat.products) == len(items)
    n_ins = 0
    for p in cat.products:
        entry = real_ins[p["asin"]]
        assert p["Attributes"] == entry["attributes"]
        assert p["instruction_text"] == entry.get("instruction")
        assert p["instruction_attributes"] == entry.get("instruction_attributes")
        n_ins += "instruction" in entry
    assert n_ins > 20
    expected = sum(len(list(itertools.product(*p["options"].values()))) for p in cat.products if p["instruction_text"])
    assert len(cat.goals) == expected
    for g in cat.goals:
        assert g["instruction_text"].startswith(real_ins[g["asin"]]["instruction"])
        assert g["attributes"] == real_ins[g["asin"]]["instruction_attributes"]
        if g["price_upper"] != 1000000:
            assert g["instruction_text"].endswith(f"and price lower than {g['price_upper']:.2f} dollars")
            price = cat.prices[g["asin"]]
            assert price < g["price_upper"] <= price + 40


def test_human_goals_from_items_human_ins(tmp_path: Path) -> None:
    items, ins = generate_catalog(20, 0)
    (tmp_path / "items_shuffle.json").write_text(json.dumps(items))
    (tmp_path / "items_ins_v2.json").write_text(json.dumps(ins))
    human = {
        items[0]["asin"]: [
            {
                "instruction": "i want a thing in red.",
                "instruction_attributes": ["red thing"],
                "instruction_options": ["red"],
            },
            {"instruction": "skipped: no attributes", "instruction_attributes": [], "instruction_options": []},
        ],
        items[3]["asin"]: [
            {"instruction": "another one", "instruction_attributes": ["a", "b"], "instruction_options": []},
        ],
    }
    with pytest.raises(WebShopDataError, match="items_human_ins.json"):
        load_catalog(tmp_path, num_products=None, human_goals=True)
    (tmp_path / "items_human_ins.json").write_text(json.dumps(human))
    cat = load_catalog(tmp_path, num_products=None, human_goals=True)
    assert len(cat.goals) == 2 and cat.human_goals
    texts = sorted(g["instruction_text"].split(", and price")[0] for g in cat.goals)
    assert texts == ["another one", "i want a thing in red"]
    assert all(g["weight"] == 1 for g in cat.goals)
    red = next(g for g in cat.goals if g["goal_options"] == ["red"])
    assert red["asin"] == items[0]["asin"] and red["name"] == items[0]["name"]


def test_missing_data_dir_is_one_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(WebShopDataError) as exc:
        load_catalog(missing)
    assert str(missing) in str(exc.value) and "WEBSHOP_DATA" in str(exc.value)


def test_missing_file_is_one_clear_error(tmp_path: Path) -> None:
    write_catalog(tmp_path, num_products=10, seed=0)
    (tmp_path / "items_ins_v2_10.json").unlink()
    with pytest.raises(WebShopDataError, match=r"no items_ins_v2\*\.json in"):
        load_catalog(tmp_path, num_products=10)


@pytest.mark.parametrize("which", ["items_shuffle_10.json", "items_ins_v2_10.json"])
def test_corrupt_json_is_one_clear_error(tmp_path: Path, which: str) -> None:
    write_catalog(tmp_path, num_products=10, seed=0)
    (tmp_path / which).write_text('[{"asin": "B0', encoding="utf-8")
    with pytest.raises(WebShopDataError) as exc:
        load_catalog(tmp_path, num_products=10)
    assert which in str(exc.value) and "not valid JSON" in str(exc.value)


def test_wrong_schema_is_one_clear_error(tmp_path: Path) -> None:
    write_catalog(tmp_path, num_products=10, seed=0)
    (tmp_path / "items_shuffle_10.json").write_text('{"not": "a list"}')
    with pytest.raises(WebShopDataError, match="expected a JSON list of products"):
        load_catalog(tmp_path, num_products=10)
    write_catalog(tmp_path, num_products=10, seed=0)
    (tmp_path / "items_ins_v2_10.json").write_text("[]")
    with pytest.raises(WebShopDataError, match="items_ins_v2 schema"):
        load_catalog(tmp_path, num_products=10)


def test_ambiguous_files_are_reported(tmp_path: Path) -> None:
    write_catalog(tmp_path, num_products=10, seed=0)
    write_catalog(tmp_path, num_products=12, seed=0)
    with pytest.raises(WebShopDataError, match="several items_shuffle"):
        load_catalog(tmp_path, num_products=11)
    assert len(load_catalog(tmp_path, num_products=12).products) == 12


def test_embedded_human_goals_and_bad_size_are_rejected() -> None:
    with pytest.raises(WebShopDataError, match="items_human_ins.json"):
        load_catalog(human_goals=True)
    with pytest.raises(ValueError):
        load_catalog(num_products=0)


def test_real_goals_score_one_on_their_own_product(tmp_path: Path, shared_data: Path) -> None:
    from progpo_envs.webshop.reward import get_reward
    from progpo_envs.webshop.title_nouns import TitleNouns

    _real_subset(tmp_path, shared_data)
    cat = load_catalog(tmp_path, num_products=1000, seed=0)
    nouns = TitleNouns(backend="rules")
    for goal in cat.goals[:200]:
        product = cat.by_asin[goal["asin"]]
        _, info = get_reward(
            product, goal, cat.prices[goal["asin"]], dict(goal["goal_options"]), nouns=nouns, verbose=True
        )
        assert info["r_att"] == 1.0 and info["r_type"] == 1.0 and info["r_price"] is True
