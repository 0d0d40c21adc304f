"""The shop's behaviour: action grammar, page transitions, search paging and purchases.

:class:`Shop` is the read-only backend of one catalog (products, prices, search index),
shared by every session, env and the HTTP server. :class:`ShopSession` is one shopper's
episode: it applies ``search[...]`` / ``click[...]`` exactly as the original text env
(``web_agent_site/envs/web_agent_text_env.py``) does:

* ``search[q]`` works from any page; ``q`` is lower-cased; results are the top 50 BM25
  hits, 10 a page; options and the open product are cleared.
* ``click[x]`` (``x`` lower-cased) is valid only for a clickable of the current page and
  ``x != "search"``. ``buy now`` purchases (the only way an episode ends), ``back to
  search`` returns to the search page, ``next >`` / ``< prev`` page the results
  (``next >`` only where another page of hits exists: at most 5 pages of 10, none for a query
  that found nothing; ``< prev`` after page 1), ``< prev`` on an item page goes back
  to its results page (clearing options), on a sub-page back to the item (keeping options);
  ``description`` / ``features`` / ``reviews`` open a sub-page; a product ASIN opens its
  item page with no option selected; an option value sets ``options[name] = value``.
* Anything else -- unknown verb, unlisted clickable, ``search[]``, unbalanced brackets, a
  newline inside the action, a string that is not valid Unicode (lone surrogates), more
  than :data:`MAX_ACTION_CHARS` characters -- is a no-op
  with ``valid_action=False``. Leading/trailing whitespace around an action is ignored.

Example:
    >>> from progpo_envs.webshop.data import load_catalog
    >>> shop = Shop(load_catalog(num_products=200))
    >>> s = shop.new_session(goal_index=0)
    >>> s.view().kind, s.step("click[next >]").valid
    ('search', False)
    >>> s.step("search[tea]").valid, s.state.kind, s.view().total
    (True, 'results', 5)
    >>> s.step("click[next >]").valid          # 5 hits: one page, no next page
    False
    >>> s.step("search[red]").valid, s.view().total, s.step("click[next >]").valid, s.state.page_num
    (True, 20, True, 2)
    >>> s.step("click[next >]").valid, s.state.page_num   # 20 hits: two pages
    (False, 2)
"""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Mapping
from urllib.parse import quote

from progpo_envs.webshop.data import DATA_ENV_VAR, load_catalog
from progpo_envs.webshop.pages import (
    BACK_TO_SEARCH,
    DONE,
    END_BUTTON,
    ITEM,
    NEXT_PAGE,
    PREV_PAGE,
    RESULTS,
    SEARCH,
    SUB_PAGE,
    SUB_PAGES,
    Hit,
    PageView,
    ShopState,
    price_tag,
)
from progpo_envs.webshop.search import PRODUCT_WINDOW, SEARCH_RETURN_N, SearchIndex, get_search_index

#: Actions longer than this are rejected unparsed (a 1 MB action is garbage, not a query).
MAX_ACTION_CHARS = 10_000

#: A search query longer than this once URL-encoded (UTF-8, percent-escaped, lower-cased) is
#: rejected in both modes: in browser mode the query travels in the page URLs, and the local
#: server refuses request lines over 65,536 bytes. Every ASCII query within
#: :data:`MAX_ACTION_CHARS` fits (at most 3 bytes a character); 7,300 CJK characters (9 bytes
#: each) do not.
MAX_QUERY_URL_BYTES = 30_000


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # C0 and C1 control characters (tab and newline among them)


def parse_action(action: Any) -> tuple[str, str] | None:
    """Split ``verb[argument]`` into ``(verb, argument)``; ``None`` when malformed.

    The argument runs from the first ``[`` to the final ``]`` (so ``click[2 pack [red]]``
    keeps its brackets), must be non-empty and hold no control character (newline, NUL, ESC...);
    a ``search`` query must fit in
    :data:`MAX_QUERY_URL_BYTES` once URL-encoded.

    >>> parse_action("click[Buy Now]"), parse_action(" search[red shoes] ")
    (('click', 'Buy Now'), ('search', 'red shoes'))
    >>> [parse_action(a) for a in ("search[]", "click[", "look", "click[a]b", "search[a\\nb]", 7, "search[\\udcff]")]
    [None, None, None, None, None, None, None]
    >>> parse_action("search[red\\x00shoes]"), parse_action("search[\\x1b[31mred]")
    (None, None)
    """
    if not isinstance(action, str) or len(action) > MAX_ACTION_CHARS:
        return None
    try:
        action.encode("utf-8")  # lone surrogates cannot reach a page (or a browser)
    except UnicodeEncodeError:
        return None
    action = action.strip()
    if _CONTROL.search(action) or not action.endswith("]"):
        return None  # a newline, NUL, ESC or other control character never reaches a page
    open_at = action.find("[")
    if open_at <= 0:
        return None
    verb, arg = action[:open_at], action[open_at + 1 : -1]
    if not arg:
        return None
    if verb == "search" and query_url_bytes(arg) > MAX_QUERY_URL_BYTES:
        return None
    return verb, arg


