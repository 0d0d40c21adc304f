"""WebShop pages: one page model, rendered as original-style text and as offline HTML.

A page is a :class:`PageView` (what the shop shows for a :class:`ShopState`). Text mode
reads :meth:`PageView.segments` -- the visible text nodes the original WebShop pages hold,
in document order -- joined with ``" [SEP] "``; browser mode serves :func:`render_html` of
the same view and reads the DOM back with :func:`html_segments` / :func:`html_clickables`.
Both paths produce the same strings (tested through headless Chromium).

The pages follow the original templates (``web_agent_site/templates``, the layout the
original ``text`` mode observations come from):

=========  ===============================================================================
page       text observation
=========  ===============================================================================
search     ``WebShop [SEP] Instruction: [SEP] <instr> [SEP] Search``
results    ``Instruction: [SEP] <instr> [SEP] Back to Search [SEP] Page 2 (Total results:
           50) [SEP] < Prev [SEP] Next > [SEP] <ASIN> [SEP] <title> [SEP] <price> ...``
item       ``... Back to Search [SEP] < Prev [SEP] color [SEP] black [SEP] red [SEP] <title>
           [SEP] Price: $19.99 [SEP] Rating: N.A. [SEP] Description [SEP] Features [SEP]
           Reviews [SEP] Buy Now``
sub-page   ``... Back to Search [SEP] < Prev [SEP] <description | bullet points | reviews>``
done       ``Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) [SEP] 0.5``
=========  ===============================================================================

Differences from the original pages, on purpose: no CDN CSS/JS (one local stylesheet), option
radios are plain links (the original needed jQuery from a CDN for them to work), every
control is a link or a GET form (no JavaScript needed), and the done page shows the score
only (the original also dumps the goal in a hidden block that text mode could read).

Example:
    >>> view = PageView(kind=SEARCH, instruction="find a red shoe")
    >>> view.observation()
    'WebShop [SEP] Instruction: [SEP] find a red shoe [SEP] Search'
    >>> view.clickables(), view.has_search_bar
    (['search'], True)
    >>> html = render_html(view, session_id="s1")
    >>> html_segments(html) == view.segments() and html_clickables(html) == view.clickables()
    True
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import quote

from progpo_envs.webshop.search import PRODUCT_WINDOW as RESULTS_PER_PAGE

SEARCH = "search"
RESULTS = "results"
ITEM = "item"
SUB_PAGE = "sub-page"
DONE = "done"
PAGE_KINDS = (SEARCH, RESULTS, ITEM, SUB_PAGE, DONE)

END_BUTTON = "Buy Now"
NEXT_PAGE = "Next >"
PREV_PAGE = "< Prev"
BACK_TO_SEARCH = "Back to Search"
SEARCH_BUTTON = "Search"
#: the item page's sub-pages, as the original shop names its buttons
SUB_PAGES = ("Description", "Features", "Reviews")
OBS_SEP = " [SEP] "

TEMPLATE_DIR = Path(__file__).with_name("templates")


@dataclass(frozen=True)
class ShopState:
    """Where a shopper is: the page and what it depends on (never the rendered chrome).

    ``options`` keeps the chosen options as ``(name, value)`` pairs in the order they were
    first chosen (as the original's ``session["options"]`` dict). ``query`` is the search
    text (lower-cased), ``page_num`` the results page, ``asin`` the open product,
    ``sub_page`` one of :data:`SUB_PAGES` on a sub-page.

    >>> s = ShopState(kind=ITEM, query="red shoe", page_num=1, asin="B0001")
    >>> s.with_option("size", "7").with_option("color", "red").with_option("size", "8").options
    (('size', '8'), ('color', 'red'))
    >>> ShopState.from_dict(s.to_dict()) == s
    True
    """

    kind: str = SEARCH
    query: str | None = None
    page_num: int | None = None
    asin: str | None = None
    options: tuple[tuple[str, str], ...] = ()
    sub_page: str | None = None

    def with_option(self, name: str, value: str) -> "ShopState":
        """This state with ``options[name] = value`` (position kept when re-chosen)."""
        opts = dict(self.options)
        opts[name] = value
        return replace(self, options=tuple(opts.items()))

    def options_dict(self) -> dict[str, str]:
        """The chosen options as a dict (the form the reward function takes)."""
        return dict(self.options)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (``info["state"]``): page, query, page_num, asin, options, sub_page."""
        return {
            "page": self.kind,
            "query": self.query,
            "page_num": self.page_num,
            "asin": self.asin,
            "options": dict(self.options),
            "sub_page": self.sub_page,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ShopState":
        """Inverse of :meth:`to_dict`."""
        return cls(
            kind=d.get("page", SEARCH),
            query=d.get("query"),
            page_num=d.get("page_num"),
            asin=d.get("asin"),
            options=tuple((str(k), str(v)) for k, v in (d.get("options") or {}).items()),
            sub_page=d.get("sub_page"),
        )


def price_tag(product: Mapping[str, Any]) -> str:
    """The price text WebShop shows: ``$19.99``, ``$19.99 to $27.99`` or ``$100.0`` if unknown.

    >>> price_tag({"pricing": [19.99, 27.99]}), price_tag({"pricing": []}), price_tag({"Price": "$5.0"})
    ('$19.99 to $27.99', '$100.0', '$5.0')
    """
    for key in ("price_tag", "Price"):  # the loader's tag, or the original's "Price" text
        tag = product.get(key)
        if isinstance(tag, str) and tag.startswith("$"):
            return tag
    pricing = list(product.get("pricing") or [])
    if not pricing:
        return "$100.0"
    if len(pricing) == 1:
        return f"${float(pricing[0])}"
    return f"${float(pricing[0])} to ${float(pricing[1])}"


def _clean(text: Any) -> str:
    """A text node as a browser's DOM holds it, stripped (newlines normalized, NUL replaced)."""
    s = str(text)
    if "\r" in s:
        s = s.replace("\r\n", "\n").replace("\r", "\n")
    if "\x00" in s:
        s = s.replace("\x00", "\ufffd")
    return s.strip()


@dataclass(frozen=True)
class Hit:
    """One search result line: ASIN, title, price text."""

    asin: str
    title: str
    price: str


@dataclass
class PageView:
    """Everything one page shows. Build it with :meth:`progpo_envs.webshop.shop.Shop.view`."""

    kind: str
    instruction: str
    state: ShopState = field(default_factory=ShopState)
    total: int = 0
    hits: Sequence[Hit] = ()
    product: Mapping[str, Any] | None = None
    reward: float | None = None

    @property
    def has_search_bar(self) -> bool:
        return self.kind == SEARCH

    @property
    def has_next_page(self) -> bool:
        """A results page offers ``Next >`` only when another page of hits exists (at most
        :data:`~progpo_envs.webshop.search.SEARCH_RETURN_N` hits, 10 a page), as the original."""
        return self.kind == RESULTS and (self.state.page_num or 1) * RESULTS_PER_PAGE < self.total

    # --- text mode -----------------------------------------------------------------------

    def segments(self) -> list[str]:
        """Visible text nodes in document order, stripped, empty ones dropped."""
        raw: list[Any]
        if self.kind == SEARCH:
            raw = ["WebShop", "Instruction:", self.instruction, SEARCH_BUTTON]
        elif self.kind == DONE:
            raw = ["Thank you for shopping with us!", "Your score (min 0.0, max 1.0)", self.reward]
        else:
            raw = ["Instruction:", self.instruction, BACK_TO_SEARCH]
            if self.kind == RESULTS:
                page = self.state.page_num or 1
                raw.append(f"Page {page} (Total results: {self.total})")
                if page > 1:
                    raw.append(PREV_PAGE)
                if self.has_next_page:
                    raw.append(NEXT_PAGE)
                for h in self.hits:
                    raw += [h.asin, h.title, h.price]
            else:
                raw.append(PREV_PAGE)
                p = self.product or {}
                if self.kind == ITEM:
                    for name, values in (p.get("options") or {}).items():
                        raw.append(name)
                        raw += list(values)
                    raw += [
                        p.get("Title", ""),
                        f"Price: {price_tag(p)}",
                        f"Rating: {p.get('Rating', 'N.A.')}",
                        *SUB_PAGES,
                        END_BUTTON,
                    ]
                elif self.state.sub_page == "Description":
                    raw.append(p.get("Description") or "")
                elif self.state.sub_page == "Features":
                    raw += list(p.get("BulletPoints") or [])
                elif self.state.sub_page == "Reviews":
                    for r in p.get("Reviews") or []:
                        raw += [f'"{r.get("title", "")}"', r.get("score", ""), r.get("body", "")]
        out = []
        for item in raw:
            s = _clean(item)
            if s:
                out.append(s)
        return out

    def observation(self) -> str:
        """The original ``text`` mode observation: :meth:`segments` joined by ``" [SEP] "``."""
        return OBS_SEP.join(self.segments())

    def clickable_targets(self) -> dict[str, tuple[str, str | None]]:
        """``clickable text -> (kind, extra)``: a button, a product (extra: its ASIN) or an
        option (extra: the option name).

        Buttons and product links come first in page order, then option values, later
        entries replacing earlier ones under the same text (the original's dict).
        """
        targets: dict[str, tuple[str, str | None]] = {}
        if self.kind == SEARCH:
            targets[SEARCH_BUTTON.lower()] = ("button", None)
        elif self.kind == RESULTS:
            targets[BACK_TO_SEARCH.lower()] = ("button", None)
            if (self.state.page_num or 1) > 1:
                targets[PREV_PAGE.lower()] = ("button", None)
            if self.has_next_page:
                targets[NEXT_PAGE.lower()] = ("button", None)
            for h in self.hits:
                targets[h.asin.lower()] = ("product", h.asin)
        elif self.kind in (ITEM, SUB_PAGE):
            targets[BACK_TO_SEARCH.lower()] = ("button", None)
            targets[PREV_PAGE.lower()] = ("button", None)
            if self.kind == ITEM:
                for name in (*SUB_PAGES, END_BUTTON):
                    targets[name.lower()] = ("button", None)
                for name, values in ((self.product or {}).get("options") or {}).items():
                    for v in values:
                        targets[str(v)] = ("option", str(name))
        return targets

    def clickables(self) -> list[str]:
        """What ``click[...]`` accepts here, as the original's ``available_actions``."""
        return list(self.clickable_targets())


# --- HTML ------------------------------------------------------------------------------------


def _q(text: Any) -> str:
    return quote(str(text), safe="")


def state_path(session_id: str, state: ShopState) -> str:
    """The URL path of ``state`` on the local shop server (every part URL-quoted).

    >>> state_path("s1", ShopState(kind=RESULTS, query="red/blue shoe", page_num=2))
    '/search_results/s1/red%2Fblue%20shoe/2'
    """
    sid = _q(session_id)
    if state.kind == SEARCH:
        return f"/{sid}"
    opts = _q(json.dumps(list(state.options), separators=(",", ":")))
    q = _q(state.query if state.query is not None else "")
    page = state.page_num or 1
    if state.kind == RESULTS:
        return f"/search_results/{sid}/{q}/{page}"
    if state.kind == ITEM:
        return f"/item_page/{sid}/{_q(state.asin)}/{q}/{page}/{opts}"
    if state.kind == SUB_PAGE:
        return f"/item_sub_page/{sid}/{_q(state.asin)}/{q}/{page}/{_q(state.sub_page)}/{opts}"
    if state.kind == DONE:
        return f"/done/{sid}/{_q(state.asin)}/{q}/{page}/{opts}"
    raise ValueError(f"unknown page kind {state.kind!r}")


@lru_cache(maxsize=1)
def _jinja_env() -> Any:
    import jinja2  # the [webshop] extra

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        autoescape=True,  # every string that reaches a page is HTML-escaped
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )


def render_html(view: PageView, session_id: str) -> str:
    """The page as offline HTML (no scripts, no external resources)."""
    st = view.state
    links: dict[str, str] = {"back": state_path(session_id, ShopState())}
    ctx: dict[str, Any] = {"view": view, "session_id": session_id, "links": links}
    if view.kind == SEARCH:
        links["search"] = f"/{_q(session_id)}/search"
    elif view.kind == RESULTS:
        page = st.page_num or 1
        links["prev"] = state_path(session_id, replace(st, page_num=page - 1))
        links["next"] = state_path(session_id, replace(st, page_num=page + 1))
        ctx["hits"] = [(h, state_path(session_id, ShopState(ITEM, st.query, page, h.asin))) for h in view.hits]
    elif view.kind in (ITEM, SUB_PAGE):
        p = view.product or {}
        item_state = replace(st, kind=ITEM, sub_page=None)
        if view.kind == ITEM:
            links["prev"] = state_path(session_id, ShopState(RESULTS, st.query, st.page_num))
        else:
            links["prev"] = state_path(session_id, item_state)
        chosen = st.options_dict()
        ctx["option_groups"] = [
            (
                str(name),
                [
                    (
                        str(v),
                        state_path(session_id, item_state.with_option(str(name), str(v))),
                        chosen.get(str(name)) == str(v),
                    )
                    for v in values
                ],
            )
            for name, values in (p.get("options") or {}).items()
        ]
        ctx["sub_links"] = [
            (name, state_path(session_id, replace(item_state, kind=SUB_PAGE, sub_page=name))) for name in SUB_PAGES
        ]
        links["buy"] = state_path(session_id, replace(item_state, kind=DONE))
        ctx["title"] = p.get("Title", "")
        ctx["price"] = f"Price: {price_tag(p)}"
        ctx["rating"] = f"Rating: {p.get('Rating', 'N.A.')}"
        ctx["description"] = p.get("Description") or ""
        ctx["bullets"] = list(p.get("BulletPoints") or [])
        ctx["reviews"] = [
            (f'"{r.get("title", "")}"', r.get("score", ""), r.get("body", "")) for r in p.get("Reviews") or []
        ]
    template = {
        SEARCH: "search_page.html",
        RESULTS: "results_page.html",
        ITEM: "item_page.html",
        SUB_PAGE: "sub_page.html",
        DONE: "done_page.html",
    }[view.kind]
    return _jinja_env().get_template(template).render(**ctx)


# --- reading a page back (browser mode) ------------------------------------------------------

_INVISIBLE = frozenset({"style", "script", "head", "title", "meta", "noscript", "template"})
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
)


