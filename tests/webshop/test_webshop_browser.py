"""Browser mode through real headless Chromium: same observations and rewards as text mode."""

from __future__ import annotations

import copy
import os
import socket
from urllib.parse import urlsplit

import pytest

from progpo_envs.webshop.browser import CHROMEDRIVER_BINARY, CHROMIUM_BINARY
from progpo_envs.webshop.data import load_catalog
from progpo_envs.webshop.env import WebShopEnv
from progpo_envs.webshop.shop import Shop

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(600)]

if not (os.path.exists(CHROMIUM_BINARY) and os.path.exists(CHROMEDRIVER_BINARY)):
    pytest.skip(f"needs {CHROMIUM_BINARY} and {CHROMEDRIVER_BINARY}", allow_module_level=True)
pytest.importorskip("selenium", reason="browser extra [browser] not installed")

NASTY = '<script>window.pwned = 1</script> Herbal Tea & <b>Bold</b> "Quoted"'


@pytest.fixture(scope="module")
def nasty_shop():
    """The embedded catalog, one product retitled with HTML that must come out as text."""
    catalog = copy.deepcopy(load_catalog(num_products=300, seed=0))
    goal = catalog.goals[0]
    product = catalog.by_asin[goal["asin"]]
    product["Title"] = NASTY
    product["BulletPoints"] = [NASTY] + list(product["BulletPoints"])
    return Shop(catalog)


@pytest.fixture(scope="module")
def envs(nasty_shop):
    browser = WebShopEnv(shop=nasty_shop, mode="browser", split="all", max_episode_steps=100)
    text = WebShopEnv(shop=nasty_shop, mode="text", split="all", max_episode_steps=100)
    yield browser, text
    browser.close()
    text.close()


COMPARED = ("page", "state", "available_actions", "admissible_commands", "valid_action", "won", "outcome", "step")


def _same(b, t):
    (bo, br, bterm, btrunc, bi), (to, tr, tterm, ttrunc, ti) = b, t
    assert bo == to
    assert (br, bterm, btrunc) == (tr, tterm, ttrunc)
    for key in COMPARED:
        assert bi[key] == ti[key], key
    assert "browser_error" not in bi


def test_browser_and_text_mode_agree_step_by_step(envs, ws_oracle):
    browser, text = envs
    bo, bi = browser.reset(options={"goal_index": 0})
    to, ti = text.reset(options={"goal_index": 0})
    assert bo == to and bi["state"] == ti["state"] and bi["available_actions"] == ti["available_actions"]
    assert urlsplit(bi["url"]).hostname == "127.0.0.1"
    goal = ti["goal"]
    script = [
        "search[<script>alert(1)</script> tea]",  # escaped query, results page
        "click[next >]",
        "click[next >]",
        "click[< prev]",
        "click[search]",
        "look",
        "click[buy now]",  # invalid: no-ops in both
        f"search[{goal['query']}]",
        "click[back to search]",
        f"search[{goal['instruction_text']}]",
    ]
    for action in script:
        _same(browser.step(action), text.step(action))
    # the scripted oracle's path (item page, options, buy) through both
    text.reset(options={"goal_index": 0})
    taken = ws_oracle(text, ti)
    browser.reset(options={"goal_index": 0})
    text.reset(options={"goal_index": 0})
    extra = [
        taken[-2] if len(taken) > 1 else taken[0],
        "click[features]",
        "click[< prev]",
        "click[description]",
        "click[reviews]",
    ]
    for action in taken[:-1] + extra + ["click[< prev]", taken[-1]]:
        b, t = browser.step(action), text.step(action)
        _same(b, t)
    assert b[2] and b[1] == t[1] and b[4]["score_breakdown"] == t[4]["score_breakdown"]


