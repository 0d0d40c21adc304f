"""BM25 product search that ranks like WebShop's pyserini/Lucene index, without Java.

The original WebShop indexes one document per product with Anserini's default English
analyzer and searches it with Lucene's ``BM25Similarity(k1=0.9, b=0.4)``. This module
reproduces that pipeline in pure Python on top of `bm25s` and `PyStemmer`:

* **Indexed text** (:func:`product_document`): ``lower(title + " " + description + " " +
  first bullet point + " " + option text)``, the option text being
  ``"color: black, red, and size: s, m"`` as WebShop's ``convert_product_file_format.py``
  writes it.
* **Analysis** (:class:`LuceneEnglishAnalyzer`): a Unicode word tokenizer following the
  UAX#29 rules Lucene's ``StandardTokenizer`` implements (``6.5``, ``1,000`` and ``can't``
  stay one token; ``xx-small`` is two), the English possessive filter (``women's`` ->
  ``women``), lower-casing, Lucene's 33 English stop words, and the Porter stemmer
  (PyStemmer ``"porter"``, the same algorithm as Lucene's ``PorterStemFilter``).
* **Scoring**: Lucene's BM25 -- ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` times
  ``tf / (tf + k1 * (1 - b + b * dl / avgdl))`` -- where the document length ``dl`` goes
  through Lucene's lossy one-byte norm encoding (``SmallFloat.intToByte4``) exactly as
  Lucene stores it, and a query term that appears ``c`` times counts ``c`` times (Anserini's
  bag-of-words query boosts each term by its count).
* **Results**: documents matching at least one query term, best first, ties broken by
  ASIN; 50 hits (:data:`SEARCH_RETURN_N`), shown 10 a page (:data:`PRODUCT_WINDOW`).

Known differences from Lucene (documented, not bugs): CJK ideographs are kept together as
one token instead of one token per character, tokens are not split at 255 characters,
scores are summed in float64 (Lucene: float32; only exact-tie order could differ), and a
query keeps at most 1,024 distinct terms (Lucene would raise ``TooManyClauses``).

Example:
    >>> index = SearchIndex.build(
    ...     ["red running shoes for women", "blue denim jacket", "red wine glasses"],
    ...     ["B0000000A1", "B0000000B2", "B0000000C3"])
    >>> index.search("red shoes")
    [0, 2]
    >>> index.search_asins("jacket")
    ['B0000000B2']
    >>> LuceneEnglishAnalyzer().terms("The Women's Running-Shoes, size 6.5")
    ['women', 'run', 'shoe', 'size', '6.5']
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

#: results a search returns (the original shop's 50)
SEARCH_RETURN_N = 50
#: results shown per page
PRODUCT_WINDOW = 10
BM25_K1 = 0.9
BM25_B = 0.4
MAX_QUERY_TERMS = 1024

#: Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`` (the default of Anserini's analyzer).
LUCENE_ENGLISH_STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with".split()
)

_LETTER = r"[^\W\d_]"
# UAX#29 word boundaries as Lucene's StandardTokenizer applies them: runs of word characters,
# joined across MidLetter/MidNumLet between two letters (can't, e.g, a:b) and across
# MidNum/MidNumLet between two digits (6.5, 1,000).
_TOKEN_RE = re.compile(rf"\w+(?:(?:(?<={_LETTER})[.:'\u2019\u00b7](?={_LETTER})|(?<=\d)[.,;'\u2019](?=\d))\w+)*")
_POSSESSIVE_SUFFIXES = ("'s", "\u2019s", "'S", "\u2019S")
_DOC_SEP = "\x00"  # NUL: neither whitespace nor a word character, never part of a token


class LuceneEnglishAnalyzer:
    """Anserini's default English analysis chain: tokenize, possessive, lowercase, stop, stem.

    Stems of raw tokens are memoized per analyzer instance (bounded by ``max_cache``), so
    indexing a large catalog stems each distinct word once.

    Example:
        >>> LuceneEnglishAnalyzer().terms("Women's XX-Small shirts, 1,000 pcs")
        ['women', 'xx', 'small', 'shirt', '1,000', 'pc']
    """

    def __init__(self, max_cache: int = 2_000_000) -> None:
        import Stemmer  # PyStemmer

        self._stem_word = Stemmer.Stemmer("porter").stemWord
        self._cache: dict[str, str | None] = {}
        self._max_cache = max_cache

    def _normalize(self, token: str) -> str | None:
        if token.endswith(_POSSESSIVE_SUFFIXES):
            token = token[:-2]
        token = token.lower()
        if not token or token in LUCENE_ENGLISH_STOP_WORDS:
            return None
        return self._stem_word(token)

    def terms(self, text: str) -> list[str]:
        """Return the indexed terms of ``text`` in order (stop words removed)."""
        cache = self._cache
        out: list[str] = []
        append = out.append
        for token in _TOKEN_RE.findall(text):
            term = cache.get(token, "")
            if term == "":
                term = self._normalize(token)
                if len(cache) < self._max_cache:
                    cache[token] = term
            if term is not None:
                append(term)
        return out


def option_text(options: Mapping[str, Sequence[str]]) -> str:
    """WebShop's option text: ``"color: black, red, and size: s, m"``.

    >>> option_text({"color": ["black", "red"], "size": ["s", "m"]})
    'color: black, red, and size: s, m'
    """
    return ", and ".join(f"{name}: {', '.join(values)}" for name, values in options.items())


def product_document(product: Mapping[str, Any]) -> str:
    """The text WebShop indexes for a loaded product (see module docstring).

    >>> product_document({"Title": "Red Shoe", "Description": "Comfy.",
    ...                   "BulletPoints": ["Rubber sole"], "options": {"size": ["7", "8"]}})
    'red shoe comfy. rubber sole size: 7, 8'
    """
    bullets = product.get("BulletPoints") or [""]
    return " ".join(
        [
            str(product.get("Title") or ""),
            str(product.get("Description") or ""),
            str(bullets[0] or ""),
            option_text(product.get("options") or {}),
        ]
    ).lower()


# --- Lucene's SmallFloat one-byte length norm -------------------------------------------------


def _long_to_int4(i: int) -> int:
    num_bits = i.bit_length()
    if num_bits < 4:
        return i
    shift = num_bits - 4
    return ((i >> shift) & 0x07) | ((shift + 1) << 3)


def _int4_to_long(i: int) -> int:
    bits = i & 0x07
    shift = (i >> 3) - 1
    return bits if shift == -1 else (bits | 0x08) << shift


_NUM_FREE_VALUES = 255 - _long_to_int4(2**31 - 1)  # 24


def lucene_quantized_length(length: int) -> int:
    """The document length Lucene's BM25 sees after its one-byte norm encoding.

    >>> [lucene_quantized_length(n) for n in (5, 23, 24, 100, 1000)]
    [5, 23, 24, 96, 984]
    """
    if length < _NUM_FREE_VALUES:
        return length
    encoded = _NUM_FREE_VALUES + _long_to_int4(length - _NUM_FREE_VALUES)
    return _NUM_FREE_VALUES + _int4_to_long(encoded - _NUM_FREE_VALUES)


def _quantize_lengths(lengths: np.ndarray) -> np.ndarray:
    """Vectorized :func:`lucene_quantized_length` over non-negative int arrays."""
    lengths = lengths.astype(np.int64)
    out = lengths.copy()
    big = lengths >= _NUM_FREE_VALUES
    if big.any():
        x = lengths[big] - _NUM_FREE_VALUES
        nbits = np.floor(np.log2(np.maximum(x, 1))).astype(np.int64) + 1
        nbits[x == 0] = 0
        shift = np.maximum(nbits - 4, 0)
        kept = np.where(nbits < 4, x, (((x >> shift) & 0x07) | 0x08) << shift)
        out[big] = _NUM_FREE_VALUES + kept
    return out


# --- the index ----------------------------------------------------------------------------------


def bm25s_idf_lucene(df: np.ndarray, n_docs: int) -> np.ndarray:
    """Lucene's BM25 idf, ``ln(1 + (N - df + 0.5) / (df + 0.5))`` (bm25s' "lucene" idf), vectorized.

    >>> round(float(bm25s_idf_lucene(np.array([1]), 10)[0]), 4)
    1.9924
    """
    df = np.asarray(df, dtype=np.float64)
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


class _Postings:
    """Documents analyzed into flat (document, term id, term frequency) arrays, batch by batch.

    Tokens never span whitespace, so a document is analyzed as its whitespace-separated chunks;
    each distinct chunk ("dress,", "6.5") is analyzed once and remembered as a slice of
    ``flat_terms``. A document then costs one C-level dict lookup per chunk.
    """

    BATCH = 8192

    def __init__(self, analyzer: LuceneEnglishAnalyzer) -> None:
        self.analyzer = analyzer
        self.vocab: dict[str, int] = {}
        self.chunk_ids: dict[str, int] = {}
        self.chunk_off: list[int] = [0]
        self.flat_terms: list[int] = []
        self.parts: tuple[list[np.ndarray], ...] = ([], [], [], [])  # documents, terms, tf, lengths
        self.sep_id = self._add_chunk(_DOC_SEP)  # analyzes to no terms: marks document boundaries
        self.n_docs = 0

    def _add_chunk(self, chunk: str) -> int:
        get_id, vocab = self.vocab.setdefault, self.vocab
        self.flat_terms.extend([get_id(t, len(vocab)) for t in self.analyzer.terms(chunk)])
        self.chunk_off.append(len(self.flat_terms))
        self.chunk_ids[chunk] = cid = len(self.chunk_off) - 2
        return cid

    def _add_batch(self, batch: list[str]) -> None:
        # One C-level split + dict lookup pass over a whole batch of documents.
        if any(_DOC_SEP in d for d in batch):
            batch = [d.replace(_DOC_SEP, " ") for d in batch]
        chunks = f" {_DOC_SEP} ".join(batch).split()
        cids_list = list(map(self.chunk_ids.get, chunks))
        if None in cids_list:
            cids_list = [
                c if c is not None else (self.chunk_ids[ch] if ch in self.chunk_ids else self._add_chunk(ch))
                for c, ch in zip(cids_list, chunks)
            ]
        cids = np.asarray(cids_list, dtype=np.int64)
        off = np.asarray(self.chunk_off, dtype=np.int64)
        flat = np.asarray(self.flat_terms, dtype=np.int64)
        doc_of_chunk = np.cumsum(cids == self.sep_id)
        lens = off[cids + 1] - off[cids]
        cs = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=cs[1:])
        pos = np.arange(int(cs[-1]), dtype=np.int64) + np.repeat(off[cids] - cs[:-1], lens)
        ids = flat[pos]
        docs = np.repeat(doc_of_chunk, lens)
        width = len(self.vocab) + 1
        uniq, tf = np.unique((docs + self.n_docs) * width + ids, return_counts=True)
        columns: tuple[np.ndarray, ...] = (
            (uniq // width).astype(np.int32),
            (uniq % width).astype(np.int32),
            tf.astype(np.int32),
            np.bincount(docs, minlength=len(batch)),
        )
        for part, values in zip(self.parts, columns):
            part.append(values)
        self.n_docs += len(batch)

    def add_all(self, documents: Iterable[str]) -> int:
        """Analyze every document; returns how many there were."""
        batch: list[str] = []
        for text in documents:
            batch.append(text)
            if len(batch) == self.BATCH:
                self._add_batch(batch)
                batch = []
        if batch:
            self._add_batch(batch)
        return self.n_docs

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(documents, terms, term frequencies, document lengths); frees the build buffers."""
        empty = (np.int32, np.int32, np.int32, np.int64)
        out = tuple(np.concatenate(part) if part else np.zeros(0, dtype) for part, dtype in zip(self.parts, empty))
        for part in self.parts:
            part.clear()
        self.chunk_ids.clear()
        self.flat_terms.clear()
        self.chunk_off.clear()
        return out  # type: ignore[return-value]  # four arrays, in the order of the annotation


