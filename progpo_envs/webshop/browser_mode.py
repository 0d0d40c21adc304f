"""Browser mode of the WebShop env: the local shop server plus headless Chromium.

:class:`BrowserBackend` owns one :class:`~progpo_envs.webshop.server.ShopServer` (started
at construction, stopped on :meth:`close`) and one
:class:`~progpo_envs.webshop.browser.ChromiumBrowser` (started on the first reset, restarted
on a reset after it died). Actions are carried out in the browser -- typing into the search
box, clicking buttons, product links and option links -- and the observation, the
clickables and the page state are read back from the loaded page and its URL, so they show
what the browser really has. A ``search[...]`` from a page without a search box first goes
back to the search page, as the original text env allows searching from anywhere.

Any page that is not a 200 shop page (an error status such as 414 or 500, or a URL that is no
shop page) makes the action invalid: the browser goes back to the page it was on, and the
observation and state stay what they were, as a rejected action leaves them in text mode.
"""

from __future__ import annotations

from typing import Any, Mapping
from urllib.parse import quote, urlsplit

from progpo_envs.webshop.browser import BrowserError, ChromiumBrowser
from progpo_envs.webshop.pages import DONE, OBS_SEP, ShopState, read_page
from progpo_envs.webshop.server import ShopServer, parse_path
from progpo_envs.webshop.shop import Shop, StepResult, parse_action


class BrowserBackend:
    """Drive one shopper through the served shop in headless Chromium."""

    def __init__(self, shop: Shop, **browser_kwargs: Any):
        self.server = ShopServer(shop).start()
        self.browser: ChromiumBrowser | None = None
        self._browser_kwargs = browser_kwargs
        self.session_id: str | None = None
        self.observation = ""
        self.clickables: list[str] = []
        self.has_search_bar = False
        self.state = ShopState()
        self.url = ""

    def _started(self) -> ChromiumBrowser:
        """The browser, which the first reset() starts."""
        if self.browser is None:
            raise RuntimeError("BrowserBackend: call reset() before reading a page")
        return self.browser

    def _read(self) -> None:
        browser = self._started()
        html = browser.page_source()
        self.url = browser.current_url()
        segments, self.clickables, self.has_search_bar = read_page(html)
        self.observation = OBS_SEP.join(segments)
        parsed = parse_path(urlsplit(self.url).path)
        self.state = parsed[1] if parsed is not None else ShopState()

    def _on_shop_page(self) -> bool:
        """Whether the browser shows a shop page that loaded with status 200."""
        browser = self._started()
        status = browser.status()
        if status is not None and status != 200:
            return False
        url = browser.current_url()
        return url.startswith(self.server.url + "/") and parse_path(urlsplit(url).path) is not None

    def reset(self, goal: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        extra: dict[str, Any] = {}
        if self.browser is None:
            self.browser = ChromiumBrowser(**self._browser_kwargs)
        elif not self.browser.alive():
            self.browser.restart()
            extra["browser_restarted"] = True
        if self.session_id is not None:
            self.server.close_session(self.session_id)
        self.session_id = self.server.open_session(goal)
        try:
            self.browser.get(f"{self.server.url}/{quote(self.session_id, safe='')}")
            self._read()
        except BrowserError:
            # One retry with a fresh browser; a second failure propagates.
            self.browser.restart()
            extra["browser_restarted"] = True
            self.browser.get(f"{self.server.url}/{quote(self.session_id, safe='')}")
            self._read()
        return self.observation, extra

    def step(self, action: Any) -> tuple[StepResult, str, dict[str, Any]]:
        parsed = parse_action(action)
        if parsed is None or self.browser is None or self.session_id is None:  # (both set by reset)
            return StepResult(False), self.observation, {}
        verb, arg = parsed
        arg = arg.lower()
        before = self.url
        try:
            if verb == "search":
                if not self.has_search_bar:
                    self.browser.get(f"{self.server.url}/{quote(self.session_id, safe='')}")
                ok = self.browser.search(arg)
            elif verb == "click" and arg != "search" and arg in self.clickables:
                ok = self.browser.click(arg)
            else:
                return StepResult(False), self.observation, {}
            if ok and not self._on_shop_page():
                self.browser.get(before)  # back to where the action started: state unchanged
                self._read()
                return StepResult(False), self.observation, {}
            self._read()
        except BrowserError as e:
            return StepResult(False), self.observation, {"browser_error": str(e)}
        if not ok:
            return StepResult(False), self.observation, {}
        if self.state.kind == DONE:
            rec = self.server.record(self.session_id) or {}
            return StepResult(True, float(rec.get("reward") or 0.0), True, rec.get("breakdown")), self.observation, {}
        return StepResult(True), self.observation, {}

    def close(self) -> None:
        if self.browser is not None:
            self.browser.quit()
            self.browser = None
        self.server.stop()
