"""A small web server with a search engine over its own pages, plus hostile routes.

Search answers in four real shapes: SearXNG's JSON (`/search?q=…&format=json`),
DuckDuckGo's HTML endpoint (`/html/?q=…`), the Brave Web Search API
(`GET /brave/res/v1/web/search?q=…&count=…`, key in `X-Subscription-Token`) and the Tavily
Search API (`POST /tavily/search`, JSON body, key as `Authorization: Bearer tvly-…`). The
two keyed APIs check the key and answer a wrong or missing one, rate limits and plan limits
with the status codes and error bodies the real services use. Results rank the served HTML
pages by how many distinct query words their visible text contains. Any search endpoint can
be told to answer with DuckDuckGo's bot check (HTTP 202, an "anomaly" page) instead.

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
import uuid
import zlib
from dataclasses import dataclass, field
from datetime import date
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

# Keys the keyed search APIs accept (override per instance: `fake.brave_key = …`).
BRAVE_KEY = "BSA-fake-brave-subscription-token"
TAVILY_KEY = "tvly-fake-0123456789abcdef"
BRAVE_MAX_COUNT = 20  # Brave: count is 1–20, default 20
BRAVE_MAX_QUERY_CHARS = 400  # Brave: q at most 400 characters and 50 words
BRAVE_MAX_QUERY_WORDS = 50
# A Free-plan-like Brave subscription: 1 request/second, 2,000 a month.
BRAVE_RATE_PER_SECOND = 1
BRAVE_MONTHLY_QUOTA = 2000
BRAVE_MONTH_SECONDS = 2_592_000
TAVILY_DEFAULT_RESULTS = 5  # Tavily: max_results is 0–20, default 5
TAVILY_MAX_RESULTS = 20
TAVILY_DEPTHS = ("basic", "advanced", "fast", "ultra-fast")
TAVILY_TOPICS = ("general", "news", "finance")
# Tavily's documented error messages, by status.
TAVILY_ERRORS = {
    400: "Bad Request",
    401: "Unauthorized: missing or invalid API key.",
    429: "Your request has been blocked due to excessive requests. Please reduce rate of requests.",
    432: "This request exceeds your plan's set usage limit. Please upgrade your plan or contact support@tavily.com",
    433: "This request exceeds the pay-as-you-go limit. You can increase your limit on the Tavily dashboard.",
}

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
    published: str | None = None  # ISO date; Brave reports it as page_age, Tavily news as published_date

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
    published: str | None = None  # ISO date, when the page states one


@dataclass
class _Canned:
    result: SearchResult
    match: str | None  # a word the query must contain; None matches every query


@dataclass
class _Failure:
    times: int
    status: int
    retry_after: int | None
    quota: bool = False
    challenge: bool = False  # DuckDuckGo's bot check: HTTP 202 and an "anomaly" page


@dataclass
class _Stall:
    times: int
    seconds: float


class FakeWeb:
    """Serve `pages` at their paths, a search engine over them, and hostile routes."""

    def __init__(self, pages: dict[str, Page] | None = None, *, slow_seconds: float = 30.0) -> None:
        self.pages: dict[str, Page] = dict(pages or {})
        self.slow_seconds = slow_seconds
        self.slow_served = 0  # /slow pages sent in full: a client that gave up never gets one
        self.slow_started = 0  # /slow pages begun: a client is waiting on each one not yet served
        self.max_results = MAX_RESULTS
        self.engine = "duckduckgo"  # the engine name SearXNG results report
        # (engine, reason) pairs SearXNG reports as unresponsive; when set, it has no results,
        # as a SearXNG whose every engine is refused answers.
        self.searxng_unresponsive: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._hits: list[str] = []
        self._requests: list[tuple[str, str]] = []
        self._search_failures: list[_Failure] = []
        self._search_stalls: list[_Stall] = []
        self._page_failures: dict[str, list[tuple[int, int | None]]] = {}  # path -> (status, Retry-After) to answer next
        self.brave_key = BRAVE_KEY
        self.tavily_key = TAVILY_KEY
        self._brave_used = 0  # successful Brave requests, counted against the monthly quota
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

    def add_result(self, url: str, title: str, content: str, *, match: str | None = None,
                   published: str | None = None) -> None:
        """A canned result, listed first for queries containing the word `match` (all if None).

        Use it to send a client to a hostile route or to a host this server does not serve.
        """
        with self._lock:
            self._canned.append(_Canned(SearchResult(url, title, content, published), match.lower() if match else None))

    def search_fail_next(self, status: int, times: int = 1, retry_after: int | None = None, *,
                         quota: bool = False) -> None:
        """The next `times` search requests (any endpoint) answer `status`.

        The keyed APIs check the key first, as the real ones do, so a request with a wrong
        key gets the key error and does not use up a failure. A Brave 429 is a per-second
        rate limit unless `quota` (then the monthly quota is used up).
        """
        with self._lock:
            self._search_failures.append(_Failure(times, status, retry_after, quota))

    def search_challenge_next(self, times: int = 1) -> None:
        """The next `times` search requests (any endpoint) get a bot check instead of results:
        HTTP 202 with DuckDuckGo's "anomaly" challenge page, as DuckDuckGo answers automated clients
        (and as any endpoint behind such a check would)."""
        with self._lock:
            self._search_failures.append(_Failure(times, 202, None, challenge=True))

    def search_stall_next(self, seconds: float, times: int = 1) -> None:
        """The next `times` search requests (any endpoint) wait `seconds` before answering."""
        with self._lock:
            self._search_stalls.append(_Stall(times, seconds))

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
        """The results every search endpoint would list for `query`."""
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
        results = [SearchResult(_absolute(c.url, base_url), c.title, c.content, c.published) for c in canned]
        for _, _, path, page, text in scored:
            results.append(SearchResult(base_url + path, page.title or path, _snippet(text, words), page.published))
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
        r.add_get("/brave/res/v1/web/search", self._handle_brave)
        r.add_post("/tavily/search", self._handle_tavily)
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

    def page_fail_next(self, path: str, status: int, times: int = 1, retry_after: int | None = None) -> None:
        """The next `times` requests for the page at `path` answer `status` (then it is served again)."""
        with self._lock:
            self._page_failures.setdefault(path, []).extend([(status, retry_after)] * times)

    async def _handle_page(self, request: web.Request) -> web.Response:
        with self._lock:
            failures = self._page_failures.get(request.path)
            failure = failures.pop(0) if failures else None
        if failure is not None:
            status, retry_after = failure
            headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
            return web.Response(status=status, text=f"<html><body>Error {status}</body></html>",
                                content_type="text/html", headers=headers)
        with self._lock:
            page = self.pages.get(request.path)
        if page is None:
            return web.Response(status=404, text=_NOT_FOUND, content_type="text/html", charset="utf-8")
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, text="Method Not Allowed")
        headers = {"Content-Type": page.content_type, **page.headers}
        return web.Response(status=page.status, body=page.body, headers=headers)

    # ---------------------------------------------------------------- search

    def _next_search_failure(self) -> _Failure | None:
        with self._lock:
            if not self._search_failures:
                return None
            failure = self._search_failures[0]
            failure.times -= 1
            if failure.times <= 0:
                self._search_failures.pop(0)
        return failure

    def _take_search_failure(self) -> web.Response | None:
        failure = self._next_search_failure()
        if failure is None:
            return None
        if failure.challenge:
            return _challenge()
        return web.Response(status=failure.status, text=f"{failure.status} search unavailable",
                            headers=_retry_after_header(failure))

    async def _stall(self) -> None:
        with self._lock:
            if not self._search_stalls:
                return
            stall = self._search_stalls[0]
            stall.times -= 1
            if stall.times <= 0:
                self._search_stalls.pop(0)
        await asyncio.sleep(stall.seconds)

    async def _handle_searxng(self, request: web.Request) -> web.Response:
        await self._stall()
        failed = self._take_search_failure()
        if failed is not None:
            return failed
        query = request.query.get("q", "")
        if request.query.get("format") != "json":
            # SearXNG answers 403 for formats it was not configured to serve; we only serve JSON.
            return web.Response(status=403, text="Forbidden")
        base = f"{request.scheme}://{request.host}"
        refused = list(self.searxng_unresponsive)
        results = [] if refused else await asyncio.to_thread(self.search, query, base)
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
            "unresponsive_engines": [list(pair) for pair in refused],
        })

    async def _handle_ddg(self, request: web.Request) -> web.Response:
        await self._stall()
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

    async def _handle_brave(self, request: web.Request) -> web.Response:
        """Brave Web Search: key check, parameter validation, rate-limit headers, `<strong>` snippets."""
        await self._stall()
        token = request.headers.get("X-Subscription-Token")
        if not token:
            # Brave validates the header like a parameter: a missing token is a 422 VALIDATION.
            return _brave_error(422, "VALIDATION", "Unable to validate request parameter(s)", {
                "errors": [{"type": "missing", "loc": ["header", "x-subscription-token"], "msg": "Field required",
                            "input": None}]})
        if token != self.brave_key:
            return _brave_error(422, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid.",
                                {"component": "authentication"})
        failure = self._next_search_failure()
        if failure is not None:
            return self._brave_failure(failure)
        query = request.query.get("q", "")
        count_text = request.query.get("count", str(BRAVE_MAX_COUNT))
        problem = None
        if not query.strip() or len(query) > BRAVE_MAX_QUERY_CHARS or len(query.split()) > BRAVE_MAX_QUERY_WORDS:
            problem = {"type": "string_too_long" if query.strip() else "missing", "loc": ["query", "q"],
                       "msg": "Query can not be empty, longer than 400 characters or 50 words", "input": query}
        elif not count_text.isdigit() or not 1 <= int(count_text) <= BRAVE_MAX_COUNT:
            problem = {"type": "less_than_equal", "loc": ["query", "count"],
                       "msg": "Input should be less than or equal to 20", "input": count_text}
        if problem is not None:
            return _brave_error(422, "VALIDATION", "Unable to validate request parameter(s)", {"errors": [problem]})
        base = f"{request.scheme}://{request.host}"
        results = (await asyncio.to_thread(self.search, query, base))[: int(count_text)]
        with self._lock:
            self._brave_used += 1
            used = self._brave_used
        words = _query_words(query)
        body: dict[str, Any] = {
            "type": "search",
            "query": {"original": query, "show_strict_warning": False, "is_navigational": False,
                      "is_news_breaking": False, "spellcheck_off": True, "country": "us", "bad_results": False,
                      "should_fallback": False, "postal_code": "", "city": "", "header_country": "",
                      "more_results_available": False, "state": ""},
            "mixed": {"type": "mixed", "main": [{"type": "web", "index": i, "all": False}
                                                for i in range(len(results))], "top": [], "side": []},
        }
        if results:  # with no matches Brave leaves the "web" block out entirely
            body["web"] = {"type": "search", "family_friendly": True,
                           "results": [_brave_result(r, words) for r in results]}
        return web.json_response(body, headers=_brave_rate_headers(0, BRAVE_MONTHLY_QUOTA - used))

    def _brave_failure(self, failure: _Failure) -> web.Response:
        if failure.challenge:
            return _challenge()
        if failure.status == 429:
            with self._lock:
                left = BRAVE_MONTHLY_QUOTA - self._brave_used
            if failure.quota:
                reset = failure.retry_after if failure.retry_after is not None else BRAVE_MONTH_SECONDS // 2
                headers = _brave_rate_headers(1, 0, second_reset=1, month_reset=reset)
                response = _brave_error(429, "QUOTA_LIMITED", "Request quota limit exceeded for plan.",
                                        {"component": "rate_limiter", "plan": "Free",
                                         "quota_limit": BRAVE_MONTHLY_QUOTA, "quota_current": BRAVE_MONTHLY_QUOTA})
            else:
                reset = failure.retry_after if failure.retry_after is not None else 1
                headers = _brave_rate_headers(0, left, second_reset=reset)
                response = _brave_error(429, "RATE_LIMITED", "Request rate limit exceeded for plan.",
                                        {"component": "rate_limiter", "plan": "Free",
                                         "rate_limit": BRAVE_RATE_PER_SECOND, "rate_current": BRAVE_RATE_PER_SECOND})
            response.headers.update(headers)
            response.headers.update(_retry_after_header(failure))
            return response
        return web.Response(status=failure.status, text=f"{failure.status} search unavailable",
                            headers=_retry_after_header(failure))

    async def _handle_tavily(self, request: web.Request) -> web.Response:
        """Tavily Search: Bearer key (or the legacy `api_key` body field), JSON in, JSON out."""
        await self._stall()
        try:
            payload = await request.json()
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            return _tavily_error(400, "Invalid request body: expected a JSON object.")
        auth = request.headers.get("Authorization", "")
        key = auth[len("Bearer "):].strip() if auth.startswith("Bearer ") else payload.get("api_key")
        if key != self.tavily_key:
            return _tavily_error(401)
        failure = self._next_search_failure()
        if failure is not None:
            if failure.challenge:
                return _challenge()
            if failure.status in TAVILY_ERRORS:
                response = _tavily_error(failure.status)
                response.headers.update(_retry_after_header(failure))
                return response
            return web.Response(status=failure.status, text="Internal Server Error" if failure.status == 500
                                else f"{failure.status} search unavailable", headers=_retry_after_header(failure))
        query = payload.get("query")
        max_results = payload.get("max_results", TAVILY_DEFAULT_RESULTS)
        depth = payload.get("search_depth", "basic")
        topic = payload.get("topic", "general")
        if not isinstance(query, str) or not query.strip():
            return _tavily_error(400, "Query is missing or empty.")
        in_range = isinstance(max_results, int) and not isinstance(max_results, bool) \
            and 0 <= max_results <= TAVILY_MAX_RESULTS
        if not in_range:
            return _tavily_error(400, f"max_results must be between 0 and {TAVILY_MAX_RESULTS}.")
        if depth not in TAVILY_DEPTHS:
            return _tavily_error(400, f"Invalid search_depth. Must be one of: {', '.join(TAVILY_DEPTHS)}.")
        if topic not in TAVILY_TOPICS:
            return _tavily_error(400, f"Invalid topic. Must be one of: {', '.join(TAVILY_TOPICS)}.")
        base = f"{request.scheme}://{request.host}"
        results = (await asyncio.to_thread(self.search, query, base))[:max_results]
        items = []
        for i, r in enumerate(results):
            item: dict[str, Any] = {"url": r.url, "title": r.title, "content": r.content,
                                    "score": round(0.92 * 0.85 ** i, 8), "raw_content": None}
            if topic == "news" and r.published:  # Tavily dates results only for the news topic
                item["published_date"] = _rfc1123(r.published)
            items.append(item)
        return web.json_response({
            "query": query, "follow_up_questions": None, "answer": None, "images": [], "results": items,
            "response_time": 0.42, "request_id": str(uuid.uuid4()),
        })

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
        with self._lock:
            self.slow_started += 1
        await asyncio.sleep(self.slow_seconds)
        await resp.write(b"<p>Finally here.</p></body></html>")
        await resp.write_eof()
        with self._lock:
            self.slow_served += 1
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


def _retry_after_header(failure: _Failure) -> dict[str, str]:
    return {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}


def _brave_error(status: int, code: str, detail: str, meta: dict[str, Any]) -> web.Response:
    """Brave's ErrorResponse: {"type": "ErrorResponse", "error": {id, status, code, detail, meta}, "time"}."""
    return web.json_response({
        "type": "ErrorResponse",
        "error": {"id": str(uuid.uuid4()), "status": status, "code": code, "detail": detail, "meta": meta},
        "time": 1_700_000_000,
    }, status=status)


