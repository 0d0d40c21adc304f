"""WebShop canonicalizer: the shopper's *state*, not the rendered page.

``canonicalize_webshop(obs, info)`` reads ``info["state"]`` (set by
:class:`~progpo_envs.webshop.env.WebShopEnv` on every reset and step) and returns:

===========  =====================================================================
page         canonical string
===========  =====================================================================
search       ``search``
results      ``results|q=<query>|p=<page>``
item         ``item|<ASIN>|<name>=<value>;...`` (chosen options, sorted by name)
sub-page     ``sub-page|<ASIN>|<Description|Features|Reviews>|<options>``
done         ``done|<ASIN>|<options>``
===========  =====================================================================

What it drops on purpose: the instruction (constant within an episode), the rendered
chrome (buttons, ``Page 2 (Total results: 50)``, prices, titles), how an item page was
reached (the query and results page behind an item do not make it a different state), and
the order in which options were chosen. What it keeps: which product, which options, which
query and results page -- the things that change what the agent can do next. The query
is whitespace-normalized (``search[red  shoes]`` and ``search[red shoes]`` show the same
results).

What is *not* a new state (so never a first visit for
:class:`~wrappers.coverage.FirstVisitCoverage`):

* a repeated search with the same query (even typed with other spacing or from another page):
  the same ``results|q=...|p=1``;
* coming back to a results page (``< prev`` from an item or from page 2, ``back to search``
  then the same search): the same ``results|q=...|p=N``; back to an item from its sub-page:
  the same ``item|...``;
* an invalid action (unknown click, ``look``): the env reports ``valid_action=False`` and the
  wrappers keep the previous state (see :mod:`wrappers.coverage`).

Not new:

    >>> same = {"page": "results", "query": "red tea", "page_num": 1}
    >>> canonicalize_webshop("...", {"state": same}) == canonicalize_webshop(
    ...     "...", {"state": {"page": "results", "query": " red   tea ", "page_num": 1, "asin": "B01"}})
    True

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
    >>> env.step("search[Red  Tea]")[4]["canonical_obs"]
    'results|q=red tea|p=1'

First visits on the env (repeated search, returning to a page, invalid clicks):

    >>> from wrappers.coverage import FirstVisitCoverage
    >>> env = FirstVisitCoverage(CanonicalizeObservation(WebShopEnv(num_products=200), canonicalize_webshop))
    >>> _ = env.reset(seed=0)
    >>> def go(action):
    ...     info = env.step(action)[4]
    ...     return info["canonical_obs"], info["first_visit"], info["coverage"]
    >>> go("search[red tea]")
    ('results|q=red tea|p=1', True, 1)
    >>> go("search[red tea]")                  # the same search again: not new
    ('results|q=red tea|p=1', False, 1)
    >>> go("click[next >]")
    ('results|q=red tea|p=2', True, 2)
    >>> go("click[< prev]")                    # back to page 1: seen
    ('results|q=red tea|p=1', False, 2)
    >>> go("click[back to search]"), go("search[Red Tea]")
    (('search', False, 2), ('results|q=red tea|p=1', False, 2))
    >>> go("click[no such button]")            # rejected (valid_action False): stays put
    ('results|q=red tea|p=1', False, 2)
"""
from __future__ import annotations

from typing import Any, Mapping

_SEP = " [SEP] "


def _options(opts: Any) -> str:
    if not isinstance(opts, Mapping):
        return ""
    return ";".join(f"{k}={opts[k]}" for k in sorted(opts, key=str))


def canonicalize_webshop(obs: Any, info: Mapping[str, Any]) -> str:
    """Canonical state string of a WebShop observation (see the module docstring)."""
    state = info.get("state") if isinstance(info, Mapping) else None
    if isinstance(state, Mapping) and state.get("page"):
        page = state["page"]
        if page == "search":
            return "search"
        if page == "results":
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
