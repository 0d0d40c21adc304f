"""BM25 search: Lucene analysis chain, Lucene BM25 scores, ranking, caching."""

from __future__ import annotations

import math
import random

import pytest

from progpo_envs.webshop.search import (
    LuceneEnglishAnalyzer,
    SearchIndex,
    clear_search_index_cache,
    get_search_index,
    lucene_quantized_length,
    product_document,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Red Running Shoes", ["red", "run", "shoe"]),
        ("the shoes are for a man", ["shoe", "man"]),  # Lucene's English stop words
        ("women's t-shirt", ["women", "t", "shirt"]),  # possessive filter, single chars kept
        ("size 6.5 and 1,000 pcs", ["size", "6.5", "1,000", "pc"]),  # numbers stay whole
        ("xx-small can't", ["xx", "small", "can't"]),
        ("color:black", ["color:black"]),  # UAX#29 MidLetter
        ("b09p87v3lz", ["b09p87v3lz"]),
        ("end. start", ["end", "start"]),
        ("", []),
    ],
)
def test_analyzer_follows_lucene_english_chain(text, expected):
    assert LuceneEnglishAnalyzer().terms(text) == expected


def test_quantized_length_matches_lucene_smallfloat_table():
    # Lucene: lengths < 40 exact, then 4 significant bits (40, 42, ..., 56, 60, ...).
    assert [lucene_quantized_length(n) for n in (39, 40, 41, 55, 56, 57, 59, 60)] == [39, 40, 40, 54, 56, 56, 56, 60]


def _reference_scores(docs: list[str], query: str, k1=0.9, b=0.4) -> list[float]:
    """Lucene BM25 written out independently from the index code."""
    an = LuceneEnglishAnalyzer()
    toks = [an.terms(d) for d in docs]
    n = len(docs)
    avgdl = sum(map(len, toks)) / n
    out = []
    q = an.terms(query)
    for t in toks:
        dl = lucene_quantized_length(len(t))
        s = 0.0
        for term in q:  # duplicates count again (Anserini boosts by count)
            tf = t.count(term)
            if tf == 0:
                continue
            df = sum(1 for u in toks if term in u)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            s += idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))
        out.append(s)
    return out


def _random_corpus(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = "red blue shoe shoes dress running wrap floral size small large 6.5 cotton the and women's men".split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, 70))) for _ in range(n)]


@pytest.mark.parametrize("query", ["red shoes", "red red dress", "women's running 6.5", "zzz"])
def test_scores_equal_lucene_formula(query):
    docs = _random_corpus(120, seed=1)
    index = SearchIndex.build(docs, [f"B{i:09d}" for i in range(len(docs))])
    got = index.scores(query)
    ref = _reference_scores(docs, query)
    assert got == pytest.approx(ref, rel=1e-5, abs=1e-6)


def test_ranking_best_first_ties_by_asin_and_only_matches():
    docs = ["red dress", "blue dress", "red dress", "green hat", "red red dress long"]
    asins = ["B0000000Z9", "B0000000B1", "B0000000A1", "B0000000C1", "B0000000D1"]
    index = SearchIndex.build(docs, asins)
    hits = index.search_asins("red dress")
    # Docs 0 and 2 tie exactly: the smaller ASIN comes first; doc 3 does not match.
    assert hits.index("B0000000A1") < hits.index("B0000000Z9")
    assert "B0000000C1" not in hits
    assert set(hits) == {"B0000000Z9", "B0000000B1", "B0000000A1", "B0000000D1"}
    assert index.search("hat") == [3]
    assert index.search("the of and") == []  # only stop words
    assert index.search("") == []


def test_search_returns_at_most_50_sorted_by_score():
    docs = _random_corpus(400, seed=2)
    index = SearchIndex.build(docs, [f"B{i:09d}" for i in range(len(docs))])
    hits = index.search("red shoe")
    scores = index.scores("red shoe")
    assert len(hits) == 50
    assert all(scores[a] >= scores[b] for a, b in zip(hits, hits[1:]))
    worst_kept = scores[hits[-1]]
    assert sum(s > worst_kept for s in scores) <= 49


def test_product_document_is_webshop_indexed_text():
    p = {
        "Title": "Red Shoe",
        "Description": "Soft.",
        "BulletPoints": ["Rubber", "ignored"],
        "options": {"color": ["black", "red"], "size": ["7"]},
    }
    assert product_document(p) == "red shoe soft. rubber color: black, red, and size: 7"


def test_index_is_cached_in_memory_and_on_disk(tmp_path):
    products = [
        {"asin": f"B{i:09d}", "Title": t, "Description": "", "BulletPoints": [""], "options": {}}
        for i, t in enumerate(["red shoe", "blue hat", "red hat"])
    ]
    clear_search_index_cache()
    a = get_search_index(products, cache_dir=tmp_path)
    assert get_search_index(products) is a
    clear_search_index_cache()
    b = get_search_index(products, cache_dir=tmp_path)  # loaded from disk
    assert b is not a and b.search_asins("red hat") == a.search_asins("red hat")
    assert len(list(tmp_path.iterdir())) == 1
    clear_search_index_cache()


def test_odd_documents_index_like_their_text():
    docs = ["", "red\x00shoe", "   ", "red\x1eshoe", "x" * 300, "red"]
    index = SearchIndex.build(docs, [f"B{i:09d}" for i in range(len(docs))])
    assert index.scores("red shoe") == pytest.approx(_reference_scores(docs, "red shoe"), rel=1e-5, abs=1e-6)
    assert index.search("red") == [5, 1, 3]  # shortest document first, then ties by ASIN
    with pytest.raises(ValueError):
        SearchIndex.build(["a", "b"], ["B1"])
