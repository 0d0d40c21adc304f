"""Nouns of a product title, for the type part of the WebShop reward (``r_type``).

The original reward (``get_type_reward``) tags the purchased and the goal product's names with
spaCy and keeps the lower-cased text of tokens tagged ``NOUN`` or ``PROPN``: ``title_score =
|nouns(purchased) ∩ nouns(goal)| / len(nouns(goal))`` (set intersection over the goal's list
length, duplicates included).

Backends, chosen by :class:`TitleNouns` (``backend="auto"``):

* ``spacy``: when the ``spacy`` package and an English model are installed (tried in order
  ``en_core_web_sm`` (the original since 2024), ``en_core_web_lg`` (before), ``en_core_web_md``).
  This package never installs spaCy or a model.
* ``rules``: a deterministic rule-based tagger used otherwise. It tokenizes as spaCy does for
  titles (words split at punctuation, hyphens and slashes; ``'s`` split off), and keeps a token
  as a noun unless it is

  - a function word (determiner, preposition, conjunction, pronoun, auxiliary),
  - a number or contains a digit (``12``, ``4k``, ``128gb``: spaCy tags these ``NUM``/``X``),
  - a single character,
  - a colour / size / common product adjective (lexicon :data:`ADJECTIVES`),
  - an adjective or participle by suffix: ``-able/-ible``, ``-ful``, ``-less``, ``-ous``,
    ``-ive``, ``-ish``, ``-ed`` and ``-ly`` (with exceptions for nouns such as ``table``,
    ``cable``, ``olive``, ``bed``, ``family``).

  Brand names and unknown words count as nouns, as spaCy tags capitalised title words ``PROPN``.
  The two backends can disagree on individual words (as ``en_core_web_lg`` and ``_sm`` do);
  the tests check the rules against the intent on the generated catalog: a product's head
  nouns are found, its colours / sizes / marketing adjectives are not, products of one type
  overlap and products of unrelated types do not.

Example:
    >>> nouns = TitleNouns(backend="rules")
    >>> nouns("Belara Waterproof Men's Chelsea Boots, Black, Size 10")
    ['belara', 'men', 'chelsea', 'boots', 'size']
    >>> nouns.backend
    'rules'
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import re
from collections.abc import Callable, Sequence

__all__ = ["ADJECTIVES", "STOPWORDS", "SPACY_MODELS", "TitleNouns", "rule_nouns", "default_title_nouns"]

#: English spaCy models tried, in order, by the ``spacy`` backend.
SPACY_MODELS: tuple[str, ...] = ("en_core_web_sm", "en_core_web_lg", "en_core_web_md")
_NOUN_POS = ("PNOUN", "NOUN", "PROPN")  # "PNOUN" is in the original's list (a typo, harmless)

STOPWORDS: frozenset[str] = frozenset(
    """
a an the and or nor but if then than so as of in on at by for with without from to into onto
upon over under about above below between through during before after within across along
around against among per via plus vs is are was were be been being am do does did has have
had will would can could should may might must shall this that these those it its it's they
them their theirs he him his she her hers we us our ours you your yours i me my mine who whom
whose which what where when why how all any both each either every few many more most much
neither no not only other same several some such too very just also up down out off again
further once here there own s t
""".split()
)

#: words of a title that describe rather than name the product
ADJECTIVES: frozenset[str] = frozenset(
    """
black white red blue green grey gray pink purple yellow orange brown beige navy khaki teal
turquoise maroon burgundy ivory cream tan olive coral lavender violet magenta fuchsia silver
golden multicolor multicolored colorful clear transparent dark light bright pale matte glossy
metallic neon pastel
small medium large big little tiny mini huge giant xs xl xxl xxxl petite tall short long wide
narrow slim thin thick fat heavy deep shallow high low full half double single triple twin
new old vintage classic modern contemporary traditional rustic retro antique premium
professional portable universal compact smart casual stylish elegant cute funny pretty
beautiful gorgeous lovely luxury luxurious fancy simple basic plain solid soft hard warm cold
cool hot dry wet fresh natural organic pure real genuine original authentic fine extra super
ultra best better good great perfect excellent ideal quick fast slow easy strong tough
sturdy durable lightweight comfortable comfy gentle daily weekly annual industrial
minimalist elegant gourmet artisan unisex cozy fluffy sturdy safe healthy delicious tasty
sweet spicy salty savory crunchy creamy raw free proof resistant compatible available
assorted upgraded waterproof wireless rechargeable adjustable reusable washable breathable
stretchy elastic flexible foldable portable removable durable stainless nonstick non anti
multi multipurpose dual quad ergonomic magnetic electric electronic digital automatic manual
ceramic acrylic vegan keto kosher ready various mid upholstered flat
""".split()
)

_SUFFIX_RE = re.compile(r"(?:able|ible|ful|less|ous|ive|ish|ed|ly)$")
_SUFFIX_NOUNS: frozenset[str] = frozenset(
    """
