"""Search providers behind one interface: a query in, normalised results out.

Every failure, whatever the provider, comes back as SearchFailed whose message says what
happened and what to do next; nothing else escapes `search()`. API keys never appear in a
message: they travel only in request headers, and messages are scrubbed of them anyway.
"""
from __future__ import annotations

import asyncio
import html
import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from lxml import etree
from lxml import html as lxml_html

from ..config import SearchConfig
from .. import defaults

# A search answer is a few KB of JSON or HTML; anything far larger is not a search answer.
MAX_RESPONSE_BYTES = 2_000_000
# A 429 asking for a pause this short (a per-second limit, typical of Brave's plans when the
# agent searches in parallel) is waited out once instead of failing the tool call.
RATE_LIMIT_PAUSE_MAX_SECONDS = 2.0
RATE_LIMIT_RETRIES = 1
# A snippet is a lead, not evidence: enough to judge a result, small enough for many of them.
SNIPPET_MAX_CHARS = 500
# Provider-side text quoted in an error (a validation detail), kept short.
DETAIL_MAX_CHARS = 160

# Brave Web Search API limits (api-dashboard.search.brave.com, web search reference).
BRAVE_MAX_COUNT = 20
BRAVE_MAX_QUERY_CHARS = 400
BRAVE_MAX_QUERY_WORDS = 50
BRAVE_KEY_HELP = "https://api-dashboard.search.brave.com (API Keys)"
# Tavily Search API limits (docs.tavily.com, search endpoint reference).
TAVILY_MAX_RESULTS = 20
TAVILY_SEARCH_DEPTH = "basic"  # 1 credit; "advanced" costs 2 and is slower
TAVILY_KEY_HELP = "https://app.tavily.com (API Keys, tvly-…)"

_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_RESULT_GONE = "read pages you already have, or search again later"


@dataclass
class SearchHit:
    title: str
    url: str
    snippet: str
    date: str | None = None


class SearchFailed(Exception):
    """The provider could not answer; the message tells the model what to try."""


@dataclass
class _Reply:
    """A provider's whole answer, read under the size cap."""

    status: int
    headers: httpx.Headers
    body: bytes

    @property
    def status_code(self) -> int:
        return self.status

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    def json(self) -> Any:
        return json.loads(self.body)


# ---------------------------------------------------------------- transport


def _wait_text(seconds: float) -> str:
    if seconds < 120:
        return f"{max(seconds, 0):.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    value = headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max((when - datetime.now(timezone.utc)).total_seconds(), 0.0)


def _status_error(provider: str, response: _Reply | httpx.Response, wait: float | None = None) -> SearchFailed:
    code = response.status_code
    if code == 429:
        if wait is None:
            wait = _retry_after(response.headers)
        hint = f" and asks us to wait {_wait_text(wait)}" if wait is not None else ""
        return SearchFailed(f"{provider} is rate-limiting searches{hint}; read pages you already have, then search again")
    if code in (401, 403):
        return SearchFailed(f"{provider} rejected our credentials (HTTP {code}); the operator must fix the search key; "
                            f"until then, {_RESULT_GONE}")
    if code >= 500:
        return SearchFailed(f"{provider} had a server error (HTTP {code}); try again in a minute, "
                            "or read pages you already have")
    if 300 <= code < 400:
        return SearchFailed(f"{provider} answered with a redirect (HTTP {code}) instead of results; the operator "
                            f"should check the search endpoint setting; until then, {_RESULT_GONE}")
    return SearchFailed(f"{provider} refused the search (HTTP {code}); try a shorter, plainer query")


