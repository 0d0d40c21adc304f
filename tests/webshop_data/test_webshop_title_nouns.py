"""Title nouns (rule backend) agree with the intent of r_type on the generated catalog."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from progpo_envs.webshop.catalog_vocab import PRODUCT_TYPES, TITLE_FILLERS
from progpo_envs.webshop.data import Catalog
from progpo_envs.webshop.reward import get_type_reward
from progpo_envs.webshop.title_nouns import TitleNouns, default_title_nouns, rule_nouns

NOUNS = TitleNouns(backend="rules")
TYPES = {t.query: t for t in PRODUCT_TYPES}
ADJECTIVE_FILLERS = {
    "professional",
    "premium",
    "natural",
    "gentle",
    "upgraded",
    "portable",
    "universal",
    "compact",
    "smart",
    "casual",
    "classic",
    "vintage",
    "lightweight",
    "comfortable",
    "stylish",
    "fresh",
    "modern",
    "rustic",
    "industrial",
    "minimalist",
    "sturdy",
    "elegant",
    "traditional",
}


@pytest.mark.parametrize(
    "title,expected",
    [
        ("Belara Waterproof Men's Chelsea Boots, Black, Size 10", ["belara", "men", "chelsea", "boots", "size"]),
        (
            "PMUYBHF Womens Fashion Flat Shoes Comfortable Running Shoes",
            ["pmuybhf", "womens", "fashion", "shoes", "running", "shoes"],
        ),
        ("Upgraded Portable 4K HDMI Cable with Braided Nylon - 6 ft", ["hdmi", "cable", "nylon", "ft"]),
        (
            "Seeds of Change Organic Brown Basmati Rice, 8.5 oz (Pack of 12)",
            ["seeds", "change", "basmati", "rice", "oz", "pack"],
        ),
        ("Adjustable Rolling Bed Table for Family Room", ["rolling", "bed", "table", "family", "room"]),
        ("", []),
    ],
)
def test_rule_nouns_examples(title: str, expected: list[str]) -> None:
    assert rule_nouns(title) == expected


def test_backend_selection() -> None:
    assert NOUNS.backend == "rules"
    assert default_title_nouns() is default_title_nouns()
    assert default_title_nouns().backend in {"rules"} | {
        f"spacy:{m}" for m in ("en_core_web_sm", "en_core_web_lg", "en_core_web_md")
    }
    with pytest.raises(ValueError):
        TitleNouns(backend="nltk")
    with pytest.raises(RuntimeError, match="backend='rules'"):
        TitleNouns(backend="spacy", spacy_models=("no_such_model_xyz",))


def test_head_nouns_found_and_adjectives_dropped(catalog_1k: Catalog) -> None:
    for p in catalog_1k.products:
        nouns = NOUNS(p["Title"])
        assert nouns, p["Title"]
        ptype = TYPES[p["query"]]
        heads = [n.split()[-1].lower() for n in ptype.nouns if n in p["Title"]]
        assert heads, p["Title"]
        for head in heads:
            assert head in nouns, (p["Title"], nouns)
        assert not ADJECTIVE_FILLERS & set(nouns), (p["Title"], nouns)
        assert all(not any(ch.isdigit() for ch in n) for n in nouns)
    fillers = {w.lower() for ws in TITLE_FILLERS.values() for f in ws for w in f.split()}
    assert ADJECTIVE_FILLERS <= fillers  # the list above covers real title words


def test_r_type_intent_on_generated_catalog(catalog_1k: Catalog) -> None:
    rng = random.Random(0)
    own, same_type, other_category = Counter(), Counter(), Counter()
    for goal in rng.sample(catalog_1k.goals, 150):
        own[get_type_reward(catalog_1k.by_asin[goal["asin"]], goal, NOUNS)["r_type"]] += 1
        for p in rng.sample(catalog_1k.products, 40):
            r_type = get_type_reward(p, goal, NOUNS)["r_type"]
            if p["query"] == goal["query"]:
                same_type[r_type > 0] += 1
            elif p["category"] != goal["category"]:
                other_category[r_type == 0] += 1
    assert own == Counter({1.0: 150})  # the goal's own product always has the right type
    assert same_type[True] / sum(same_type.values()) >= 0.75
    assert other_category[True] / sum(other_category.values()) >= 0.95


def test_spacy_backend_keeps_noun_and_propn_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """The spaCy path (no model is installed here): a fake spaCy with a fixed tagger."""
    import importlib.util
    import sys
    import types

    tags = {"Acme": "PROPN", "Waterproof": "ADJ", "Boots": "NOUN", "for": "ADP", "Men": "NOUN", "10": "NUM"}

    class Tok:
        def __init__(self, text: str) -> None:
            self.text, self.pos_ = text, tags.get(text, "X")

    loaded = []

    def load(name: str):
        if name == "en_core_web_sm":
            raise OSError("broken install")  # falls through to the next installed model
        loaded.append(name)
        return lambda text: [Tok(t) for t in text.split()]

    fake = types.ModuleType("spacy")
    fake.load = load  # type: ignore[attr-defined]  # the stand-in module gets the loader under test
    monkeypatch.setitem(sys.modules, "spacy", fake)
    real_find_spec = importlib.util.find_spec
    present = {"spacy", "en_core_web_sm", "en_core_web_lg"}
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: object() if name in present else real_find_spec(name, *a)
    )
    nouns = TitleNouns()
    assert nouns.backend == "spacy:en_core_web_lg" and loaded == ["en_core_web_lg"]
    assert nouns("Acme Waterproof Boots for Men 10") == ["acme", "boots", "men"]
    present.discard("en_core_web_lg")
    present.discard("en_core_web_sm")
    assert TitleNouns().backend == "rules"  # no model installed: spaCy is not even imported
