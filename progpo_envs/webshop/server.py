"""The shop as a local website: a stdlib HTTP server on 127.0.0.1, one per browser-mode env.

Every page is a plain GET URL that encodes its :class:`~progpo_envs.webshop.pages.ShopState`
(see :func:`~progpo_envs.webshop.pages.state_path`), so the pages work with JavaScript off
and a page can be reloaded or opened directly:

=====================================================================  ================
``/<session>``                                                         search page
``/<session>/search?search_query=<text>``                              303 -> results
``/search_results/<session>/<query>/<page>``                           results
``/item_page/<session>/<asin>/<query>/<page>/<options>``               item
``/item_sub_page/<session>/<asin>/<query>/<page>/<sub>/<options>``     sub-page
``/done/<session>/<asin>/<query>/<page>/<options>``                    purchase
``/static/style.css``                                                  stylesheet
=====================================================================  ================

``<options>`` is the URL-quoted JSON list of ``[name, value]`` pairs. A session is opened
by the env (:meth:`ShopServer.open_session`) with its goal; the first ``/done`` visit of a
session scores the purchase and records it (:meth:`ShopServer.record`).

Example:
    >>> from urllib.request import urlopen
    >>> from progpo_envs.webshop.data import load_catalog
    >>> from progpo_envs.webshop.shop import Shop
    >>> shop = Shop(load_catalog(num_products=100))
    >>> with ShopServer(shop) as server:
    ...     sid = server.open_session(shop.goals[0])
    ...     url = server.url
    ...     html = urlopen(url + "/" + sid).read().decode()
    >>> "search_input" in html and url.startswith("http://127.0.0.1:"), server.running
    (True, False)
"""

from __future__ import annotations

import json
import secrets
import threading
from html import escape
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Mapping
from urllib.parse import parse_qs, quote, unquote, urlsplit

from progpo_envs.webshop import pages
from progpo_envs.webshop.pages import ShopState, render_html, state_path

_STATIC = {"style.css": ("text/css; charset=utf-8", pages.TEMPLATE_DIR / "static" / "style.css")}


def parse_path(path: str) -> tuple[str, ShopState] | None:
    """``(session_id, state)`` of a page URL path; ``None`` for anything else.

    >>> parse_path("/search_results/s1/red%2Fblue%20shoe/2")
    ('s1', ShopState(kind='results', query='red/blue shoe', page_num=2, asin=None, options=(), sub_page=None))
    >>> parse_path(state_path("s1", ShopState(pages.ITEM, "q", 1, "B01", (("size", "7"),))))[1].options
    (('size', '7'),)
    """
    parts = [unquote(p) for p in urlsplit(path).path.split("/")[1:]]
    try:
        if len(parts) == 1 and parts[0]:
            return parts[0], ShopState()
        head = parts[0]
        if head == "search_results" and len(parts) == 4:
            return parts[1], ShopState(pages.RESULTS, parts[2], int(parts[3]))
        if head in ("item_page", "done") and len(parts) == 6:
            kind = pages.ITEM if head == "item_page" else pages.DONE
            return parts[1], ShopState(kind, parts[3], int(parts[4]), parts[2], _options(parts[5]))
        if head == "item_sub_page" and len(parts) == 7 and parts[5] in pages.SUB_PAGES:
            return parts[1], ShopState(pages.SUB_PAGE, parts[3], int(parts[4]), parts[2], _options(parts[6]), parts[5])
    except (ValueError, TypeError):
        return None
    return None


def _options(text: str) -> tuple[tuple[str, str], ...]:
    pairs = json.loads(text)
    if not isinstance(pairs, list):
        raise ValueError("options must be a list of pairs")
    out: dict[str, str] = {}
    for pair in pairs:
        name, value = pair
        out[str(name)] = str(value)
    return tuple(out.items())


