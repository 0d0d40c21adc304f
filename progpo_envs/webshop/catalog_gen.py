"""Deterministic generator of a WebShop catalog in the ORIGINAL file schema.

The original WebShop ships ``items_shuffle*.json`` (scraped Amazon products) and
``items_ins_v2*.json`` (attributes + a synthetic instruction per product). This module makes
files of the same shape from the tables in :mod:`progpo_envs.webshop.catalog_vocab`, so one
loader (:func:`progpo_envs.webshop.data.load_catalog`) reads both the embedded catalog and the
original data.

Properties:

* deterministic from ``seed``; product ``i`` does not depend on ``num_products`` (the catalog of
  100 products is the first 100 of the catalog of 1M, as ``items_shuffle[:n]`` in the original);
* streaming: :func:`iter_catalog` yields one product at a time (products are drawn in blocks of
  :data:`BLOCK` with one numpy PCG64 stream per ``(seed, block)``), so 1M products can be indexed or written without
  holding them all; :func:`write_catalog` writes JSON incrementally;
* unique 10-character ASINs (``"B0"`` + 8 base-36 digits, a bijection of the index).

Raw item keys (original ``items_shuffle`` schema): ``asin, name, category, query,
product_category ("A › B › C"), pricing ("$19.99" | "$19.99$27.99" | ""), small_description
(list[str]), full_description, customization_options ({"Color": [{"value", "image"}], ...} | ""),
images, brand, brand_url, list_price, availability_status, average_rating, total_reviews``.
Attribute entries (``items_ins_v2``): ``{asin: {"attributes": [...], "instruction": str,
"instruction_attributes": [...]}}`` (the last two only for products with an instruction).

Example:
    >>> from progpo_envs.webshop.catalog_gen import generate_catalog
    >>> items, ins = generate_catalog(num_products=3, seed=0)
    >>> [len(p["asin"]) for p in items]
    [10, 10, 10]
    >>> set(ins) == {p["asin"] for p in items}
    True
    >>> generate_catalog(num_products=2, seed=0)[0] == items[:2]
    True

CLI::

    python -m progpo_envs.webshop.catalog_gen --num-products 100000 --seed 0 --out-dir data/
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import accumulate, islice
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from progpo_envs.webshop.catalog_vocab import (
    BRAND_PARTS,
    BULLET_TEMPLATES,
    CATEGORY_PRE,
    DESCRIPTION_TEMPLATES,
    OPTION_POOLS,
    PRODUCT_TYPES,
    TITLE_FILLERS,
    ProductType,
)

__all__ = [
    "BLOCK",
    "asin_for_index",
    "generate_catalog",
    "iter_catalog",
    "write_catalog",
    "main",
]

#: Products drawn from one RNG; fixed so that product i never depends on the catalog size.
BLOCK = 1024
#: Share of products that get a synthetic instruction (415 of 1000 in the original 1k set).
INSTRUCTION_RATE = 0.45
_ASIN_SPACE = 36**8
_ASIN_MULT = 2_654_435_761  # odd, not a multiple of 3: a bijection modulo 36**8
_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# Number of attributes per product, weighted like the real 1k set (0: 18%, 1-2: 38%, ...).
_N_ATTR_CHOICES = (0, 1, 2, 3, 4, 5, 6, 7)
_N_ATTR_WEIGHTS = (18, 19, 19, 14, 12, 8, 6, 4)
_N_ATTR_CUM = tuple(c / sum(_N_ATTR_WEIGHTS) for c in accumulate(_N_ATTR_WEIGHTS))
_T = TypeVar("_T")
_PAIRS = tuple(a + b for a in _DIGITS for b in _DIGITS)  # base-36 digit pairs, "00" .. "ZZ"


def asin_for_index(index: int, seed: int = 0) -> str:
    """The ASIN of product ``index`` of the catalog generated with ``seed``.

    >>> asin_for_index(0, 0), asin_for_index(1, 0) != asin_for_index(0, 0)
    ('B0000009IX', True)
    """
    if not 0 <= index < _ASIN_SPACE:
        raise ValueError(f"product index {index} out of range [0, {_ASIN_SPACE})")
    code = (index * _ASIN_MULT + seed * 7919 + 12345) % _ASIN_SPACE
    hi, lo = divmod(code, 1296 * 1296)
    return "".join(("B0", _PAIRS[hi // 1296], _PAIRS[hi % 1296], _PAIRS[lo // 1296], _PAIRS[lo % 1296]))


def _title_case(phrase: str) -> str:
    return " ".join(w if w.isupper() else w[:1].upper() + w[1:] for w in phrase.split())


class _TypeTables:
    """Per product type, the precomputed pools the generator draws from."""

    __slots__ = ("ptype", "pre", "with_", "for_", "all_attrs", "kind", "titled", "fillers", "bullets")

    def __init__(self, ptype: ProductType) -> None:
        self.ptype = ptype
        shared = tuple(a for a in CATEGORY_PRE[ptype.category] if a not in ptype.pre)
        self.pre = ptype.pre + shared
        self.with_ = ptype.with_
        self.for_ = ptype.for_
        self.all_attrs = self.pre + self.with_ + self.for_
        self.kind = {a: "pre" for a in self.pre}
        self.kind.update({a: "with" for a in self.with_})
        self.kind.update({a: "for" for a in self.for_})
        self.titled = {a: _title_case(a) for a in self.all_attrs}
        self.fillers = TITLE_FILLERS[ptype.category]
        self.bullets = BULLET_TEMPLATES[ptype.category]


_TABLES = tuple(_TypeTables(t) for t in PRODUCT_TYPES)


class _Stream:
    """Uniform floats in [0, 1) drawn in bulk from numpy, consumed one at a time.

    ~4x faster than calling :mod:`random` per draw, which makes 1M products affordable.
    """

    __slots__ = ("_gen", "_next")

    def __init__(self, seed: int, block: int) -> None:
        words = [abs(seed) & 0xFFFFFFFF, abs(seed) >> 32, int(seed < 0), block, 0x5EB]
        self._gen = np.random.Generator(np.random.PCG64(words))
        self._next = iter(()).__next__

    def rand(self) -> float:
        try:
            return self._next()
        except StopIteration:
            self._next = iter(self._gen.random(BLOCK * 48).tolist()).__next__
            return self._next()

    def below(self, n: int) -> int:
        return int(self.rand() * n)

    def pick(self, seq: Sequence[_T]) -> _T:
        return seq[int(self.rand() * len(seq))]

    def between(self, low: int, high: int) -> int:
        """Uniform integer in [low, high]."""
        return low + int(self.rand() * (high - low + 1))

    def sample(self, seq: Sequence[_T], k: int) -> list[_T]:
        """k distinct elements, in draw order (partial Fisher-Yates)."""
        pool = list(seq)
        n = len(pool)
        k = min(k, n)
        for j in range(k):
            m = j + int(self.rand() * (n - j))
            pool[j], pool[m] = pool[m], pool[j]
        return pool[:k]


def _n_attributes(u: float) -> int:
    acc = 0.0
    for n, w in zip(_N_ATTR_CHOICES, _N_ATTR_CUM):
        acc = w
        if u < acc:
            return n
    return _N_ATTR_CHOICES[-1]


def _price(rs: _Stream, low: float, high: float) -> float:
    return max(1.0, round(low + rs.rand() * (high - low))) - 0.01


def _draw_product(index: int, seed: int, rs: _Stream) -> tuple[dict[str, Any], dict[str, Any]]:
    """Product ``index`` and its goal material, drawn from ``rs`` (the helpers below draw in this
    order, which every generated catalog depends on)."""
    r = rs.rand  # hot path: picks and ranges inlined (same draws as rs.pick / rs.between)
    tables = _TABLES[int(r() * len(_TABLES))]
    ptype = tables.ptype
    asin = asin_for_index(index, seed)
    first, second = BRAND_PARTS
    brand = first[int(r() * len(first))] + second[int(r() * len(second))]
    noun = ptype.nouns[int(r() * len(ptype.nouns))]
    attributes = rs.sample(tables.all_attrs, _n_attributes(r()))
    name, in_title = _title(rs, tables, brand, noun, attributes)
    bullets, description = _texts(rs, tables, brand, noun.lower(), attributes, in_title)
    customization = _customization(rs, ptype)
    item: dict[str, Any] = {
        "asin": asin,
        "name": name,
        "category": ptype.category,
        "query": ptype.query,
        "product_category": ptype.product_category,
        "pricing": _pricing(rs, ptype),
        "list_price": "",
        "small_description": bullets,
        "full_description": description,
        "customization_options": customization,
        "images": [],
        "brand": brand,
        "brand_url": "",
        "availability_status": "In Stock.",
        "average_rating": "N.A.",
        "total_reviews": 0,
    }
    return item, _instruction(rs, tables, attributes)


def _title(rs: _Stream, tables: _TypeTables, brand: str, noun: str, attributes: list[str]) -> tuple[str, list[str]]:
    """The title (brand, a filler, some attributes, the head noun, then a tail) and the attributes
    it names; the other attributes of the product appear in bullets / description only."""
    r, kind, titled = rs.rand, tables.kind, tables.titled
    in_title = [a for a in attributes if r() < 0.5][:3]
    parts = [brand]
    if r() < 0.6:
        parts.append(tables.fillers[int(r() * len(tables.fillers))])
    parts.extend(titled[a] for a in in_title if kind[a] == "pre")
    parts.append(noun)
    with_t = [a for a in in_title if kind[a] == "with"]
    if with_t:
        parts.append("with " + " and ".join(titled[a] for a in with_t))
    for_t = [a for a in in_title if kind[a] == "for"]
    if for_t:
        parts.append("for " + titled[for_t[0]])
    if r() < 0.6:  # marketplace titles repeat the product type with a synonym
        other = tables.ptype.nouns[int(r() * len(tables.ptype.nouns))]
        if other != noun:
            parts.append("- " + other)
    return " ".join(parts), in_title


def _texts(
    rs: _Stream, tables: _TypeTables, brand: str, lower_noun: str, attributes: list[str], in_title: list[str]
) -> tuple[list[str], str]:
    """Bullets (the attributes the title left out, else a random one) and the description."""
    r, pre_pool, templates = rs.rand, tables.pre, tables.bullets
    rest = [a for a in attributes if a not in in_title]
    bullet_ids = rs.sample(range(len(templates)), 3 + int(r() * 3))
    bullets = [
        templates[b].format(n=lower_noun, a=rest[k] if k < len(rest) else pre_pool[int(r() * len(pre_pool))])
        for k, b in enumerate(bullet_ids)
    ]
    a1 = attributes[0] if attributes else pre_pool[int(r() * len(pre_pool))]
    a2 = attributes[-1] if len(attributes) > 1 else pre_pool[int(r() * len(pre_pool))]
    sent_ids = sorted(rs.sample(range(len(DESCRIPTION_TEMPLATES)), 2 + int(r() * 3)))
    description = "".join(
        DESCRIPTION_TEMPLATES[s].format(brand=brand, n=lower_noun, a1=a1, a2=a2) for s in sent_ids
    ).strip()
    return bullets, description


def _customization(rs: _Stream, ptype: ProductType) -> dict[str, list[dict[str, Any]]] | str:
    """The product's options (85% of products have some), or ``""``."""
    if rs.rand() >= 0.85:
        return ""
    opts: dict[str, list[dict[str, Any]]] = {}
    for opt_name, pool_name in ptype.options:
        pool = OPTION_POOLS[pool_name]
        k = rs.between(1, 5) if opt_name in ("Color", "Flavor Name") else rs.between(2, 6)
        picked = sorted(rs.sample(range(len(pool)), k))
        opts[opt_name] = [{"value": pool[j], "image": None} for j in picked]
    return opts or ""