class _PageReader(HTMLParser):
    """Visible text nodes and clickables of a served page (stdlib parser, no bs4)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.texts: list[str] = []
        self.buttons: list[tuple[str, str]] = []  # (key, kind) in document order
        self.options: list[tuple[str, str]] = []
        self._capture: list[list[Any]] = []  # open clickable elements: [tag, kind, key|None, text]
        self.has_search_bar = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id") == "search_input":
            self.has_search_bar = True
        kind = a.get("data-kind")
        if kind in ("button", "product", "option") and tag not in _VOID:
            self._capture.append([tag, kind, a.get("data-value"), []])
        if tag not in _VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID:
            return
        if tag in self.stack:
            while self.stack:
                if self.stack.pop() == tag:
                    break
        if self._capture and self._capture[-1][0] == tag:
            _, kind, value, parts = self._capture.pop()
            if kind == "option":
                self.options.append((value if value is not None else "".join(parts), kind))
            else:
                self.buttons.append(("".join(parts).strip().lower(), kind))

    def handle_data(self, data: str) -> None:
        if self.stack and self.stack[-1] in _INVISIBLE:
            return
        if any(t in _INVISIBLE for t in self.stack):
            return
        s = data.strip()
        if s:
            self.texts.append(s)
        for cap in self._capture:
            cap[3].append(data)


def _read(html: str) -> _PageReader:
    reader = _PageReader()
    reader.feed(html)
    reader.close()
    return reader


def html_segments(html: str) -> list[str]:
    """Visible text nodes of ``html`` (what the original text mode joins with [SEP])."""
    return _read(html).texts


def html_clickables(html: str) -> list[str]:
    """Clickable texts of a served page: buttons and product links, then option values."""
    return read_page(html)[1]


def read_page(html: str) -> tuple[list[str], list[str], bool]:
    """``(visible text segments, clickables, has_search_bar)`` of a served page, one parse."""
    r = _read(html)
    out: dict[str, None] = {}
    for key, _ in r.buttons + r.options:
        out[key] = None
    return r.texts, list(out), r.has_search_bar
