"""Pages: the HTML the server serves reads back as exactly the text-mode observation."""

from __future__ import annotations

import copy
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from progpo_envs.webshop.canonical import canonicalize_webshop
from progpo_envs.webshop.pages import (
    DONE,
    ITEM,
    RESULTS,
    SEARCH,
    SUB_PAGE,
    SUB_PAGES,
    PageView,
    ShopState,
    price_tag,
    read_page,
    render_html,
    state_path,
)
from progpo_envs.webshop.server import parse_path
from progpo_envs.webshop.shop import Shop, ShopSession


def _views(shop: Shop, n: int, seed: int = 0):
    rng = random.Random(seed)
    instr = 'find <b>a</b> & "red" hat'
    yield shop.view(ShopState(), instr)
    for _ in range(n):
        asin = rng.choice(shop.products)["asin"]
        product = shop.by_asin[asin]
        opts = ShopState(ITEM, "q", 1, asin)
        for name, values in product["options"].items():
            if rng.random() < 0.5:
                opts = opts.with_option(name, rng.choice(values))
        yield shop.view(ShopState(RESULTS, rng.choice(["tea", "size", "red shoes"]), rng.randint(1, 6)), instr)
        yield shop.view(opts, instr)
        yield shop.view(ShopState(SUB_PAGE, "q", 2, asin, opts.options, rng.choice(SUB_PAGES)), instr)
        yield shop.view(ShopState(DONE, "q", 1, asin, opts.options), instr, reward=rng.random())


def test_html_reads_back_as_text_observation(ws_shop):
    for view in _views(ws_shop, 40):
        html = render_html(view, "sid")
        segments, clickables, has_bar = read_page(html)
        assert segments == view.segments(), view.kind
        assert clickables == view.clickables(), view.kind
        assert has_bar == view.has_search_bar
        assert "<script" not in html.lower() and "http" not in html  # offline, no JS


def test_everything_is_escaped():
    nasty = "<script>alert('x')</script> & <b>bold</b> \"quoted\""
    product = {
        "asin": "B0000000X1",
        "Title": nasty,
        "Description": nasty,
        "BulletPoints": [nasty],
        "options": {nasty: [nasty, "plain"]},
        "pricing": [1.0],
        "Rating": "N.A.",
        "Reviews": [],
    }
    for state in (
        ShopState(ITEM, nasty, 1, "B0000000X1", ((nasty, nasty),)),
        ShopState(SUB_PAGE, nasty, 1, "B0000000X1", (), "Description"),
        ShopState(SUB_PAGE, nasty, 1, "B0000000X1", (), "Features"),
    ):
        view = PageView(state.kind, nasty, state, product=product)
        html = render_html(view, "sid")
        assert "<script>" not in html and "<b>" not in html
        segments, clickables, _ = read_page(html)
        assert segments == view.segments() and nasty in segments
        assert clickables == view.clickables()
    results = PageView(RESULTS, nasty, ShopState(RESULTS, nasty, 2), total=1, hits=[])
    html = render_html(results, "sid")
    assert "<script>" not in html and read_page(html)[0] == results.segments()
    assert parse_path(state_path("sid", results.state)) == ("sid", results.state)


_text = st.text(max_size=20)


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from([RESULTS, ITEM, SUB_PAGE, DONE]),
    query=_text,
    page=st.integers(1, 99),
    asin=st.text(min_size=1, max_size=12),
    opts=st.dictionaries(_text, _text, max_size=3),
    sub_page=st.sampled_from(SUB_PAGES),
    sid=st.text(min_size=1, max_size=10),
)
def test_state_path_round_trips(kind, query, page, asin, opts, sub_page, sid):
    state = ShopState(
        kind,
        query,
        page,
        None if kind == RESULTS else asin,
        () if kind == RESULTS else tuple(opts.items()),
        sub_page if kind == SUB_PAGE else None,
    )
    assert parse_path(state_path(sid, state)) == (sid, state)