class ShopServer:
    """Serve a :class:`~progpo_envs.webshop.shop.Shop` on ``http://127.0.0.1:<ephemeral>``.

    Start with :meth:`start` (or a ``with`` block), stop with :meth:`stop`. Thread-safe.
    """

    def __init__(self, shop: Any, host: str = "127.0.0.1", port: int = 0):
        self.shop = shop
        self._host, self._port = host, port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._sessions: dict[str, dict[str, Any]] = {}

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> "ShopServer":
        if self._httpd is None:
            handler = type("Handler", (_Handler,), {"server_ref": self})
            self._httpd = ThreadingHTTPServer((self._host, self._port), handler)
            self._httpd.daemon_threads = True
            self._thread = threading.Thread(target=self._httpd.serve_forever, name="webshop-http", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            if self._thread is not None:
                self._thread.join(timeout=5)
            self._httpd = None
            self._thread = None

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("server not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host.decode() if isinstance(host, bytes) else host}:{port}"

    def __enter__(self) -> "ShopServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # --- sessions ------------------------------------------------------------------------

    def open_session(self, goal: Mapping[str, Any]) -> str:
        """Register a shopper with ``goal``; returns its session id (URL-safe)."""
        sid = secrets.token_hex(8)
        with self._lock:
            self._sessions[sid] = {"goal": goal, "done": False, "reward": None, "breakdown": None}
        return sid

    def close_session(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)

    def record(self, session_id: str) -> dict[str, Any] | None:
        """``{"goal", "done", "reward", "breakdown"}`` of a session (a copy), or ``None``."""
        with self._lock:
            rec = self._sessions.get(session_id)
            return dict(rec) if rec is not None else None

    # --- pages ---------------------------------------------------------------------------

    def page(self, session_id: str, state: ShopState) -> str:
        """The HTML of ``state`` for ``session_id`` (scores the purchase on a done page)."""
        with self._lock:
            rec = self._sessions.get(session_id)
        if rec is None:
            raise KeyError(f"unknown session {session_id!r}")
        if state.kind != pages.SEARCH and state.kind != pages.RESULTS and state.asin not in self.shop.by_asin:
            raise KeyError(f"unknown product {state.asin!r}")
        reward = None
        if state.kind == pages.DONE:
            with self._lock:
                if not rec["done"]:
                    score, breakdown = self.shop.purchase(rec["goal"], state.asin, state.options_dict())
                    rec.update(done=True, reward=score, breakdown=breakdown, state=state)
                reward = rec["reward"]
        view = self.shop.view(state, str(rec["goal"].get("instruction_text", "")), reward)
        return render_html(view, session_id)


#: Marks every error page (the server's own and http.server's, e.g. 414 for a request line over
#: 65,536 bytes) so that browser mode can tell it from a shop page.
STATUS_META = '<meta name="progpo-status" content="{status}">'


class _Handler(BaseHTTPRequestHandler):
    server_ref: ShopServer
    protocol_version = "HTTP/1.1"
    error_message_format = (
        "<!DOCTYPE html><html><head>"
        + STATUS_META.format(status="%(code)d")
        + "<title>Error response</title></head><body><h1>%(code)d</h1><p>%(message)s</p></body></html>"
    )

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(
        self, status: int, body: bytes, ctype: str = "text/html; charset=utf-8", headers: Mapping[str, str] = {}
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, message: str) -> None:

        body = (
            f"<!DOCTYPE html><html><head>{STATUS_META.format(status=int(status))}</head>"
            f"<body><h1>{int(status)}</h1><p>{escape(message)}</p></body></html>"
        )
        self._send(status, body.encode())

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_POST(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        srv = self.server_ref
        try:
            split = urlsplit(self.path)
            parts = split.path.split("/")
            if len(parts) == 3 and parts[1] == "static" and parts[2] in _STATIC:
                ctype, path = _STATIC[parts[2]]
                return self._send(200, path.read_bytes(), ctype)
            if len(parts) == 3 and parts[2] == "search" and parts[1]:
                sid = unquote(parts[1])
                query = parse_qs(split.query, keep_blank_values=True).get("search_query", [""])[0].lower()
                if not query:
                    return self._send(303, b"", headers={"Location": f"/{quote(sid, safe='')}"})
                target = state_path(sid, ShopState(pages.RESULTS, query, 1))
                return self._send(303, b"", headers={"Location": target})
            parsed = parse_path(split.path)
            if parsed is None:
                return self._error(404, "no such page")
            sid, state = parsed
            try:
                html = srv.page(sid, state)
            except KeyError as e:
                return self._error(404, str(e))
            return self._send(200, html.encode("utf-8"))
        except (BrokenPipeError, ConnectionResetError):
            return
        except Exception as e:  # never kill the server thread
            try:
                self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(e).__name__}: {e}")
            except Exception:
                pass
