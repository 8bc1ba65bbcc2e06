"""Opt-in: the default search chain against the real web (DEEPTHREAD_LIVE=1).

Everything else runs against fakes; this is the one check that DuckDuckGo, through ddgs,
still answers a plain query from this machine. Skipped, with the reason, when not asked for
or when there is no network.
"""
from __future__ import annotations

import os
import socket

import httpx
import pytest

from agent import SearchConfig
from agent.tools.search import search

LIVE = os.environ.get("DEEPTHREAD_LIVE") == "1"
# Where a network check connects before the test spends a real search.
PROBE = ("html.duckduckgo.com", 443)
PROBE_SECONDS = 5.0

pytestmark = pytest.mark.skipif(not LIVE, reason="live search is opt-in: set DEEPTHREAD_LIVE=1 to search the real web")


def _no_network() -> str | None:
    try:
        socket.create_connection(PROBE, timeout=PROBE_SECONDS).close()
    except OSError as exc:
        return f"no network: cannot reach {PROBE[0]}:{PROBE[1]} ({type(exc).__name__}: {exc})"
    return None


async def test_the_default_chain_finds_real_results_for_a_plain_query() -> None:
    reason = _no_network()
    if reason:
        pytest.skip(reason)
    config = SearchConfig()  # the default chain, as a fresh install has it

    async with httpx.AsyncClient() as http:
        answer = await search(http, config, "Vanguard Total Stock Market ETF expense ratio")

    # A block or rate limit fails here with its reason, never as an empty pass.
    assert answer.answered, [f"{f.label}: {f.message}" for f in answer.failures]
    assert answer.hits, f"{answer.label} returned nothing (ddgs cannot tell a refusal from an empty answer)"
    assert all(hit.url.startswith(("http://", "https://")) and hit.title for hit in answer.hits)