def test_text_observations_have_the_original_layout(ws_shop):
    s = ShopSession(ws_shop, ws_shop.goals[0])
    assert s.view().observation() == f"WebShop [SEP] Instruction: [SEP] {s.instruction} [SEP] Search"
    s.step("search[size]")
    obs = s.view().observation()
    first = ws_shop.hit(s.shop.search("size")[0])
    assert obs.startswith(
        f"Instruction: [SEP] {s.instruction} [SEP] Back to Search [SEP] "
        f"Page 1 (Total results: 50) [SEP] Next > [SEP] {first.asin} [SEP] {first.title} [SEP] {first.price}"
    )
    assert price_tag({"pricing": [19.99, 27.99]}) == "$19.99 to $27.99"


def test_canonicalizer_keeps_state_drops_chrome(ws_env):
    _, info = ws_env.reset(options={"goal_index": 0})
    c0 = canonicalize_webshop("", info)
    assert c0 == "search"
    _, _, _, _, i1 = ws_env.step("search[size]")
    _, _, _, _, i2 = ws_env.step("click[next >]")
    _, _, _, _, i3 = ws_env.step("click[< prev]")
    c1, c2, c3 = (canonicalize_webshop("", i) for i in (i1, i2, i3))
    page1 = sorted(c for c in i1["available_actions"]["clickables"] if c not in ("back to search", "next >"))
    assert c1 == "results|" + ",".join(page1) and len(page1) == 10
    assert c2.startswith("results|") and c2 != c1 and c3 == c1
    # without clickables (an info from elsewhere) the query and page stand in for the products
    assert canonicalize_webshop("", {"state": i2["state"]}) == "results|q=size|p=2"
    asin = i3["available_actions"]["clickables"][2]
    _, _, _, _, i4 = ws_env.step(f"click[{asin}]")
    assert canonicalize_webshop("", i4) == f"item|{asin.upper()}|"
    # the same item reached from another query is the same state
    _, _, _, _, i5 = ws_env.step("search[size  ]")
    _, _, _, _, i6 = ws_env.step(f"click[{asin}]")
    assert canonicalize_webshop("", i6) == canonicalize_webshop("", i4)
    # option order does not matter
    a = copy.deepcopy(i4)
    b = copy.deepcopy(i4)
    a["state"]["options"] = {"size": "7", "color": "red"}
    b["state"]["options"] = {"color": "red", "size": "7"}
    assert canonicalize_webshop("", a) == canonicalize_webshop("", b) == f"item|{asin.upper()}|color=red;size=7"
    assert (
        canonicalize_webshop("x", {**a, "state": {**a["state"], "page": "sub-page", "sub_page": "Features"}})
        == f"sub-page|{asin.upper()}|Features|color=red;size=7"
    )
    # no info: falls back on the text, minus the instruction
    assert canonicalize_webshop(
        "Instruction: [SEP] buy x [SEP] Back to Search [SEP] < Prev [SEP] hi", {}
    ) == canonicalize_webshop("Instruction: [SEP] buy y [SEP] Back to Search [SEP] < Prev [SEP] hi", {})


@pytest.mark.parametrize("kind", [SEARCH, RESULTS])
def test_view_kinds_without_product(ws_shop, kind):
    v = ws_shop.view(ShopState(kind, "tea", 1) if kind == RESULTS else ShopState(), "i")
    assert v.product is None and read_page(render_html(v, "s"))[0] == v.segments()


def test_paging_and_new_query_strings_cannot_farm_first_visits(ws_shop):
    from progpo_envs.webshop.env import WebShopEnv
    from wrappers.canonicalize import CanonicalizeObservation
    from wrappers.coverage import FirstVisitCoverage

    env = FirstVisitCoverage(
        CanonicalizeObservation(WebShopEnv(shop=ws_shop, max_episode_steps=10**4), canonicalize_webshop)
    )
    env.reset(seed=0)
    info = env.step("search[size]")[4]  # 50 hits: 5 pages
    for _ in range(40):
        info = env.step("click[next >]")[4]
    assert info["coverage"] == 5 and info["state"]["page_num"] == 5
    for k in range(40):  # forty different strings that find nothing: one empty results page
        info = env.step(f"search[zq{k}xv{k * 7}]")[4]
    assert info["coverage"] == 6