def _pricing(rs: _Stream, ptype: ProductType) -> str:
    """A price (60%), a price range (25%) or none, in the shop's ``$lo$hi`` form."""
    roll = rs.rand()
    low, high = ptype.price
    if roll < 0.6:
        return f"${_price(rs, low, high):.2f}"
    if roll < 0.85:
        lo = _price(rs, low, high)
        hi = lo + max(1.0, round(lo * (0.1 + 0.7 * rs.rand())))
        return f"${lo:.2f}${hi:.2f}"
    return ""


def _instruction(rs: _Stream, tables: _TypeTables, attributes: list[str]) -> dict[str, Any]:
    """The goal material: the attributes and, for some products, an instruction naming a few."""
    ins: dict[str, Any] = {"attributes": attributes}
    if attributes and rs.rand() < INSTRUCTION_RATE:
        kind = tables.kind
        chosen = rs.sample(attributes, rs.between(1, 4))
        pre = [a for a in chosen if kind[a] == "pre"]
        with_ = [a for a in chosen if kind[a] == "with"]
        for_ = [a for a in chosen if kind[a] == "for"]
        text = "Find me "
        if pre:
            text += ", ".join(pre) + " "
        text += tables.ptype.query
        if with_:
            text += " with " + ", ".join(with_)
        if for_:
            text += " for " + ", ".join(for_)
        ins["instruction"] = text
        ins["instruction_attributes"] = pre + with_ + for_
    return ins


