"""Headless Chromium driven through Selenium 4: the shopper's hands in browser mode.

:class:`ChromiumBrowser` starts Debian's ``chromium`` through ``chromedriver`` with a fresh
profile and the flags in :data:`CHROMIUM_FLAGS` (no GPU, no sandbox, no background
networking: it only ever talks to the shop on 127.0.0.1). It can type a search, click a
clickable by its WebShop name, and read the page back; every navigation is awaited by
checking that a new document has replaced the old one.

Example (needs Chromium; see ``tests/webshop/test_webshop_browser.py``)::

    browser = ChromiumBrowser()
    browser.get("http://127.0.0.1:8000/abc")
    browser.search("red shoes")
    browser.click("next >")
    html = browser.page_source()
    browser.quit()
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from typing import Any, Iterator

from wrappers.errors import UserError

CHROMIUM_BINARY = os.environ.get("PROGPO_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER_BINARY = os.environ.get("PROGPO_CHROMEDRIVER", "/usr/bin/chromedriver")
#: the headless Chromium flags the browser mode starts with
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--window-size=1280,1024",
)

# Finds the element WebShop's text env would click for a name: an option whose value is the
# name wins (options are added last to the original's dict), else the last button / product
# link whose text, lower-cased, is the name.
_FIND_JS = """
const name = arguments[0];
const els = Array.from(document.querySelectorAll('[data-kind]'));
let opt = null, other = null;
for (const e of els) {
  if (e.dataset.kind === 'option') { if (e.dataset.value === name) opt = e; }
  else if (e.textContent.trim().toLowerCase() === name) other = e;
}
return opt || other;
"""
_MARK_JS = "window.__progpoOld = true;"
# HTTP status of the loaded page: the shop's error-page marker, else the navigation timing's
# responseStatus (Chromium >= 109), else null (unknown).
_STATUS_JS = """
const meta = document.querySelector('meta[name="progpo-status"]');
if (meta) return parseInt(meta.getAttribute('content'), 10);
const nav = performance.getEntriesByType('navigation')[0];
return (nav && nav.responseStatus) ? nav.responseStatus : null;
"""
_NEW_DOC_JS = "return window.__progpoOld === undefined && document.readyState === 'complete';"


class BrowserError(UserError, RuntimeError):
    """The browser or its driver failed (crashed, hung, or could not start)."""


@contextlib.contextmanager
def _browser_errors(what: str) -> Iterator[None]:
    """Any failure of the driver inside, as one :class:`BrowserError` saying ``what`` failed."""
    try:
        yield
    except BrowserError:
        raise
    except Exception as e:
        raise BrowserError(f"{what} failed: {e}") from e


class ChromiumBrowser:
    """One headless Chromium session (start on construction, :meth:`quit` to end)."""

    def __init__(
        self,
        chromium: str = CHROMIUM_BINARY,
        chromedriver: str = CHROMEDRIVER_BINARY,
        page_load_timeout: float = 30.0,
    ):
        self.chromium = chromium
        self.chromedriver = chromedriver
        self.page_load_timeout = page_load_timeout
        self.driver: Any = None
        self._profile: str | None = None
        self.start()

    def start(self) -> None:
        """Start Chromium with a fresh profile directory."""
        try:
            from selenium import webdriver  # the [browser] extra
            from selenium.webdriver.chrome.service import Service  # the [browser] extra
        except ImportError as e:  # pragma: no cover - extra not installed
            raise BrowserError("browser mode needs Selenium 4: pip install 'progpo[browser]'") from e
        for path, what in ((self.chromium, "chromium"), (self.chromedriver, "chromedriver")):
            if not os.path.exists(path):
                raise BrowserError(
                    f"{what} not found at {path}: install Debian's chromium and chromium-driver "
                    f"(apt-get install chromium chromium-driver) or set PROGPO_{what.upper()}"
                )
        self._profile = tempfile.mkdtemp(prefix="progpo-chromium-")
        opts = webdriver.ChromeOptions()
        opts.binary_location = self.chromium
        for flag in CHROMIUM_FLAGS:
            opts.add_argument(flag)
        opts.add_argument(f"--user-data-dir={self._profile}")
        opts.page_load_strategy = "normal"
        try:
            self.driver = webdriver.Chrome(service=Service(executable_path=self.chromedriver), options=opts)
            self.driver.set_page_load_timeout(self.page_load_timeout)
        except Exception as e:
            self._cleanup_profile()
            raise BrowserError(f"could not start headless Chromium: {e}") from e

    def alive(self) -> bool:
        """Whether the browser still answers."""
        if self.driver is None:
            return False
        try:
            self.driver.execute_script("return 1;")
            return True
        except Exception:
            return False

    def restart(self) -> None:
        self.quit()
        self.start()

    def quit(self) -> None:
        """Stop Chromium and chromedriver and delete the profile (safe to call twice)."""
        driver, self.driver = self.driver, None
        if driver is not None:
            try:
                driver.quit()
            except Exception:
                try:
                    driver.service.stop()
                except Exception:
                    pass
        self._cleanup_profile()

    def _cleanup_profile(self) -> None:
        if self._profile is not None:
            shutil.rmtree(self._profile, ignore_errors=True)
            self._profile = None

    # --- actions -------------------------------------------------------------------------

    def _wait_new_document(self) -> None:
        deadline = time.monotonic() + self.page_load_timeout
        while time.monotonic() < deadline:
            try:
                if self.driver.execute_script(_NEW_DOC_JS):
                    return
            except Exception as e:  # navigation in progress can reject scripts briefly
                if "no such window" in str(e) or "invalid session" in str(e):
                    raise BrowserError(str(e)) from e
            time.sleep(0.005)
        raise BrowserError("page did not load in time")

    def get(self, url: str) -> None:
        """Open ``url`` and wait for it to load."""
        with _browser_errors(f"navigation to {url}"):
            self.driver.get(url)

    def click(self, name: str) -> bool:
        """Click the element WebShop calls ``name`` on this page; False if there is none."""
        with _browser_errors(f"click[{name}]"):
            element = self.driver.execute_script(_FIND_JS, name)
            if element is None:
                return False
            self.driver.execute_script(_MARK_JS)
            element.click()
            self._wait_new_document()
            return True

    def search(self, query: str) -> bool:
        """Type ``query`` into the search box and submit; False if the page has no search box."""
        from selenium.webdriver.common.by import By  # the [browser] extra

        with _browser_errors("search"):
            boxes = self.driver.find_elements(By.ID, "search_input")
            if not boxes:
                return False
            # The value is set directly (send_keys cannot type every Unicode character).
            self.driver.execute_script("arguments[0].value = arguments[1];", boxes[0], query)
            self.driver.execute_script(_MARK_JS)
            self.driver.find_element(By.ID, "search-button").click()
            self._wait_new_document()
            return True

    def status(self) -> int | None:
        """HTTP status of the loaded page (``None`` when the browser cannot tell)."""
        try:
            value = self.driver.execute_script(_STATUS_JS)
        except Exception as e:
            raise BrowserError(f"could not read the page status: {e}") from e
        return int(value) if isinstance(value, (int, float)) else None

    def page_source(self) -> str:
        try:
            return self.driver.page_source
        except Exception as e:
            raise BrowserError(f"could not read the page: {e}") from e

    def current_url(self) -> str:
        try:
            return self.driver.current_url
        except Exception as e:
            raise BrowserError(f"could not read the URL: {e}") from e
