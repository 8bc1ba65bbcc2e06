"""HTTP for the hand-written providers: one capped request, deadlines, and what a status means.

Every failure leaves as SearchFailed with a kind (outcome.FailureKind) and a message that
says what happened and what to do next. A bot-check page (DuckDuckGo's HTTP 202 "anomaly"
page, a Cloudflare challenge) is recognised here, before any parser sees it, so a block is
never mistaken for an empty result.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from ...config import SearchConfig
from .outcome import SearchFailed

__all__ = [
    "RESULT_GONE",
    "Reply",
    "api_key",
    "call",
    "challenge_of",
    "parse_json",
    "retry_after",
    "status_error",
    "wait_text",
]

# A search answer is a few KB of JSON or HTML; anything far larger is not a search answer.
MAX_RESPONSE_BYTES = 2_000_000
# A 429 asking for a pause this short (a per-second limit, typical of Brave's plans when the
# agent searches in parallel) is waited out once instead of failing the tool call.
RATE_LIMIT_PAUSE_MAX_SECONDS = 2.0
SEARCH_429_RETRIES = 1
# How much of an HTML body is scanned for bot-check markers (they sit near the top).
CHALLENGE_SCAN_BYTES = 64_000
# Words bot-check pages use: DuckDuckGo's "anomaly" form, captchas, Cloudflare's interstitial.
_CHALLENGE = re.compile(
    rb"anomaly|captcha|challenge-form|cf-chl|unusual traffic|are you a robot|just a moment", re.IGNORECASE
)

RESULT_GONE = "read pages you already have, or search again later"


@dataclass
class Reply:
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


def wait_text(seconds: float) -> str:
    if seconds < 120:
        return f"{max(seconds, 0):.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


def retry_after(headers: httpx.Headers) -> float | None:
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
        when = when.replace(tzinfo=UTC)
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)


def challenge_of(reply: Reply) -> str | None:
    """What kind of bot check `reply` is, or None when it is an ordinary answer.

    DuckDuckGo answers automated clients with HTTP 202 and an "anomaly" page; Cloudflare marks
    its challenges with `cf-mitigated: challenge`. An API never answers a search with HTML that
    asks for a captcha, whatever the status.
    """
    if reply.headers.get("cf-mitigated", "").lower() == "challenge":
        return "a Cloudflare challenge"
    if "html" not in reply.content_type and reply.body.lstrip()[:1] != b"<":
        return None
    if _CHALLENGE.search(reply.body[:CHALLENGE_SCAN_BYTES]):
        return "a bot-check page"
    if reply.status == 202:
        return "an HTML page with HTTP 202"  # DuckDuckGo's way of saying "not for robots"
    return None


def status_error(provider: str, response: Reply | httpx.Response, wait: float | None = None) -> SearchFailed:
    code = response.status_code
    if code == 429:
        if wait is None:
            wait = retry_after(response.headers)
        hint = f" and asks us to wait {wait_text(wait)}" if wait is not None else ""
        return SearchFailed(
            f"{provider} is rate-limiting searches{hint}; read pages you already have, then search again",
            "rate_limited",
        )
    if code in (401, 403):
        return SearchFailed(
            f"{provider} rejected our credentials (HTTP {code}); the operator must fix the search key; "
            f"until then, {RESULT_GONE}",
            "configuration",
        )
    if code >= 500:
        return SearchFailed(
            f"{provider} had a server error (HTTP {code}); try again in a minute, or read pages you already have",
            "unavailable",
        )
    if 300 <= code < 400:
        return SearchFailed(
            f"{provider} answered with a redirect (HTTP {code}) instead of results; the operator "
            f"should check the search endpoint setting; until then, {RESULT_GONE}",
            "configuration",
        )
    return SearchFailed(f"{provider} refused the search (HTTP {code}); try a shorter, plainer query", "refused_query")


async def _send(
    client: httpx.AsyncClient, provider: str, method: str, url: str, timeout: float, **kwargs: Any
) -> Reply:
    try:
        async with client.stream(method, url, timeout=timeout, follow_redirects=False, **kwargs) as response:
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_RESPONSE_BYTES:
                    raise SearchFailed(
                        f"{provider} answered with more than {MAX_RESPONSE_BYTES // 1_000_000} MB, "
                        "which is not a search result; try again later",
                        "unavailable",
                    )
            return Reply(response.status_code, response.headers, bytes(body))
    except httpx.TimeoutException:
        raise SearchFailed(
            f"{provider} did not answer within {timeout:g} s; try again, or use a shorter query", "timeout"
        ) from None
    except httpx.HTTPError as exc:
        raise SearchFailed(
            f"{provider} could not be reached ({type(exc).__name__}); try again in a minute, "
            "or read pages you already have",
            "unavailable",
        ) from None


async def call(
    client: httpx.AsyncClient,
    provider: str,
    method: str,
    url: str,
    config: SearchConfig,
    wait_of: Callable[[Reply], float | None] | None = None,
    **kwargs: Any,
) -> Reply:
    """One search request under the search deadline; a brief rate-limit pause is waited out once.

    `wait_of(reply)` reads a provider-specific pause from a 429; Retry-After is used otherwise.
    A bot-check page fails here as "blocked", whatever its status.
    """
    total = config.timeout_seconds
    loop = asyncio.get_running_loop()
    deadline = loop.time() + total
    try:
        async with asyncio.timeout(total):
            for attempt in range(SEARCH_429_RETRIES + 1):
                reply = await _send(client, provider, method, url, total, **kwargs)
                challenge = challenge_of(reply)
                if challenge is not None:
                    raise SearchFailed(
                        f"{provider} answered with {challenge} (HTTP {reply.status}) instead of results: "
                        "it is blocking automated searches from this server, so rephrasing will not "
                        "help",
                        "blocked",
                    )
                if reply.status != 429 or attempt == SEARCH_429_RETRIES:
                    return reply
                wait = wait_of(reply) if wait_of else retry_after(reply.headers)
                if wait is None or wait > RATE_LIMIT_PAUSE_MAX_SECONDS or loop.time() + wait >= deadline:
                    return reply
                await asyncio.sleep(wait)
    except TimeoutError:
        raise SearchFailed(
            f"{provider} did not answer within {total:g} s; try again, or use a shorter query", "timeout"
        ) from None
    raise AssertionError("unreachable")  # pragma: no cover


def parse_json(reply: Reply, provider: str, hint: str) -> Any:
    try:
        return reply.json()
    except ValueError:
        kind = reply.content_type or "an unlabelled body"
        raise SearchFailed(
            f"{provider} answered with {kind}, not JSON ({hint}); try again in a minute, "
            "or read pages you already have",
            "unavailable",
        ) from None


def api_key(value: str | None, env: str, provider: str, where: str) -> str:
    key = (value or "").strip()
    if not key:
        raise SearchFailed(
            f"{provider} search is selected but {env} is not set; the operator must set {env} "
            f"(create a key at {where}); until then, web search is unavailable: read pages "
            "you already have or URLs you know with read_page",
            "configuration",
        )
    if not key.isascii() or not key.isprintable() or any(c.isspace() for c in key):
        raise SearchFailed(
            f"{env} contains spaces, line breaks or non-ASCII characters, so it cannot be a valid key; "
            f"the operator must copy it again from {where}; until then, {RESULT_GONE}",
            "configuration",
        )
    return key