def _brave_rate_headers(second_left: int, month_left: int, *, second_reset: int = 1,
                        month_reset: int = BRAVE_MONTH_SECONDS // 2) -> dict[str, str]:
    """Brave's X-RateLimit-* headers: one comma-separated entry per window (second, month)."""
    return {
        "X-RateLimit-Limit": f"{BRAVE_RATE_PER_SECOND}, {BRAVE_MONTHLY_QUOTA}",
        "X-RateLimit-Policy": f"{BRAVE_RATE_PER_SECOND};w=1, {BRAVE_MONTHLY_QUOTA};w={BRAVE_MONTH_SECONDS}",
        "X-RateLimit-Remaining": f"{max(second_left, 0)}, {max(month_left, 0)}",
        "X-RateLimit-Reset": f"{second_reset}, {month_reset}",
    }


def _brave_result(r: SearchResult, words: list[str]) -> dict[str, Any]:
    """One Brave web result: HTML display strings, query words in <strong> in the description."""
    parts = urlsplit(r.url)
    item: dict[str, Any] = {
        "title": html.escape(r.title, quote=False),  # display strings are HTML, as in Brave's answers
        "url": r.url,
        "is_source_local": False,
        "is_source_both": False,
        "description": _bold(r.content, words, tag="strong"),
        "profile": {"name": parts.hostname or "", "url": r.url, "long_name": parts.hostname or "", "img": ""},
        "language": "en",
        "family_friendly": True,
        "type": "search_result",
        "subtype": "generic",
        "is_live": False,
        "meta_url": {"scheme": parts.scheme, "netloc": parts.netloc, "hostname": parts.hostname or "",
                     "favicon": "", "path": parts.path or "/"},
    }
    if r.published:
        day = date.fromisoformat(r.published[:10])
        item["page_age"] = f"{day.isoformat()}T00:00:00"
        item["age"] = f"{_MONTHS[day.month - 1]} {day.day}, {day.year}"
    return item


def _challenge() -> web.Response:
    return web.Response(status=202, text=_ANOMALY_PAGE, content_type="text/html", charset="utf-8")


def _tavily_error(status: int, message: str | None = None) -> web.Response:
    """Tavily's error body: {"detail": {"error": "…"}}."""
    return web.json_response({"detail": {"error": message or TAVILY_ERRORS.get(status, "Error")}}, status=status)


def _rfc1123(iso_day: str) -> str:
    day = date.fromisoformat(iso_day[:10])
    return f"{_WEEKDAYS[day.weekday()]}, {day.day:02d} {_MONTHS[day.month - 1][:3]} {day.year} 00:00:00 GMT"


# English names regardless of the process locale (strftime's %a/%B are locale-dependent).
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")


def _absolute(url: str, base: str) -> str:
    return base + url if url.startswith("/") else url


def _bold(snippet: str, words: list[str], tag: str = "b") -> str:
    escaped = html.escape(snippet)
    if not words:
        return escaped
    pattern = re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")\b", re.I)
    return pattern.sub(rf"<{tag}>\1</{tag}>", escaped)


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


