"""WebShop canonicalizer: the shopper's *state*, not the rendered page.

``canonicalize_webshop(obs, info)`` reads ``info["state"]`` (set by
:class:`~progpo_envs.webshop.env.WebShopEnv` on every reset and step) and returns:

===========  =====================================================================
page         canonical string
===========  =====================================================================
search       ``search``
results      ``results|<ASIN>,<ASIN>,...`` (the products the page lists, sorted)
item         ``item|<ASIN>|<name>=<value>;...`` (chosen options, sorted by name)
sub-page     ``sub-page|<ASIN>|<Description|Features|Reviews>|<options>``
done         ``done|<ASIN>|<options>``
===========  =====================================================================

What it drops on purpose: the instruction (constant within an episode), the rendered
chrome (buttons, ``Page 2 (Total results: 50)``, prices, titles), how an item page was
reached (the query and results page behind an item do not make it a different state), and
the order in which options were chosen. What it keeps: which product, which options, which
products a results page lists -- the things that change what the agent can do next.

A results page is the set of products it shows, not the text of the query: two queries that
list the same products are one state, and a query that finds nothing is the same empty
``results|`` page whatever its text. So neither typing new search strings nor paging (``next
>`` is offered only where another page exists: at most 5 pages of 10) can mint new states
without new products coming into view. Without ``info["available_actions"]`` (an info from
another source) the key falls back to ``results|q=<query>|p=<page>``, whitespace-normalized.

What is *not* a new state (so never a first visit for
:class:`~wrappers.coverage.FirstVisitCoverage`):

* a repeated search with the same query (even typed with other spacing or from another page),
  or another query that lists the same products: the same ``results|...``;
* a search that finds nothing, whatever its text: ``results|``;
* coming back to a results page (``< prev`` from an item or from page 2, ``back to search``
  then the same search): the same ``results|...``; back to an item from its sub-page:
  the same ``item|...``;
* an invalid action (unknown click, ``look``): the env reports ``valid_action=False`` and the
  wrappers keep the previous state (see :mod:`wrappers.coverage`).

Not new:

    >>> listed = {"clickables": ["back to search", "next >", "b02", "b01"]}
    >>> a = {"state": {"page": "results", "query": "red tea", "page_num": 1}, "available_actions": listed}
    >>> b = {"state": {"page": "results", "query": "tea, red", "page_num": 1}, "available_actions": listed}
    >>> canonicalize_webshop("...", a), canonicalize_webshop("...", a) == canonicalize_webshop("...", b)
    ('results|b01,b02', True)

Without ``info["state"]`` (an observation from elsewhere), the page type is recognized
from the text and the state is the observation minus its instruction.

Example:
    >>> canonicalize_webshop("...", {"state": {"page": "results", "query": "red  shoes", "page_num": 2}})
    'results|q=red shoes|p=2'
    >>> canonicalize_webshop("...", {"state": {"page": "item", "asin": "B01", "query": "x",
    ...     "page_num": 1, "options": {"size": "7", "color": "red"}}})
    'item|B01|color=red;size=7'
    >>> canonicalize_webshop("...", {"state": {"page": "sub-page", "asin": "B01", "sub_page": "Features", "options": {}}})
    'sub-page|B01|Features|'
    >>> canonicalize_webshop("WebShop [SEP] Instruction: [SEP] find a hat [SEP] Search", {})
    'search'

With the env-agnostic wrappers (``info["canonical_obs"]``, first-visit coverage)::

    >>> from wrappers.canonicalize import CanonicalizeObservation
    >>> from progpo_envs.webshop.env import WebShopEnv
    >>> env = CanonicalizeObservation(WebShopEnv(num_products=200), canonicalize_webshop)
    >>> env.reset(seed=0)[1]["canonical_obs"]
    'search'
    >>> env.step("search[Red  Tea]")[4]["canonical_obs"].startswith("results|b")
    True
    >>> env.step("search[zzzqqq]")[4]["canonical_obs"]       # nothing found
    'results|'

First visits on the env (repeated search, returning to a page, invalid clicks):

    >>> from wrappers.coverage import FirstVisitCoverage
    >>> env = FirstVisitCoverage(CanonicalizeObservation(WebShopEnv(num_products=200), canonicalize_webshop))
    >>> _ = env.reset(seed=0)
    >>> def go(action):
    ...     info = env.step(action)[4]
    ...     return info["first_visit"], info["coverage"]
    >>> go("search[red]")
    (True, 1)
    >>> go("search[red]")                      # the same search again: not new
    (False, 1)
    >>> go("click[next >]")                    # 20 hits: page 2 lists new products
    (True, 2)
    >>> go("click[next >]")                    # no page 3: rejected, stays put
    (False, 2)
    >>> go("click[< prev]")                    # back to page 1: seen
    (False, 2)
    >>> go("click[back to search]"), go("search[Red]")
    ((False, 2), (False, 2))
    >>> go("search[zzzqqq]"), go("search[qqqzzz]")   # two empty searches: one new state
    ((True, 3), (False, 3))
"""

from __future__ import annotations

from typing import Any, Mapping

_SEP = " [SEP] "


def _options(opts: Any) -> str:
    if not isinstance(opts, Mapping):
        return ""
    return ";".join(f"{k}={opts[k]}" for k in sorted(opts, key=str))


_RESULTS_BUTTONS = frozenset({"back to search", "< prev", "next >"})


def _shown_products(info: Mapping[str, Any]) -> list[str] | None:
    """The ASINs a results page lists (its clickables minus the paging buttons), sorted; None
    when the info carries no clickables (then the query and page number stand in for them)."""
    available = info.get("available_actions")
    clickables = available.get("clickables") if isinstance(available, Mapping) else None
    if not isinstance(clickables, (list, tuple)):
        return None
    return sorted(str(c) for c in clickables if str(c) not in _RESULTS_BUTTONS)


def canonicalize_webshop(obs: Any, info: Mapping[str, Any]) -> str:
    """Canonical state string of a WebShop observation (see the module docstring)."""
    state = info.get("state") if isinstance(info, Mapping) else None
    if isinstance(state, Mapping) and state.get("page"):
        page = state["page"]
        if page == "search":
            return "search"
        if page == "results":
            shown = _shown_products(info)
            if shown is not None:
                return "results|" + ",".join(shown)
            query = " ".join(str(state.get("query") or "").split())
            return f"results|q={query}|p={state.get('page_num') or 1}"
        asin = state.get("asin") or ""
        opts = _options(state.get("options"))
        if page == "item":
            return f"item|{asin}|{opts}"
        if page == "sub-page":
            return f"sub-page|{asin}|{state.get('sub_page') or ''}|{opts}"
        if page == "done":
            return f"done|{asin}|{opts}"
        return f"{page}|{asin}|{opts}"
    return _from_text(str(obs))


def _from_text(obs: str) -> str:
    parts = obs.split(_SEP)
    if parts[:2] == ["WebShop", "Instruction:"]:
        return "search"
    if parts and parts[0] == "Thank you for shopping with us!":
        return "done|" + _SEP.join(parts[1:])
    # Drop "Instruction: [SEP] <instruction>", which is the same on every page of an episode.
    if parts[:1] == ["Instruction:"]:
        parts = parts[2:]
    return "page|" + _SEP.join(parts)


__all__ = ["canonicalize_webshop"]
