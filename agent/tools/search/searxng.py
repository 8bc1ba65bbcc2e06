"""SearXNG (self-hosted metasearch), through its JSON API: GET /search?q=…&format=json."""

from __future__ import annotations

from typing import Any

import httpx

from ...config import SearchConfig
from .normalise import hits_from, plain
from .outcome import SearchFailed, SearchHit
from .transport import RESULT_GONE, call, parse_json, status_error

__all__ = ["LABEL", "SETTING", "searxng"]

LABEL = "SearXNG"
SETTING = "SEARXNG_URL"  # what an operator sets to add it to the chain
# Engines named in a "they all refused" message, at most this many.
ENGINES_SHOWN = 4
# Reasons SearXNG reports for an engine that refused it (unresponsive_engines), meaning "blocked".
_BLOCK_WORDS = ("captcha", "access denied", "too many requests", "suspended")


def _unresponsive(data: dict[str, Any]) -> list[str]:
    """ "engine (reason)" for each engine SearXNG says did not answer."""
    out = []
    for entry in data.get("unresponsive_engines") or []:
        if isinstance(entry, (list, tuple)) and entry:
            name = plain(entry[0])
            reason = plain(entry[1]) if len(entry) > 1 else ""
            out.append(f"{name} ({reason})" if reason else name)
    return out


async def searxng(client: httpx.AsyncClient, config: SearchConfig, query: str) -> list[SearchHit]:
    if not config.searxng_url:
        raise SearchFailed("SearXNG is selected but SEARXNG_URL is not set; the operator must set it", "configuration")
    url = config.searxng_url.rstrip("/") + "/search"
    reply = await call(client, LABEL, "GET", url, config, params={"q": query, "format": "json"})
    if reply.status == 403:
        # SearXNG answers 403 for an output format its settings.yml does not enable.
        raise SearchFailed(
            "SearXNG refused JSON output (HTTP 403); the operator must add json to search.formats "
            f"in its settings.yml; until then, {RESULT_GONE}",
            "configuration",
        )
    if not 200 <= reply.status < 300:
        raise status_error(LABEL, reply)
    data = parse_json(reply, LABEL, "is its JSON format enabled?")
    results = data.get("results", []) if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise SearchFailed("SearXNG answered without a result list; is its JSON format enabled?", "configuration")
    hits = hits_from(results, snippet="content", dates=("publishedDate",))
    refused = _unresponsive(data)
    if not hits and refused:
        # Nothing came back because its engines refused, not because nothing matched.
        shown = ", ".join(refused[:ENGINES_SHOWN]) + (" …" if len(refused) > ENGINES_SHOWN else "")
        blocked = any(word in entry.lower() for entry in refused for word in _BLOCK_WORDS)
        raise SearchFailed(
            f"SearXNG's engines did not answer ({shown}), so it has no results to give; "
            "the operator should enable other engines in its settings.yml; "
            f"until then, {RESULT_GONE}",
            "blocked" if blocked else "unavailable",
        )
    return hits