table cable vegetable turntable timetable collectible convertible bible stable handful
mouthful spoonful olive archive drive adhesive explosive detective sedative laxative
preservative additive chive speed breed steed tweed family jelly belly butterfly assembly
supply rally bully dolly holly polish radish relish english spanish
""".split()
)
_TOKEN_RE = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")


def rule_nouns(text: str) -> list[str]:
    """Nouns of ``text`` by the rule-based tagger (lower-cased, in order, duplicates kept).

    >>> rule_nouns("Upgraded Portable 4K HDMI Cable with Braided Nylon - 6 ft")
    ['hdmi', 'cable', 'nylon', 'ft']
    """
    out: list[str] = []
    for token in _TOKEN_RE.findall(str(text).lower()):
        if "'" in token or "’" in token:
            token = re.split(r"['’]", token, maxsplit=1)[0]
        if len(token) < 2 or token in STOPWORDS or token in ADJECTIVES:
            continue
        if any(ch.isdigit() for ch in token):
            continue
        if token not in _SUFFIX_NOUNS and len(token) > 4 and _SUFFIX_RE.search(token):
            continue
        out.append(token)
    return out


def _load_spacy(models: Sequence[str]) -> tuple[Callable[[str], list[str]], str] | None:
    # Models are installed as packages: look for them before importing spaCy (a 5-15 s import).
    installed = [m for m in models if importlib.util.find_spec(m) is not None]
    if not installed or importlib.util.find_spec("spacy") is None:
        return None
    spacy = importlib.import_module("spacy")
    for name in installed:
        try:
            nlp = spacy.load(name)
        except (OSError, ImportError, ValueError):
            continue

        def tag(text: str, _nlp=nlp) -> list[str]:
            return [t.text.lower() for t in _nlp(text) if t.pos_ in _NOUN_POS]

        return tag, f"spacy:{name}"
    return None


class TitleNouns:
    """Callable ``title -> list of lower-cased nouns`` with a per-instance LRU cache.

    Args:
        backend: ``"auto"`` (spaCy when a model is installed, else rules), ``"spacy"`` (error
            when unavailable) or ``"rules"``.
        spacy_models: model names tried in order by the spaCy backend.
        cache_size: titles remembered (the same goal title is parsed at every purchase).
    """

    def __init__(
        self, backend: str = "auto", spacy_models: Sequence[str] = SPACY_MODELS, cache_size: int = 65536
    ) -> None:
        if backend not in ("auto", "spacy", "rules"):
            raise ValueError(f"backend must be 'auto', 'spacy' or 'rules', got {backend!r}")
        tagger: Callable[[str], list[str]] = rule_nouns
        name = "rules"
        if backend in ("auto", "spacy"):
            loaded = _load_spacy(spacy_models)
            if loaded is not None:
                tagger, name = loaded
            elif backend == "spacy":
                raise RuntimeError(
                    f"backend='spacy' needs the spacy package and one of the models "
                    f"{list(spacy_models)} installed; use backend='rules' or 'auto'"
                )
        self.backend = name
        self._cached = functools.lru_cache(maxsize=cache_size)(tagger)

    def __call__(self, text: str) -> list[str]:
        return list(self._cached(str(text)))


@functools.cache
def default_title_nouns() -> TitleNouns:
    """The shared ``TitleNouns(backend="auto")`` (spaCy is probed once per process)."""
    return TitleNouns()
