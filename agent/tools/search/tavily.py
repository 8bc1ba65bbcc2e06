"""Tavily Search API: POST JSON with a Bearer key (docs.tavily.com, search endpoint reference)."""

from __future__ import annotations

import httpx

from ... import defaults
from ...config import SearchConfig
from .normalise import hits_from, plain
from .outcome import SearchFailed, SearchHit
from .transport import RESULT_GONE, Reply, api_key, call, parse_json, status_error

__all__ = ["KEY_HELP", "LABEL", "SETTING", "tavily"]

LABEL = "Tavily"
SETTING = "TAVILY_API_KEY"  # what an operator sets to add it to the chain
TAVILY_MAX_RESULTS = 20
TAVILY_SEARCH_DEPTH = "basic"  # 1 credit; "advanced" costs 2 and is slower
KEY_HELP = "https://app.tavily.com (API Keys, tvly-…)"
# Provider-side text quoted in an error (a validation detail), kept short.
DETAIL_MAX_CHARS = 160


def _detail(reply: Reply) -> str:
    """The message from {"detail": {"error": "..."}} (or a validation list), if any."""
    try:
        data = reply.json()
    except ValueError:
        return plain(reply.body[: DETAIL_MAX_CHARS * 2].decode("utf-8", "replace"), DETAIL_MAX_CHARS)
    detail = data.get("detail") if isinstance(data, dict) else None
    if isinstance(detail, dict):
        return plain(detail.get("error"), DETAIL_MAX_CHARS)
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        return plain(detail[0].get("msg"), DETAIL_MAX_CHARS)
    return plain(detail, DETAIL_MAX_CHARS)


def _failure(reply: Reply) -> SearchFailed:
    status = reply.status
    if status in (401, 403):
        return SearchFailed(
            f"Tavily rejected the API key (HTTP {status}); the operator must set a valid "
            f"TAVILY_API_KEY from {KEY_HELP}; until then, {RESULT_GONE}",
            "configuration",
        )
    if status in (432, 433):
        limit = "plan's usage limit" if status == 432 else "pay-as-you-go limit"
        return SearchFailed(
            f"Tavily refused the search: this key's {limit} is reached (HTTP {status}); the operator "
            "must raise it in the Tavily dashboard; until then, read pages you already have "
            "or URLs you know",
            "rate_limited",
        )
    if status in (400, 422):
        detail = _detail(reply)
        said = f": {detail}" if detail else ""
        return SearchFailed(
            f"Tavily could not accept this query (HTTP {status}{said}); use 2–6 plain words", "refused_query"
        )
    return status_error(LABEL, reply)


async def tavily(client: httpx.AsyncClient, config: SearchConfig, query: str) -> list[SearchHit]:
    key = api_key(config.tavily_api_key, "TAVILY_API_KEY", LABEL, KEY_HELP)
    body = {
        "query": query,
        "max_results": max(1, min(config.results or defaults.SEARCH_RESULTS, TAVILY_MAX_RESULTS)),
        "search_depth": TAVILY_SEARCH_DEPTH,
        "include_answer": False,
        "include_raw_content": False,
        "include_images": False,
    }
    reply = await call(
        client,
        LABEL,
        "POST",
        config.tavily_url,
        config,
        json=body,
        headers={"Authorization": f"Bearer {key}", "Accept": "application/json"},
    )
    if not 200 <= reply.status < 300:
        raise _failure(reply)
    data = parse_json(reply, LABEL, "is DEEPTHREAD_TAVILY_URL the search endpoint?")
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise SearchFailed(
            "Tavily answered without a result list; try again in a minute, or read pages you already have",
            "unavailable",
        )
    return hits_from(results, snippet="content", dates=("published_date",))