def _bm25_csc(postings: _Postings, n_vocab: int, k1: float, b: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lucene's BM25 score of every posting, as a CSC matrix (data, indices, indptr) grouped by term.

    Lucene's idf and tf component (bm25s' "lucene" variant), computed in place in float32 (as
    Lucene does) to keep the peak memory of a 1M-product build low: the posting arrays are
    released as soon as they are used (they are referenced here only).
    """
    n_docs = postings.n_docs
    docs, terms, tf, lengths = postings.arrays()
    avgdl = float(lengths.sum()) / max(n_docs, 1) or 1.0
    df = np.bincount(terms, minlength=n_vocab)
    idf = bm25s_idf_lucene(df, n_docs).astype(np.float32)
    norm = (k1 * (1 - b + b * _quantize_lengths(lengths) / avgdl)).astype(np.float32)
    scores = tf.astype(np.float32)
    del tf
    denom = norm[docs]
    denom += scores
    scores /= denom
    del denom
    scores *= idf[terms]
    order = np.argsort(terms, kind="stable")  # CSC: grouped by term, docs ascending
    data = scores[order]
    del scores
    indices = docs[order]
    del docs, order
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    return data, indices, indptr


class SearchIndex:
    """A Lucene-compatible BM25 index over product documents.

    Build it with :meth:`build` (or :func:`get_search_index` for a loaded catalog, which
    caches); query it with :meth:`search` (document positions) or :meth:`search_asins`.
    The score matrix lives in a :class:`bm25s.BM25` object (``self.bm25``), so
    ``bm25s`` can save, load and inspect it.
    """

    def __init__(self, bm25: Any, asins: Sequence[str], analyzer: LuceneEnglishAnalyzer | None = None):
        self.bm25 = bm25
        self.asins = list(asins)
        self.analyzer = analyzer or LuceneEnglishAnalyzer()
        self._data = np.asarray(bm25.scores["data"])
        self._indices = np.asarray(bm25.scores["indices"])
        self._indptr = np.asarray(bm25.scores["indptr"])
        self._num_docs = int(bm25.scores["num_docs"])
        order = np.argsort(np.asarray(self.asins, dtype=object), kind="stable")
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        self._asin_rank = rank

    def __len__(self) -> int:
        return self._num_docs

    @classmethod
    def build(
        cls,
        documents: Iterable[str],
        asins: Sequence[str],
        *,
        k1: float = BM25_K1,
        b: float = BM25_B,
        analyzer: LuceneEnglishAnalyzer | None = None,
    ) -> "SearchIndex":
        """Analyze ``documents`` (already lower-cased text) and build the BM25 matrix.

        Memory stays near the size of the posting arrays: documents are analyzed one at a
        time into flat int32 arrays of term ids (:class:`_Postings`).

        The scores are computed here and handed to a ``bm25s.BM25`` as its score matrix, not
        through ``BM25.index``: that public path tokenizes with bm25s' own tokenizer and uses exact
        document lengths, while WebShop's search (pyserini / Lucene) ranks with the Lucene English
        analyzer and one-byte quantized lengths (:func:`lucene_quantized_length`); its peak
        memory at 1M products is also several times the postings'. Querying goes through bm25s'
        matrix layout (CSC: grouped by term, documents ascending), which the assignment below fills.
        """
        import bm25s  # the [webshop] extra

        analyzer = analyzer or LuceneEnglishAnalyzer()
        postings = _Postings(analyzer)
        n_docs = postings.add_all(documents)
        if n_docs != len(asins):
            raise ValueError(f"got {n_docs} documents for {len(asins)} asins")
        vocab = postings.vocab
        data, indices, indptr = _bm25_csc(postings, max(len(vocab), 1), k1, b)
        bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        bm25.scores = {"data": data, "indices": indices, "indptr": indptr, "num_docs": n_docs}
        bm25.vocab_dict = vocab
        bm25.unique_token_ids_set = set(vocab.values())
        bm25.nonoccurrence_array = None
        return cls(bm25, asins, analyzer)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (float64, 0 for non-matching)."""
        terms = self.analyzer.terms(query)
        vocab = self.bm25.vocab_dict
        counts: dict[int, int] = {}
        for t in terms:
            tid = vocab.get(t)
            if tid is not None and (tid in counts or len(counts) < MAX_QUERY_TERMS):
                counts[tid] = counts.get(tid, 0) + 1
        if not counts:
            return np.zeros(self._num_docs)
        idx_parts, w_parts = [], []
        for tid, c in counts.items():
            s, e = self._indptr[tid], self._indptr[tid + 1]
            idx_parts.append(self._indices[s:e])
            w = self._data[s:e]
            w_parts.append(w * c if c != 1 else w)
        idx = np.concatenate(idx_parts)
        w = np.concatenate(w_parts).astype(np.float64)
        return np.bincount(idx, weights=w, minlength=self._num_docs)

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[int]:
        """Positions of the top ``k`` matching documents, best first, ties by ASIN."""
        scores = self.scores(query)
        cand = np.flatnonzero(scores > 0)
        if cand.size == 0 or k <= 0:
            return []
        if cand.size > k:
            cs = scores[cand]
            thresh = np.partition(cs, cand.size - k)[cand.size - k]
            cand = cand[cs >= thresh]
        order = np.lexsort((self._asin_rank[cand], -scores[cand]))
        return cand[order[:k]].tolist()

    def search_asins(self, query: str, k: int = SEARCH_RETURN_N) -> list[str]:
        """ASINs of the top ``k`` matching documents (see :meth:`search`)."""
        return [self.asins[i] for i in self.search(query, k)]

    # --- persistence -----------------------------------------------------------------------

    def save(self, directory: str | Path) -> None:
        """Write the index (bm25s format + ``asins.json``) to ``directory``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.bm25.save(str(directory))
        (directory / "asins.json").write_text(json.dumps(self.asins))

    @classmethod
    def load(cls, directory: str | Path) -> "SearchIndex":
        """Read an index written by :meth:`save`."""
        import bm25s  # the [webshop] extra

        directory = Path(directory)
        bm25 = bm25s.BM25.load(str(directory))
        asins = json.loads((directory / "asins.json").read_text())
        return cls(bm25, asins)


# --- per-catalog cache --------------------------------------------------------------------------

_CACHE_LOCK = threading.Lock()
_MEMORY_CACHE: "OrderedDict[str, SearchIndex]" = OrderedDict()
_MEMORY_CACHE_SIZE = 4


def catalog_fingerprint(documents: Sequence[str], asins: Sequence[str]) -> str:
    """SHA-256 over the indexed texts and ASINs: the cache key of an index."""
    h = hashlib.sha256()
    h.update(f"bm25 k1={BM25_K1} b={BM25_B} v1\n".encode())
    for asin, doc in zip(asins, documents):
        h.update(asin.encode("utf-8", "replace"))
        h.update(b"\x00")
        h.update(doc.encode("utf-8", "replace"))
        h.update(b"\x01")
    return h.hexdigest()


def get_search_index(products: Sequence[Mapping[str, Any]], cache_dir: str | Path | None = None) -> SearchIndex:
    """The search index of a loaded catalog, built once and shared.

    Indexes are kept in a small in-process LRU (4 catalogs) keyed by the content hash of the
    indexed text, so every env over the same catalog in one process shares one index. With
    ``cache_dir`` the index is also stored on disk under ``cache_dir/<hash>/`` and reloaded
    from there by later processes. :func:`clear_search_index_cache` empties the memory cache.
    """
    documents = [product_document(p) for p in products]
    asins = [str(p["asin"]) for p in products]
    key = catalog_fingerprint(documents, asins)
    with _CACHE_LOCK:
        if key in _MEMORY_CACHE:
            _MEMORY_CACHE.move_to_end(key)
            return _MEMORY_CACHE[key]
    index = None
    path = Path(cache_dir) / key if cache_dir is not None else None
    if path is not None and (path / "asins.json").exists():
        try:
            index = SearchIndex.load(path)
        except Exception:  # a partial or stale cache entry is rebuilt, not fatal
            index = None
    if index is None:
        index = SearchIndex.build(documents, asins)
        if path is not None:
            index.save(path)
    with _CACHE_LOCK:
        _MEMORY_CACHE[key] = index
        while len(_MEMORY_CACHE) > _MEMORY_CACHE_SIZE:
            _MEMORY_CACHE.popitem(last=False)
    return index


def clear_search_index_cache() -> None:
    """Drop every in-memory index built by :func:`get_search_index`."""
    with _CACHE_LOCK:
        _MEMORY_CACHE.clear()