# The shape of DuckDuckGo's bot check (served with HTTP 202): a modal and a challenge form
# posting to anomaly.js, and no result markup at all.
_ANOMALY_PAGE = """<!DOCTYPE html>
<html lang="en-US">
<head>
<meta http-equiv="content-type" content="text/html; charset=UTF-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0, maximum-scale=1.0, user-scalable=0">
<title>DuckDuckGo</title>
</head>
<body>
<div class="anomaly-modal__mask">
  <div class="anomaly-modal__modal" data-testid="anomaly-modal">
    <div class="anomaly-modal__title">Unfortunately, bots use DuckDuckGo too.</div>
    <div class="anomaly-modal__description">Please complete the following challenge to confirm this search was
      made by a human.</div>
    <div class="anomaly-modal__instructions">Select all squares containing a duck:</div>
    <form id="challenge-form" action="//duckduckgo.com/anomaly.js?sv=html&amp;cc=sre&amp;ti=1732960000&amp;gk=d4cd0dabcf4caa22ad92fab40844c786&amp;p=f1f5a6b0c3b2d&amp;q=query&amp;s=0&amp;tk=mW3pSQXB3k" method="POST">
      <div class="anomaly-modal__puzzle"></div>
      <button type="submit" class="anomaly-modal__submit">Submit</button>
    </form>
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