def _block(seed: int, block: int, num_products: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Products of one block (the unit of determinism and of parallel work)."""
    start = block * BLOCK
    rs = _Stream(seed, block)
    return [_draw_product(i, seed, rs) for i in range(start, min(start + BLOCK, num_products))]


def _json_block(seed: int, block: int, num_products: int) -> tuple[str, str]:
    """One block as ``items_shuffle`` / ``items_ins_v2`` JSON fragments (no outer brackets)."""
    rows = _block(seed, block, num_products)
    items = ",\n".join(json.dumps(item, ensure_ascii=False) for item, _ in rows)
    ins = ",\n".join(json.dumps(item["asin"]) + ": " + json.dumps(entry, ensure_ascii=False) for item, entry in rows)
    return items, ins


def _ordered_map(fn: Callable[..., _T], calls: Iterable[tuple[Any, ...]], workers: int) -> Iterator[_T]:
    """``fn(*args)`` for each args, results in order; ``workers > 1`` runs them in processes
    (at most ``2 * workers`` blocks in flight, so memory stays bounded)."""
    if workers <= 1:
        for args in calls:
            yield fn(*args)
        return
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    pending: deque[Future[_T]] = deque()
    todo = iter(calls)
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        try:
            for args in islice(todo, 2 * workers):
                pending.append(pool.submit(fn, *args))
            while pending:
                result = pending.popleft().result()
                nxt = next(todo, None)
                if nxt is not None:
                    pending.append(pool.submit(fn, *nxt))
                yield result
        finally:
            for fut in pending:
                fut.cancel()


def _check(num_products: int, workers: int) -> None:
    if num_products < 0:
        raise ValueError(f"num_products must be >= 0, got {num_products}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")


def iter_catalog(
    num_products: int = 1000, seed: int = 0, *, workers: int = 1
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Yield ``(raw_item, ins_entry)`` for products ``0`` to ``num_products - 1``, lazily.

    ``workers > 1`` draws blocks of :data:`BLOCK` products in that many processes (same
    products, same order; worth it from ~100k products).

    >>> item, ins = next(iter_catalog(1, seed=3))
    >>> item["category"] in {"beauty", "electronics", "fashion", "food", "furniture"}
    True
    """
    _check(num_products, workers)
    calls = ((seed, b, num_products) for b in range(-(-num_products // BLOCK)))
    for rows in _ordered_map(_block, calls, workers):
        yield from rows


def generate_catalog(
    num_products: int = 1000, seed: int = 0, *, workers: int = 1
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Return ``(items_shuffle, items_ins_v2)``: the list of raw items and the attribute dict."""
    items: list[dict[str, Any]] = []
    ins: dict[str, dict[str, Any]] = {}
    for item, entry in iter_catalog(num_products, seed, workers=workers):
        items.append(item)
        ins[item["asin"]] = entry
    return items, ins


def write_catalog(
    out_dir: str | Path, num_products: int = 1000, seed: int = 0, *, workers: int = 1
) -> tuple[Path, Path]:
    """Write ``items_shuffle_<n>.json`` and ``items_ins_v2_<n>.json`` to ``out_dir``, streaming.

    Returns the two paths. The files are what the original WebShop reads (and what
    :func:`progpo_envs.webshop.data.load_catalog` reads with ``data_dir=out_dir``).
    ``workers > 1`` serialises blocks in parallel processes.
    """
    _check(num_products, workers)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    items_path = out / f"items_shuffle_{num_products}.json"
    ins_path = out / f"items_ins_v2_{num_products}.json"
    calls = ((seed, b, num_products) for b in range(-(-num_products // BLOCK)))
    with open(items_path, "w", encoding="utf-8") as f_items, open(ins_path, "w", encoding="utf-8") as f_ins:
        f_items.write("[")
        f_ins.write("{")
        for k, (items, ins) in enumerate(_ordered_map(_json_block, calls, workers)):
            sep = ",\n" if k else "\n"
            f_items.write(sep + items)
            f_ins.write(sep + ins)
        f_items.write("\n]\n")
        f_ins.write("\n}\n")
    return items_path, ins_path


def main(argv: list[str] | None = None) -> int:
    """CLI entry point: write a generated catalog in the original file layout."""
    parser = argparse.ArgumentParser(
        prog="python -m progpo_envs.webshop.catalog_gen",
        description="Write a generated WebShop catalog (items_shuffle_<n>.json, items_ins_v2_<n>.json).",
    )
    parser.add_argument("--num-products", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", type=Path, default=Path("webshop_data"))
    parser.add_argument("--workers", type=int, default=1, help="processes (default 1)")
    args = parser.parse_args(argv)
    if args.num_products < 1:
        parser.error("--num-products must be >= 1")
    if args.workers < 1:
        parser.error("--workers must be >= 1")
    items_path, ins_path = write_catalog(args.out_dir, args.num_products, args.seed, workers=args.workers)
    print(f"wrote {items_path} and {ins_path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