def query_url_bytes(query: str) -> int:
    """Length of ``query`` (lower-cased, as the shop uses it) percent-encoded in a URL path.

    >>> query_url_bytes("red shoes"), query_url_bytes("茶")
    (11, 9)
    """
    return len(quote(query.lower(), safe=""))


@dataclass(frozen=True)
class StepResult:
    """What one action did: ``valid`` (it was understood and allowed), the purchase outcome."""

    valid: bool
    reward: float = 0.0
    done: bool = False
    breakdown: Mapping[str, Any] | None = None


class Shop:
    """One catalog's shop backend: products, prices, goals, search index, reward.

    Args:
        catalog: a :class:`progpo_envs.webshop.data.Catalog` (``load_catalog(...)``).
        index: a prebuilt :class:`SearchIndex`; by default the shared cached one.
        index_cache_dir: optional folder to keep the index on disk between processes.
    """

    def __init__(self, catalog: Any, index: SearchIndex | None = None, index_cache_dir: Any = None):
        self.catalog = catalog
        self.products = catalog.products
        self.by_asin = catalog.by_asin
        self.prices = catalog.prices
        self.goals = catalog.goals
        self.index = index if index is not None else get_search_index(self.products, index_cache_dir)
        self._hit_cache: dict[str, Hit] = {}
        self._search_cache: dict[str, list[str]] = {}

    def search(self, query: str) -> list[str]:
        """Top :data:`SEARCH_RETURN_N` ASINs for ``query`` (memoized, 4096 queries)."""
        hits = self._search_cache.get(query)
        if hits is None:
            hits = self.index.search_asins(query, SEARCH_RETURN_N)
            if len(self._search_cache) >= 4096:
                self._search_cache.clear()
            self._search_cache[query] = hits
        return hits

    def clear_search_cache(self) -> None:
        """Forget memoized search results (the index itself stays)."""
        self._search_cache.clear()

    def hit(self, asin: str) -> Hit:
        h = self._hit_cache.get(asin)
        if h is None:
            p = self.by_asin[asin]
            h = self._hit_cache[asin] = Hit(str(p["asin"]), str(p.get("Title", "")), price_tag(p))
        return h

    def view(self, state: ShopState, instruction: str, reward: float | None = None) -> PageView:
        """The :class:`PageView` of ``state`` for a shopper with ``instruction``."""
        if state.kind == RESULTS:
            asins = self.search(state.query or "")
            page = state.page_num or 1
            window = asins[(page - 1) * PRODUCT_WINDOW : page * PRODUCT_WINDOW] if page >= 1 else []
            return PageView(RESULTS, instruction, state, total=len(asins), hits=[self.hit(a) for a in window])
        if state.kind in (ITEM, SUB_PAGE):
            return PageView(state.kind, instruction, state, product=self.by_asin[state.asin])
        if state.kind == DONE:
            return PageView(DONE, instruction, state, reward=reward)
        return PageView(SEARCH, instruction, state)

    def purchase(self, goal: Mapping[str, Any], asin: str, options: Mapping[str, str]) -> tuple[float, dict[str, Any]]:
        """The WebShop score of buying ``asin`` with ``options`` for ``goal``, and its breakdown."""
        # the scorer loads its fuzzy matcher at import: building the shop and serving it do without
        from progpo_envs.webshop.reward import get_reward

        product = self.by_asin[asin]
        score, breakdown = get_reward(product, goal, self.prices.get(asin), dict(options), verbose=True)
        return float(score), dict(breakdown or {})

    def new_session(self, goal_index: int) -> "ShopSession":
        return ShopSession(self, self.goals[goal_index])


_SHOP_CACHE: "OrderedDict[tuple, Shop]" = OrderedDict()
_SHOP_CACHE_LOCK = threading.Lock()