async def _send(client: httpx.AsyncClient, provider: str, method: str, url: str, timeout: float,
                **kwargs: Any) -> _Reply:
    try:
        async with client.stream(method, url, timeout=timeout, follow_redirects=False, **kwargs) as response:
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_RESPONSE_BYTES:
                    raise SearchFailed(f"{provider} answered with more than {MAX_RESPONSE_BYTES // 1_000_000} MB, "
                                       "which is not a search result; try again later")
            return _Reply(response.status_code, response.headers, bytes(body))
    except httpx.TimeoutException:
        raise SearchFailed(f"{provider} did not answer within {timeout:g} s; try again, "
                           "or use a shorter query") from None
    except httpx.HTTPError as exc:
        raise SearchFailed(f"{provider} could not be reached ({type(exc).__name__}); try again in a minute, "
                           "or read pages you already have") from None


async def _call(client: httpx.AsyncClient, provider: str, method: str, url: str, config: SearchConfig,
                wait_of: Any = None, **kwargs: Any) -> _Reply:
    """One search request under the search deadline; a brief rate-limit pause is waited out once.

    `wait_of(reply)` reads a provider-specific pause from a 429; Retry-After is used otherwise.
    """
    total = config.timeout_seconds
    loop = asyncio.get_running_loop()
    deadline = loop.time() + total
    try:
        async with asyncio.timeout(total):
            for attempt in range(RATE_LIMIT_RETRIES + 1):
                reply = await _send(client, provider, method, url, total, **kwargs)
                if reply.status != 429 or attempt == RATE_LIMIT_RETRIES:
                    return reply
                wait = wait_of(reply) if wait_of else _retry_after(reply.headers)
                if wait is None or wait > RATE_LIMIT_PAUSE_MAX_SECONDS or loop.time() + wait >= deadline:
                    return reply
                await asyncio.sleep(wait)
    except TimeoutError:
        raise SearchFailed(f"{provider} did not answer within {total:g} s; try again, or use a shorter query") from None
    raise AssertionError("unreachable")  # pragma: no cover


async def _get(client: httpx.AsyncClient, provider: str, url: str, config: SearchConfig, **kwargs: Any) -> _Reply:
    reply = await _call(client, provider, "GET", url, config, **kwargs)
    if not 200 <= reply.status < 300:
        raise _status_error(provider, reply)
    return reply


def _json(reply: _Reply, provider: str, hint: str) -> Any:
    try:
        return reply.json()
    except ValueError:
        kind = reply.content_type or "an unlabelled body"
        raise SearchFailed(f"{provider} answered with {kind}, not JSON ({hint}); try again in a minute, "
                           "or read pages you already have") from None


# ---------------------------------------------------------------- normalising