def test_paging_ends_at_the_last_page_in_both_modes(envs):
    browser, text = envs
    browser.reset(options={"goal_index": 0})
    text.reset(options={"goal_index": 0})
    shop = text.unwrapped.shop
    query = next(q for q in ("red", "black", "tea", "blue", "pack", "size") if 10 < len(shop.search(q)) <= 50)
    pages = -(-len(shop.search(query)) // 10)
    _same(browser.step(f"search[{query}]"), text.step(f"search[{query}]"))
    for _ in range(pages - 1):
        b, t = browser.step("click[next >]"), text.step("click[next >]")
        _same(b, t)
        assert b[4]["valid_action"]
    b, t = browser.step("click[next >]"), text.step("click[next >]")  # past the last page: not offered
    _same(b, t)
    assert not b[4]["valid_action"] and b[4]["state"]["page_num"] == pages
    assert "click[next >]" not in b[4]["admissible_commands"]
    _same(browser.step("search[zzzqqq]"), text.step("search[zzzqqq]"))  # nothing found: no next page either
    assert not browser.step("click[next >]")[4]["valid_action"]


def test_html_in_data_and_queries_stays_text(envs):
    browser, text = envs
    _, info = browser.reset(options={"goal_index": 0})
    text.reset(options={"goal_index": 0})
    driver = browser._browser_backend.browser.driver
    for action in [
        "search[herbal tea bold quoted]",
        f"click[{info['goal']['asin'].lower()}]",
        "click[features]",
        "search[</title><script>window.pwned=2</script>]",
    ]:
        b, t = browser.step(action), text.step(action)
        _same(b, t)
        assert driver.execute_script("return [window.pwned, document.scripts.length]") == [None, 0]
        if action.startswith("click["):
            assert NASTY in b[0]


def test_crashed_browser_is_restarted_on_reset(envs):
    browser, text = envs
    browser.reset(seed=1)
    backend = browser._browser_backend
    backend.browser.driver.quit()  # the browser goes away under the env
    obs, reward, term, trunc, info = browser.step("search[tea]")
    assert trunc and not term and reward == 0.0 and "browser_error" in info
    bo, bi = browser.reset(seed=2)
    to, ti = text.reset(seed=2)
    assert bi.get("browser_restarted") is True and bo == to
    _same(browser.step("search[tea]"), text.step("search[tea]"))


def test_close_stops_server_and_browser(nasty_shop):
    env = WebShopEnv(shop=nasty_shop, mode="browser")
    env.reset(seed=0)
    backend = env._browser_backend
    port = urlsplit(backend.server.url).port
    service = backend.browser.driver.service
    env.close()
    assert not backend.server.running and backend.browser is None
    assert service.process is None or service.process.poll() is not None
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_odd_queries_agree(envs):
    browser, text = envs
    browser.reset(seed=4)
    text.reset(seed=4)
    for q in [
        "🍵 tea",
        "a\x00b tea",
        "x" * 9000,
        "שלום tea",
        "tea\ttea",
        "  tea  ",
        "a\u2028b",
        "100% cotton & <b>",
        "a+b=c?d#e/f\\g",
        "search[\udcff]",
    ]:
        action = q if q.startswith("search[") else f"search[{q}]"
        _same(browser.step(action), text.step(action))


def test_query_too_long_for_a_url_is_invalid_in_both_modes(envs):
    """7,300 CJK characters fit the action limit but their URL is over 65,536
    bytes (the server answered 414 and browser mode showed the error page as a valid step)."""
    browser, text = envs
    bo, bi = browser.reset(seed=5)
    to, ti = text.reset(seed=5)
    _same(browser.step("search[tea]"), text.step("search[tea]"))
    url = browser._browser_backend.url
    long_query = "search[" + "茶" * 7300 + "]"
    b, t = browser.step(long_query), text.step(long_query)
    _same(b, t)
    assert b[4]["valid_action"] is False and b[4]["page"] == "results" and "Error response" not in b[0]
    assert browser._browser_backend.url == url
    near = "search[" + "茶" * 3300 + "]"  # 29,700 bytes encoded: just under the cap, must work
    b, t = browser.step(near), text.step(near)
    _same(b, t)
    assert b[4]["valid_action"] is True and b[4]["page"] == "results"


def test_error_page_is_an_invalid_action_with_state_unchanged(envs, monkeypatch):
    browser, text = envs
    browser.reset(seed=6)
    obs, _, _, _, info = browser.step("search[tea]")
    chrome = ("click[back to search]", "click[next >]", "click[< prev]")
    product = next(c for c in info["admissible_commands"] if c.startswith("click[") and c not in chrome)
    server = browser._browser_backend.server
    real_page = server.page

    def failing_page(sid, state):
        if state.kind == "item":
            raise RuntimeError("disk on fire")  # the server answers 500
        return real_page(sid, state)

    monkeypatch.setattr(server, "page", failing_page)
    url = browser._browser_backend.url
    obs2, reward, term, trunc, info2 = browser.step(product)
    assert info2["valid_action"] is False and (reward, term, trunc) == (0.0, False, False)
    assert (
        obs2 == obs and info2["state"] == info["state"] and info2["admissible_commands"] == info["admissible_commands"]
    )
    assert browser._browser_backend.url == url
    monkeypatch.setattr(server, "page", real_page)
    assert browser.step(product)[4]["page"] == "item"