def get_shop(
    data_dir: Any = None,
    *,
    num_products: int | None = 1000,
    seed: int = 0,
    human_goals: bool = False,
    index_cache_dir: Any = None,
) -> Shop:
    """A :class:`Shop` for these loader arguments, shared by every env of the process.

    The G copies of a group (and every group) in one process then share one catalog and one
    index instead of loading their own. Kept in a small LRU (4 shops) keyed by the
    arguments and the ``WEBSHOP_DATA`` variable; shops are read-only, so sharing is safe.

    >>> get_shop(num_products=100) is get_shop(num_products=100)
    True
    """
    key = (
        None if data_dir is None else os.fspath(data_dir),
        os.environ.get(DATA_ENV_VAR, "") if data_dir is None else "",
        num_products,
        seed,
        bool(human_goals),
        None if index_cache_dir is None else os.fspath(index_cache_dir),
    )
    with _SHOP_CACHE_LOCK:
        if key in _SHOP_CACHE:
            _SHOP_CACHE.move_to_end(key)
            return _SHOP_CACHE[key]
    shop = Shop(
        load_catalog(data_dir, num_products=num_products, seed=seed, human_goals=human_goals),
        index_cache_dir=index_cache_dir,
    )
    with _SHOP_CACHE_LOCK:
        _SHOP_CACHE[key] = shop
        while len(_SHOP_CACHE) > 4:
            _SHOP_CACHE.popitem(last=False)
    return shop


class ShopSession:
    """One shopper on the shop: the current :class:`ShopState` and the transitions."""

    def __init__(self, shop: Shop, goal: Mapping[str, Any]):
        self.shop = shop
        self.goal = goal
        self.instruction = str(goal.get("instruction_text", ""))
        self.state = ShopState()
        self.reward: float | None = None
        self.breakdown: dict[str, Any] | None = None
        self._view: PageView | None = None

    def view(self) -> PageView:
        if self._view is None:
            self._view = self.shop.view(self.state, self.instruction, self.reward)
        return self._view

    def _go(self, state: ShopState) -> None:
        self.state = state
        self._view = None

    def step(self, action: Any) -> StepResult:
        """Apply one action string (see the module docstring for the grammar)."""
        if self.state.kind == DONE:
            return StepResult(False, 0.0, True)
        parsed = parse_action(action)
        if parsed is None:
            return StepResult(False)
        verb, arg = parsed
        arg = arg.lower()
        if verb == "search":
            self._go(ShopState(RESULTS, query=arg, page_num=1))
            return StepResult(True)
        if verb != "click" or arg == "search":
            return StepResult(False)
        target = self.view().clickable_targets().get(arg)
        if target is None:
            return StepResult(False)
        return self._click(arg, target)

    def _click(self, name: str, target: tuple[str, str | None]) -> StepResult:
        st = self.state
        kind, extra = target
        if name == END_BUTTON.lower():
            if st.asin is None:  # the button is on product pages only, which name their product
                return StepResult(False)
            self.reward, self.breakdown = self.shop.purchase(self.goal, st.asin, st.options_dict())
            self._go(replace(st, kind=DONE, sub_page=None))
            return StepResult(True, self.reward, True, self.breakdown)
        if name == BACK_TO_SEARCH.lower():
            self._go(ShopState())
        elif name == NEXT_PAGE.lower() and st.kind == RESULTS:
            self._go(replace(st, page_num=(st.page_num or 1) + 1))
        elif name == PREV_PAGE.lower() and st.kind == RESULTS:
            self._go(replace(st, page_num=(st.page_num or 1) - 1))
        elif name == PREV_PAGE.lower() and st.kind == SUB_PAGE:
            self._go(replace(st, kind=ITEM, sub_page=None))
        elif name == PREV_PAGE.lower() and st.kind == ITEM:
            self._go(ShopState(RESULTS, query=st.query, page_num=st.page_num))
        elif name in {s.lower() for s in SUB_PAGES}:
            sub = next(s for s in SUB_PAGES if s.lower() == name)
            self._go(replace(st, kind=SUB_PAGE, sub_page=sub))
        elif kind == "product" and extra is not None:
            self._go(ShopState(ITEM, query=st.query, page_num=st.page_num, asin=extra))
        elif kind == "option" and extra is not None:
            self._go(st.with_option(extra, name))
        else:  # pragma: no cover - every listed clickable is handled above
            return StepResult(False)
        return StepResult(True)
