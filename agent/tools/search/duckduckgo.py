"""The keyless default: DuckDuckGo and its sibling backends through the `ddgs` library.

ddgs speaks DuckDuckGo's current protocol and falls back across backends by itself; it is
synchronous, so it runs in a worker thread under our own deadline. Its exceptions are mapped
to failure kinds here. One limit of the library: a backend that refuses (HTTP 202, a
captcha) and one that found nothing both come back as "No results found.", so an empty
answer from ddgs is reported as uncertain, never as a plain "no results".
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any, Protocol

import httpx
from ddgs import DDGS
from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

from ... import defaults
from ...config import SearchConfig
from .normalise import hits_from, plain
from .outcome import SearchFailed, SearchHit

__all__ = ["LABEL", "DDGSClient", "DDGSFactory", "DuckDuckGo"]

LABEL = "DuckDuckGo"
# ddgs tries its backends two at a time and waits up to its own timeout per round; giving it
# a third of our deadline lets a third round start before we give up on it.
DDGS_ROUNDS = 3
# What ddgs raises when no backend returned anything (refused or empty alike).
DDGS_NO_RESULTS = "No results found."
# Library error text quoted in a failure, kept short.
DETAIL_MAX_CHARS = 160
_RATE_WORDS = ("ratelimit", "rate limit", "429", "too many requests")
_BLOCK_WORDS = ("202", "anomaly", "captcha", "403", "forbidden")


class DDGSClient(Protocol):
    def text(self, query: str, **kwargs: Any) -> list[dict[str, Any]]: ...


# Called as factory(timeout=seconds); the real one is ddgs.DDGS, tests pass a fake class.
DDGSFactory = Callable[..., DDGSClient]


def _failure(exc: DDGSException, timeout: float) -> SearchFailed:
    if isinstance(exc, RatelimitException):
        return SearchFailed(
            "DuckDuckGo is rate-limiting searches from this server; read pages you already have, "
            "then search again in a few minutes",
            "rate_limited",
        )
    if isinstance(exc, TimeoutException):
        return SearchFailed(
            f"DuckDuckGo did not answer within {timeout:g} s; try again, or use a shorter query", "timeout"
        )
    detail = plain(str(exc), DETAIL_MAX_CHARS)
    lowered = detail.lower()
    if any(word in lowered for word in _RATE_WORDS):
        return SearchFailed(
            f"DuckDuckGo is rate-limiting searches from this server ({detail}); read pages you "
            "already have, then search again in a few minutes",
            "rate_limited",
        )
    if any(word in lowered for word in _BLOCK_WORDS):
        return SearchFailed(
            f"DuckDuckGo is blocking automated searches from this server ({detail}), so rephrasing will not help",
            "blocked",
        )
    if "timed out" in lowered or "timeout" in lowered:
        return SearchFailed(
            f"DuckDuckGo did not answer in time ({detail}); try again, or use a shorter query", "timeout"
        )
    return SearchFailed(
        f"DuckDuckGo search failed ({detail or type(exc).__name__}); try again in a minute, "
        "or read pages you already have",
        "unavailable",
    )


class DuckDuckGo:
    """The `duckduckgo` provider. `ddgs` is the library seam: ddgs.DDGS, or a fake in tests."""

    label = LABEL
    # ddgs cannot tell a refusal from an empty answer (see the module docstring).
    empty_is_certain = False

    def __init__(self, ddgs: DDGSFactory = DDGS) -> None:
        self._ddgs = ddgs

    async def __call__(self, client: httpx.AsyncClient, config: SearchConfig, query: str) -> list[SearchHit]:
        del client  # ddgs brings its own HTTP client (it impersonates a browser's TLS)
        timeout = config.timeout_seconds
        results = config.results or defaults.SEARCH_RESULTS

        def run() -> list[dict[str, Any]]:
            engine = self._ddgs(timeout=max(1, math.ceil(timeout / DDGS_ROUNDS)))
            return engine.text(query, max_results=results, backend=config.ddgs_backend)

        try:
            async with asyncio.timeout(timeout):
                raw = await asyncio.to_thread(run)
        except TimeoutError:
            # The thread finishes on ddgs's own timeout; we stop waiting for it now.
            raise SearchFailed(
                f"DuckDuckGo did not answer within {timeout:g} s; try again, or use a shorter query", "timeout"
            ) from None
        except DDGSException as exc:
            if str(exc) == DDGS_NO_RESULTS:
                return []
            raise _failure(exc, timeout) from None
        return hits_from(raw or [], url="href", snippet="body")