def _plain(value: object, limit: int | None = None) -> str:
    """Text without markup: tags like <strong> dropped, entities unescaped, spaces collapsed."""
    if not isinstance(value, str):
        return ""
    text = " ".join(html.unescape(_TAG.sub("", value)).split())
    if limit is not None and len(text) > limit:
        cut = text.rfind(" ", 0, limit)
        text = text[: cut if cut > limit // 2 else limit].rstrip(" ,;:") + "…"
    return text


def _date(value: object) -> str | None:
    """An ISO date (YYYY-MM-DD) from ISO or RFC 1123 timestamps; other text is kept as given."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).date().isoformat()
    except ValueError:
        pass
    try:
        return parsedate_to_datetime(text).date().isoformat()
    except (TypeError, ValueError, IndexError):
        pass
    return _plain(text, 40) or None


def _normalised(results: list[Any], *, snippet: str, dates: tuple[str, ...]) -> list[SearchHit]:
    """Provider result dicts → SearchHits (entries without a URL string are skipped)."""
    hits = []
    for r in results:
        if not isinstance(r, dict) or not isinstance(r.get("url"), str):
            continue
        hits.append(SearchHit(
            title=_plain(r.get("title")) or r["url"], url=r["url"],
            snippet=_plain(r.get(snippet), SNIPPET_MAX_CHARS),
            date=next((d for d in (_date(r.get(key)) for key in dates) if d), None),
        ))
    return hits


def _hits(items: list[SearchHit]) -> list[SearchHit]:
    """Web results only (http/https), each URL once, in the provider's order."""
    seen: set[str] = set()
    kept = []
    for hit in items:
        if not hit.url.startswith(("http://", "https://")) or hit.url in seen:
            continue
        seen.add(hit.url)
        kept.append(hit)
    return kept


def _api_key(value: str | None, env: str, provider: str, where: str) -> str:
    key = (value or "").strip()
    if not key:
        raise SearchFailed(f"{provider} search is selected but {env} is not set; the operator must set {env} "
                           f"(create a key at {where}); until then, web search is unavailable: read pages "
                           "you already have or URLs you know with read_page")
    if not key.isascii() or not key.isprintable() or any(c.isspace() for c in key):
        raise SearchFailed(f"{env} contains spaces, line breaks or non-ASCII characters, so it cannot be a valid key; "
                           f"the operator must copy it again from {where}; until then, {_RESULT_GONE}")
    return key


def _redact(message: str, config: SearchConfig) -> str:
    for secret in (config.brave_api_key, config.tavily_api_key):
        secret = (secret or "").strip()
        if len(secret) >= 4:
            message = message.replace(secret, "[redacted]")
    return message


# ---------------------------------------------------------------- SearXNG


async def searxng(client: httpx.AsyncClient, config: SearchConfig, query: str) -> list[SearchHit]:
    if not config.searxng_url:
        raise SearchFailed("SearXNG is selected but SEARXNG_URL is not set; the operator must set it")
    url = config.searxng_url.rstrip("/") + "/search"
    reply = await _call(client, "SearXNG", "GET", url, config, params={"q": query, "format": "json"})
    if reply.status == 403:
        # SearXNG answers 403 for an output format its settings.yml does not enable.
        raise SearchFailed("SearXNG refused JSON output (HTTP 403); the operator must add json to search.formats "
                           f"in its settings.yml; until then, {_RESULT_GONE}")
    if not 200 <= reply.status < 300:
        raise _status_error("SearXNG", reply)
    data = _json(reply, "SearXNG", "is its JSON format enabled?")
    results = data.get("results", []) if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise SearchFailed("SearXNG answered without a result list; is its JSON format enabled?")
    return [
        SearchHit(title=r.get("title") or r.get("url", ""), url=r["url"], snippet=r.get("content") or "",
                  date=r.get("publishedDate"))
        for r in results if isinstance(r, dict) and isinstance(r.get("url"), str) and r.get("url")
    ]


# ---------------------------------------------------------------- DuckDuckGo


def _ddg_target(href: str) -> str:
    # Result links go through a redirector: //duckduckgo.com/l/?uddg=<target>
    if "uddg=" in href:
        values = parse_qs(urlsplit(href).query).get("uddg")
        if values:
            return values[0]
    return href


async def duckduckgo(client: httpx.AsyncClient, config: SearchConfig, query: str) -> list[SearchHit]:
    reply = await _get(client, "DuckDuckGo", config.duckduckgo_url, config, params={"q": query})
    try:
        tree = lxml_html.fromstring(reply.body or b"<html/>")
    except (etree.LxmlError, ValueError):
        raise SearchFailed("DuckDuckGo answered with an empty or unreadable page; try again in a minute, "
                           "or read pages you already have") from None
    hits: list[SearchHit] = []
    for result in tree.xpath('//div[contains(concat(" ", normalize-space(@class), " "), " result ")]'):
        links = result.xpath('.//a[contains(@class, "result__a")]')
        if not links:
            continue
        snippet = result.xpath('.//*[contains(@class, "result__snippet")]')
        url = _ddg_target(links[0].get("href", ""))
        if not url.startswith("http"):
            continue  # ads and internal links
        hits.append(SearchHit(
            title=" ".join(links[0].text_content().split()),
            url=url,
            snippet=" ".join(snippet[0].text_content().split()) if snippet else "",
        ))
    return hits


# ---------------------------------------------------------------- Brave


def _ints(value: str | None) -> list[int]:
    out = []
    for part in (value or "").split(","):
        try:
            out.append(int(part.strip()))
        except ValueError:
            return []
    return out


def _brave_wait(reply: _Reply) -> float | None:
    """Seconds until Brave admits another request: Retry-After, else the exhausted windows' reset.

    Brave sends X-RateLimit-Remaining / X-RateLimit-Reset as comma lists, one entry per
    window (per second, per month); the longest exhausted window decides.
    """
    explicit = _retry_after(reply.headers)
    if explicit is not None:
        return explicit
    remaining = _ints(reply.headers.get("x-ratelimit-remaining"))
    reset = _ints(reply.headers.get("x-ratelimit-reset"))
    if not reset:
        return None
    exhausted = [r for left, r in zip(remaining, reset) if left <= 0]
    return float(max(exhausted) if exhausted else reset[0])


def _brave_error_fields(reply: _Reply) -> tuple[str, str]:
    """(code, detail) from {"type": "ErrorResponse", "error": {...}} (or an "errors" list)."""
    try:
        data = reply.json()
    except ValueError:
        return "", ""
    if not isinstance(data, dict):
        return "", ""
    error = data.get("error")
    if not isinstance(error, dict) and isinstance(data.get("errors"), list) and data["errors"]:
        error = data["errors"][0]
    if not isinstance(error, dict):
        return "", ""
    return str(error.get("code") or ""), _plain(error.get("detail"), DETAIL_MAX_CHARS)


def _brave_failure(reply: _Reply) -> SearchFailed:
    code, detail = _brave_error_fields(reply)
    if code.startswith("SUBSCRIPTION_TOKEN") or code == "SUBSCRIPTION_NOT_FOUND" or reply.status in (401, 403):
        return SearchFailed(f"Brave rejected the API key (HTTP {reply.status}{', ' + code if code else ''}); "
                            f"the operator must set a valid BRAVE_API_KEY from {BRAVE_KEY_HELP}; "
                            f"until then, {_RESULT_GONE}")
    if reply.status == 429:
        wait = _brave_wait(reply)
        if code == "QUOTA_LIMITED":
            when = f" (it resets in {_wait_text(wait)})" if wait is not None else ""
            return SearchFailed(f"Brave's search quota for this key is used up{when}; the operator must raise the "
                                "plan's limit; until then, read pages you already have or URLs you know")
        return _status_error("Brave", reply, wait)
    if reply.status in (400, 422):
        said = f": {detail}" if detail else ""
        return SearchFailed(f"Brave could not accept this query (HTTP {reply.status}{said}); use 2–6 plain words, "
                            f"under {BRAVE_MAX_QUERY_CHARS} characters")
    return _status_error("Brave", reply)


async def brave(client: httpx.AsyncClient, config: SearchConfig, query: str) -> list[SearchHit]:
    key = _api_key(config.brave_api_key, "BRAVE_API_KEY", "Brave", BRAVE_KEY_HELP)
    words = len(query.split())
    if len(query) > BRAVE_MAX_QUERY_CHARS or words > BRAVE_MAX_QUERY_WORDS:
        raise SearchFailed(f"the query is too long for Brave ({len(query)} characters, {words} words; at most "
                           f"{BRAVE_MAX_QUERY_CHARS} and {BRAVE_MAX_QUERY_WORDS}); use 2–6 plain words")
    count = max(1, min(config.results or defaults.SEARCH_RESULTS, BRAVE_MAX_COUNT))
    reply = await _call(
        client, "Brave", "GET", config.brave_url, config, wait_of=_brave_wait,
        params={"q": query, "count": count},
        headers={"X-Subscription-Token": key, "Accept": "application/json"},
    )
    if not 200 <= reply.status < 300:
        raise _brave_failure(reply)
    data = _json(reply, "Brave", "is DEEPTHREAD_BRAVE_URL the web search endpoint?")
    if not isinstance(data, dict) or data.get("type") != "search":
        raise SearchFailed("Brave answered in an unexpected shape (no search response); try again in a minute, "
                           "or read pages you already have")
    web = data.get("web")
    if web is None:
        return []  # Brave leaves out the "web" block when nothing matched
    results = web.get("results") if isinstance(web, dict) else None
    if not isinstance(results, list):
        raise SearchFailed("Brave answered without a web result list; try again in a minute, "
                           "or read pages you already have")
    hits = _normalised(results, snippet="description", dates=("page_age", "age"))
    return _hits(hits)


# ---------------------------------------------------------------- Tavily


def _tavily_detail(reply: _Reply) -> str:
    """The message from {"detail": {"error": "..."}} (or a validation list), if any."""
    try:
        data = reply.json()
    except ValueError:
        return _plain(reply.body[:DETAIL_MAX_CHARS * 2].decode("utf-8", "replace"), DETAIL_MAX_CHARS)
    detail = data.get("detail") if isinstance(data, dict) else None
    if isinstance(detail, dict):
        return _plain(detail.get("error"), DETAIL_MAX_CHARS)
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        return _plain(detail[0].get("msg"), DETAIL_MAX_CHARS)
    return _plain(detail, DETAIL_MAX_CHARS)


def _tavily_failure(reply: _Reply) -> SearchFailed:
    status = reply.status
    if status in (401, 403):
        return SearchFailed(f"Tavily rejected the API key (HTTP {status}); the operator must set a valid "
                            f"TAVILY_API_KEY from {TAVILY_KEY_HELP}; until then, {_RESULT_GONE}")
    if status in (432, 433):
        limit = "plan's usage limit" if status == 432 else "pay-as-you-go limit"
        return SearchFailed(f"Tavily refused the search: this key's {limit} is reached (HTTP {status}); the operator "
                            "must raise it in the Tavily dashboard; until then, read pages you already have "
                            "or URLs you know")
    if status in (400, 422):
        detail = _tavily_detail(reply)
        said = f": {detail}" if detail else ""
        return SearchFailed(f"Tavily could not accept this query (HTTP {status}{said}); use 2–6 plain words")
    return _status_error("Tavily", reply)


async def tavily(client: httpx.AsyncClient, config: SearchConfig, query: str) -> list[SearchHit]:
    key = _api_key(config.tavily_api_key, "TAVILY_API_KEY", "Tavily", TAVILY_KEY_HELP)
    body = {
        "query": query,
        "max_results": max(1, min(config.results or defaults.SEARCH_RESULTS, TAVILY_MAX_RESULTS)),
        "search_depth": TAVILY_SEARCH_DEPTH,
        "include_answer": False,
        "include_raw_content": False,
        "include_images": False,
    }
    reply = await _call(
        client, "Tavily", "POST", config.tavily_url, config, json=body,
        headers={"Authorization": f"Bearer {key}", "Accept": "application/json"},
    )
    if not 200 <= reply.status < 300:
        raise _tavily_failure(reply)
    data = _json(reply, "Tavily", "is DEEPTHREAD_TAVILY_URL the search endpoint?")
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise SearchFailed("Tavily answered without a result list; try again in a minute, "
                           "or read pages you already have")
    hits = _normalised(results, snippet="content", dates=("published_date",))
    return _hits(hits)


# ---------------------------------------------------------------- dispatch

_PROVIDERS = {"searxng": searxng, "duckduckgo": duckduckgo, "brave": brave, "tavily": tavily}


async def search(client: httpx.AsyncClient, config: SearchConfig, query: str) -> list[SearchHit]:
    provider = _PROVIDERS.get(config.provider)
    if provider is None:
        raise SearchFailed(
            f"the {config.provider} search provider is unknown; the operator can set DEEPTHREAD_SEARCH to "
            "duckduckgo, searxng, brave or tavily"
        )
    try:
        hits = await provider(client, config, query)
    except SearchFailed as exc:
        raise SearchFailed(_redact(str(exc), config)) from None
    return hits[: config.results or defaults.SEARCH_RESULTS]
