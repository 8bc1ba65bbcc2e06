"""A small web server with a search engine over its own pages, plus hostile routes.

Search answers in two real shapes: SearXNG's JSON (`/search?q=…&format=json`) and
DuckDuckGo's HTML endpoint (`/html/?q=…`). Results rank the served HTML pages by how many
distinct query words their visible text contains.

Hostile routes: `/slow`, `/huge`, `/binary`, `/redirect/<n>`, `/redirect-to?url=…`,
`/gzip-bomb`, `/latin1`.
"""

from __future__ import annotations

import asyncio
import hashlib
import html
import random
import re
import threading
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from aiohttp import web

SNIPPET_CHARS = 200
MAX_RESULTS = 10
HUGE_BYTES = 50 * 1024 * 1024
HUGE_CHUNK = 64 * 1024
GZIP_BOMB_BYTES = 200 * 1024 * 1024
BINARY_BYTES = 64 * 1024
SLOW_PREFIX = b"<!doctype html><html><head><title>Slow</title></head><body>"

_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.I | re.S)
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_-]+)""", re.I)
_INVISIBLE = re.compile(r"<(script|style|noscript|template)\b.*?</\1\s*>|<!--.*?-->", re.I | re.S)
_TAG = re.compile(r"<[^>]+>")
_WORD = re.compile(r"\w+", re.U)


@dataclass
class Page:
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    title: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.body, str):
            self.body = self.body.encode("utf-8")
        if self.title is None and "html" in self.content_type:
            self.title = _title_of(self.body)


@dataclass
class SearchResult:
    url: str  # absolute, or a path on this server ("/pages/x.html")
    title: str
    content: str


@dataclass
class _Canned:
    result: SearchResult
    match: str | None  # a word the query must contain; None matches every query


@dataclass
class _Failure:
    times: int
    status: int
    retry_after: int | None


class FakeWeb:
    """Serve `pages` at their paths, a search engine over them, and hostile routes."""

    def __init__(self, pages: dict[str, Page] | None = None, *, slow_seconds: float = 30.0) -> None:
        self.pages: dict[str, Page] = dict(pages or {})
        self.slow_seconds = slow_seconds
        self.max_results = MAX_RESULTS
        self.engine = "duckduckgo"  # the engine name SearXNG results report
        self._lock = threading.Lock()
        self._hits: list[str] = []
        self._requests: list[tuple[str, str]] = []
        self._search_failures: list[_Failure] = []
        self._canned: list[_Canned] = []
        self._text_cache: dict[str, str] = {}

    @classmethod
    def from_directory(
        cls, path: str | Path, prefix: str = "/pages/", *, content_type: str | None = None, **kwargs: Any
    ) -> FakeWeb:
        """Serve every `*.html` in `path` at `prefix + filename`.

        The Content-Type carries the charset the page declares in a <meta> (none if it
        declares none), as a typical server does; `content_type` overrides that.
        """
        pages = {}
        for file in sorted(Path(path).glob("*.html")):
            data = file.read_bytes()
            ctype = content_type or _declared_content_type(data)
            pages[prefix + file.name] = Page(data, content_type=ctype)
        return cls(pages, **kwargs)

    # ------------------------------------------------------- test controls

    def add_page(self, path: str, page: Page | bytes | str) -> str:
        """Serve `page` at `path`; returns the path."""
        with self._lock:
            self.pages[path] = page if isinstance(page, Page) else Page(page)
            self._text_cache.pop(path, None)
        return path

    def add_result(self, url: str, title: str, content: str, *, match: str | None = None) -> None:
        """A canned result, listed first for queries containing the word `match` (all if None).

        Use it to send a client to a hostile route or to a host this server does not serve.
        """
        with self._lock:
            self._canned.append(_Canned(SearchResult(url, title, content), match.lower() if match else None))

    def search_fail_next(self, status: int, times: int = 1, retry_after: int | None = None) -> None:
        """The next `times` search requests (either endpoint) answer `status`."""
        with self._lock:
            self._search_failures.append(_Failure(times, status, retry_after))

    # -------------------------------------------------------- introspection

    @property
    def hits(self) -> list[str]:
        """Paths requested, in order (without query strings)."""
        with self._lock:
            return list(self._hits)

    @property
    def requests(self) -> list[tuple[str, str]]:
        """(method, path with query string) of every request."""
        with self._lock:
            return list(self._requests)

    def search(self, query: str, base_url: str = "") -> list[SearchResult]:
        """The results both search endpoints would list for `query`."""
        words = _query_words(query)
        if not words:
            return []
        with self._lock:
            canned = [c.result for c in self._canned if c.match is None or c.match in words]
            pages = list(self.pages.items())
        scored = []
        for path, page in pages:
            if page.status != 200 or "html" not in page.content_type:
                continue
            text = self._visible_text(path, page)
            tokens = [t.lower() for t in _WORD.findall(text)]
            present = set(tokens)
            distinct = sum(1 for w in words if w in present)
            if distinct:
                occurrences = sum(1 for t in tokens if t in words)
                scored.append((-distinct, -occurrences, path, page, text))
        scored.sort(key=lambda s: (s[0], s[1], s[2]))
        results = [SearchResult(_absolute(c.url, base_url), c.title, c.content) for c in canned]
        for _, _, path, page, text in scored:
            results.append(SearchResult(base_url + path, page.title or path, _snippet(text, words)))
        return results[: self.max_results]

    # ---------------------------------------------------------------- server

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._record])
        r = app.router
        r.add_get("/search", self._handle_searxng)
        r.add_route("GET", "/html/", self._handle_ddg)
        r.add_route("POST", "/html/", self._handle_ddg)
        r.add_route("GET", "/html", self._handle_ddg)
        r.add_route("POST", "/html", self._handle_ddg)
        r.add_get("/slow", self._handle_slow)
        r.add_get("/huge", self._handle_huge)
        r.add_get("/binary", self._handle_binary)
        r.add_get(r"/redirect/{n:\d+}", self._handle_redirect)
        r.add_get("/redirect-to", self._handle_redirect_to)
        r.add_get("/gzip-bomb", self._handle_gzip_bomb)
        r.add_get("/latin1", self._handle_latin1)
        r.add_route("*", "/{tail:.*}", self._handle_page)
        return app

    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        with self._lock:
            self._hits.append(request.path)
            self._requests.append((request.method, request.path_qs))
        return await handler(request)

    async def _handle_page(self, request: web.Request) -> web.Response:
        with self._lock:
            page = self.pages.get(request.path)
        if page is None:
            return web.Response(status=404, text=_NOT_FOUND, content_type="text/html", charset="utf-8")
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, text="Method Not Allowed")
        headers = {"Content-Type": page.content_type, **page.headers}
        return web.Response(status=page.status, body=page.body, headers=headers)

    # ---------------------------------------------------------------- search

    def _take_search_failure(self) -> web.Response | None:
        with self._lock:
            if not self._search_failures:
                return None
            failure = self._search_failures[0]
            failure.times -= 1
            if failure.times <= 0:
                self._search_failures.pop(0)
        headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}
        return web.Response(status=failure.status, text=f"{failure.status} search unavailable", headers=headers)

    async def _handle_searxng(self, request: web.Request) -> web.Response:
        failed = self._take_search_failure()
        if failed is not None:
            return failed
        query = request.query.get("q", "")
        if request.query.get("format") != "json":
            # SearXNG answers 403 for formats it was not configured to serve; we only serve JSON.
            return web.Response(status=403, text="Forbidden")
        base = f"{request.scheme}://{request.host}"
        results = await asyncio.to_thread(self.search, query, base)
        return web.json_response({
            "query": query,
            "number_of_results": len(results),
            "results": [
                {
                    "url": r.url,
                    "title": r.title,
                    "content": r.content,
                    "engine": self.engine,
                    "engines": [self.engine],
                    "parsed_url": list(urlsplit(r.url)),
                    "positions": [i + 1],
                    "score": round(1.0 / (i + 1), 4),
                    "category": "general",
                    "publishedDate": None,
                }
                for i, r in enumerate(results)
            ],
            "answers": [],
            "corrections": [],
            "infoboxes": [],
            "suggestions": [],
            "unresponsive_engines": [],
        })

    async def _handle_ddg(self, request: web.Request) -> web.Response:
        failed = self._take_search_failure()
        if failed is not None:
            return failed
        query = request.query.get("q", "")
        if request.method == "POST":
            form = await request.post()
            query = str(form.get("q", query))
        base = f"{request.scheme}://{request.host}"
        results = await asyncio.to_thread(self.search, query, base)
        words = _query_words(query)
        return web.Response(text=_ddg_page(query, results, words), content_type="text/html", charset="utf-8")

    def _visible_text(self, path: str, page: Page) -> str:
        with self._lock:
            cached = self._text_cache.get(path)
        if cached is None:
            cached = _visible_text(page.body)
            with self._lock:
                self._text_cache[path] = cached
        return cached

    # --------------------------------------------------------------- hostile

    async def _handle_slow(self, request: web.Request) -> web.StreamResponse:
        """A few bytes at once, then nothing for `slow_seconds`: trips read timeouts, not connect ones."""
        resp = web.StreamResponse(headers={"Content-Type": "text/html; charset=utf-8"})
        await resp.prepare(request)
        await resp.write(SLOW_PREFIX)
        await asyncio.sleep(self.slow_seconds)
        await resp.write(b"<p>Finally here.</p></body></html>")
        await resp.write_eof()
        return resp

    async def _handle_huge(self, request: web.Request) -> web.StreamResponse:
        """HUGE_BYTES of HTML, chunked, no Content-Length: the client must cap what it reads."""
        resp = web.StreamResponse(headers={"Content-Type": "text/html; charset=utf-8"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        head = b"<!doctype html><html><head><title>Huge</title></head><body>"
        line = b"<p>" + b"All work and no play makes a very long page. " * 20 + b"</p>\n"
        chunk = (line * (HUGE_CHUNK // len(line) + 1))[:HUGE_CHUNK]
        sent = 0
        try:
            await resp.write(head)
            while sent < HUGE_BYTES:
                await resp.write(chunk)
                sent += len(chunk)
            await resp.write(b"</body></html>")
            await resp.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass  # the client stopped reading, which is the point
        return resp

    async def _handle_binary(self, request: web.Request) -> web.Response:
        data = random.Random(0).randbytes(BINARY_BYTES)
        return web.Response(body=data, content_type="application/octet-stream")

    async def _handle_redirect(self, request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        if n > 0:
            raise web.HTTPFound(f"/redirect/{n - 1}")
        return web.Response(text=_REDIRECT_TARGET, content_type="text/html", charset="utf-8")

    async def _handle_redirect_to(self, request: web.Request) -> web.Response:
        url = request.query.get("url")
        if not url:
            return web.Response(status=400, text="missing url")
        status = int(request.query.get("status_code", "302"))
        return web.Response(status=status, headers={"Location": url})

    async def _handle_gzip_bomb(self, request: web.Request) -> web.Response:
        body = await asyncio.to_thread(_gzip_bomb)
        return web.Response(
            body=body,
            headers={"Content-Type": "text/html; charset=utf-8", "Content-Encoding": "gzip"},
        )

    async def _handle_latin1(self, request: web.Request) -> web.Response:
        # Declares ISO-8859-1 (header and <meta>) but the bytes are UTF-8, as some real sites do.
        return web.Response(body=_LATIN1_PAGE.encode("utf-8"),
                            headers={"Content-Type": "text/html; charset=ISO-8859-1"})


# ------------------------------------------------------------------ helpers

_bomb_lock = threading.Lock()
_bomb: bytes | None = None


def _gzip_bomb() -> bytes:
    """~200 KB of gzip that inflates to GZIP_BOMB_BYTES of HTML; built once per process."""
    global _bomb
    with _bomb_lock:
        if _bomb is None:
            z = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: gzip container
            parts = [z.compress(b"<!doctype html><html><head><title>Bomb</title></head><body>")]
            block = b" " * (1024 * 1024)
            for _ in range(GZIP_BOMB_BYTES // len(block)):
                parts.append(z.compress(block))
            parts.append(z.compress(b"</body></html>"))
            parts.append(z.flush())
            _bomb = b"".join(parts)
        return _bomb


def _title_of(body: bytes) -> str | None:
    m = _TITLE.search(body[:65536])
    if not m:
        return None
    return " ".join(html.unescape(m.group(1).decode("utf-8", "replace")).split()) or None


def _declared_content_type(body: bytes) -> str:
    m = _CHARSET.search(body[:4096])
    return f"text/html; charset={m.group(1).decode('ascii')}" if m else "text/html"


def _visible_text(body: bytes) -> str:
    """Crude: drop scripts, styles and comments, then tags; collapse whitespace."""
    text = body.decode("utf-8", "replace")
    text = _INVISIBLE.sub(" ", text)
    text = _TAG.sub(" ", text)
    return " ".join(html.unescape(text).split())


def _query_words(query: str) -> list[str]:
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(query) if len(w) > 1 or w.isdigit()))


def _snippet(text: str, words: list[str]) -> str:
    """About SNIPPET_CHARS of text around the first query word, cut at word boundaries."""
    lowered = text.lower()
    first = min((m.start() for w in words
                 for m in [re.search(rf"\b{re.escape(w)}\b", lowered)] if m), default=0)
    start = max(0, first - SNIPPET_CHARS // 3)
    end = min(len(text), start + SNIPPET_CHARS)
    if start > 0:
        space = text.find(" ", start)
        start = space + 1 if 0 <= space < first else start
    if end < len(text):
        space = text.rfind(" ", start, end)
        end = space if space > first else end
    snippet = text[start:end].strip()
    return ("…" if start > 0 else "") + snippet + ("…" if end < len(text) else "")


def _absolute(url: str, base: str) -> str:
    return base + url if url.startswith("/") else url


def _bold(snippet: str, words: list[str]) -> str:
    escaped = html.escape(snippet)
    if not words:
        return escaped
    pattern = re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")\b", re.I)
    return pattern.sub(r"<b>\1</b>", escaped)


def _ddg_page(query: str, results: list[SearchResult], words: list[str]) -> str:
    """DuckDuckGo's HTML endpoint page, with its real class names and redirect links."""
    items = []
    for r in results:
        rut = hashlib.sha256(r.url.encode()).hexdigest()[:64]
        link = f"//duckduckgo.com/l/?uddg={quote(r.url, safe='')}&amp;rut={rut}"
        shown = urlsplit(r.url).netloc + urlsplit(r.url).path
        items.append(f"""
<div class="result results_links results_links_deep web-result ">
  <div class="links_main links_deep result__body">
    <h2 class="result__title">
      <a rel="nofollow" class="result__a" href="{link}">{_bold(r.title, words)}</a>
    </h2>
    <div class="result__extras">
      <div class="result__extras__url">
        <a class="result__url" href="{link}">{html.escape(shown)}</a>
      </div>
    </div>
    <a class="result__snippet" href="{link}">{_bold(r.content, words)}</a>
    <div class="clear"></div>
  </div>
</div>""")
    if not items:
        items.append('\n<div class="result results_links results_links_deep result--no-result">'
                     '<div class="no-results">No results.</div></div>')
    q = html.escape(query, quote=True)
    return f"""<!DOCTYPE html PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN" "http://www.w3.org/TR/html4/loose.dtd">
<html>
<head>
<meta http-equiv="content-type" content="text/html; charset=UTF-8">
<title>{q} at DuckDuckGo</title>
</head>
<body>
<div id="header" class="header cw">
  <form name="x" class="header__form" action="/html/" method="post">
    <input name="q" autocomplete="off" class="search__input" id="search_form_input_homepage" type="text" value="{q}" />
    <input name="b" id="search_button_homepage" class="search__button search__button--html" value="" title="Search" alt="Search" type="submit" />
  </form>
</div>
<div>
<div class="serp__results">
<div id="links" class="results">
{"".join(items)}
</div>
</div>
</div>
</body>
</html>
"""


_NOT_FOUND = "<!doctype html><html><head><title>404 Not Found</title></head><body><h1>Not Found</h1></body></html>"

_REDIRECT_TARGET = """<!doctype html>
<html><head><title>Redirect target</title></head>
<body><main><h1>Redirect target</h1><p>You followed every redirect and arrived here.</p></main></body></html>
"""

_LATIN1_PAGE = """<!DOCTYPE html>
<html lang="de">
<head>
<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">
<title>Grüße aus Köln – Café Müller</title>
</head>
<body>
<main>
<h1>Grüße aus Köln</h1>
<p>Das Café Müller öffnet täglich um 8 Uhr. Für Frühstück zahlt man 12,50 €.</p>
<p>Straße, Größe, Übermaß: these words show whether the decoder guessed right.</p>
</main>
</body>
</html>
"""
