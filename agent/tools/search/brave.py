"""Brave Web Search API: GET with X-Subscription-Token (api-dashboard.search.brave.com reference)."""

from __future__ import annotations

import httpx

from ... import defaults
from ...config import SearchConfig
from .normalise import hits_from, plain
from .outcome import SearchFailed, SearchHit
from .transport import (
    RESULT_GONE,
    Reply,
    api_key,
    call,
    parse_json,
    retry_after,
    status_error,
    wait_text,
)

__all__ = ["KEY_HELP", "LABEL", "SETTING", "brave"]

LABEL = "Brave"
SETTING = "BRAVE_API_KEY"  # what an operator sets to add it to the chain
BRAVE_MAX_COUNT = 20
BRAVE_MAX_QUERY_CHARS = 400
BRAVE_MAX_QUERY_WORDS = 50
KEY_HELP = "https://api-dashboard.search.brave.com (API Keys)"
DETAIL_MAX_CHARS = 160


def _ints(value: str | None) -> list[int]:
    out = []
    for part in (value or "").split(","):
        try:
            out.append(int(part.strip()))
        except ValueError:
            return []
    return out


def _wait(reply: Reply) -> float | None:
    """Seconds until Brave admits another request: Retry-After, else the exhausted windows' reset.

    Brave sends X-RateLimit-Remaining / X-RateLimit-Reset as comma lists, one entry per
    window (per second, per month); the longest exhausted window decides.
    """
    explicit = retry_after(reply.headers)
    if explicit is not None:
        return explicit
    remaining = _ints(reply.headers.get("x-ratelimit-remaining"))
    reset = _ints(reply.headers.get("x-ratelimit-reset"))
    if not reset:
        return None
    # Brave sends one value per window (per second, per month); a short header pairs what it has.
    exhausted = [r for left, r in zip(remaining, reset, strict=False) if left <= 0]
    return float(max(exhausted) if exhausted else reset[0])


def _error_fields(reply: Reply) -> tuple[str, str]:
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
    return str(error.get("code") or ""), plain(error.get("detail"), DETAIL_MAX_CHARS)


def _failure(reply: Reply) -> SearchFailed:
    code, detail = _error_fields(reply)
    if code.startswith("SUBSCRIPTION_TOKEN") or code == "SUBSCRIPTION_NOT_FOUND" or reply.status in (401, 403):
        return SearchFailed(
            f"Brave rejected the API key (HTTP {reply.status}{', ' + code if code else ''}); "
            f"the operator must set a valid BRAVE_API_KEY from {KEY_HELP}; "
            f"until then, {RESULT_GONE}",
            "configuration",
        )
    if reply.status == 429:
        wait = _wait(reply)
        if code == "QUOTA_LIMITED":
            when = f" (it resets in {wait_text(wait)})" if wait is not None else ""
            return SearchFailed(
                f"Brave's search quota for this key is used up{when}; the operator must raise the "
                "plan's limit; until then, read pages you already have or URLs you know",
                "rate_limited",
            )
        return status_error(LABEL, reply, wait)
    if reply.status in (400, 422):
        said = f": {detail}" if detail else ""
        return SearchFailed(
            f"Brave could not accept this query (HTTP {reply.status}{said}); use 2–6 plain words, "
            f"under {BRAVE_MAX_QUERY_CHARS} characters",
            "refused_query",
        )
    return status_error(LABEL, reply)


async def brave(client: httpx.AsyncClient, config: SearchConfig, query: str) -> list[SearchHit]:
    key = api_key(config.brave_api_key, "BRAVE_API_KEY", LABEL, KEY_HELP)
    words = len(query.split())
    if len(query) > BRAVE_MAX_QUERY_CHARS or words > BRAVE_MAX_QUERY_WORDS:
        raise SearchFailed(
            f"the query is too long for Brave ({len(query)} characters, {words} words; at most "
            f"{BRAVE_MAX_QUERY_CHARS} and {BRAVE_MAX_QUERY_WORDS}); use 2–6 plain words",
            "refused_query",
        )
    count = max(1, min(config.results or defaults.SEARCH_RESULTS, BRAVE_MAX_COUNT))
    reply = await call(
        client,
        LABEL,
        "GET",
        config.brave_url,
        config,
        wait_of=_wait,
        params={"q": query, "count": count},
        headers={"X-Subscription-Token": key, "Accept": "application/json"},
    )
    if not 200 <= reply.status < 300:
        raise _failure(reply)
    data = parse_json(reply, LABEL, "is DEEPTHREAD_BRAVE_URL the web search endpoint?")
    if not isinstance(data, dict) or data.get("type") != "search":
        raise SearchFailed(
            "Brave answered in an unexpected shape (no search response); try again in a minute, "
            "or read pages you already have",
            "unavailable",
        )
    web = data.get("web")
    if web is None:
        return []  # Brave leaves out the "web" block when nothing matched
    results = web.get("results") if isinstance(web, dict) else None
    if not isinstance(results, list):
        raise SearchFailed(
            "Brave answered without a web result list; try again in a minute, or read pages you already have",
            "unavailable",
        )
    return hits_from(results, snippet="description", dates=("page_age", "age"))
