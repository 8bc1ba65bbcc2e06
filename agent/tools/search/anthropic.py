"""Anthropic's own web search (the `web_search_20260209` server tool) as a provider of the chain.

Our `web_search` stays the tool the research model calls; this provider answers it with one
small-model request that carries the server tool (`max_uses`, allowed or blocked domains), so
Anthropic runs the search on the real web with only the model key. The response's
`web_search_tool_result` blocks become our hits (title, URL, page age; the encrypted content is
left alone, it is for the API only), and the sentences the small model quotes from each result,
which the API marks with `web_search_result_location` citations, become the snippets. A result
the model quoted nothing from keeps an empty snippet. The request's tokens and the per-search
price reach the run's ledger through the model client, like any extraction call.

The model client is handed in (`AnthropicSearch(model)`): this package stays free of the loop.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import httpx
from anthropic.types import Message

from ... import defaults
from ...config import SearchConfig
from ...exceptions import ModelUnavailable
from ...model_capabilities import WEB_SEARCH, WEB_SEARCH_BASIC, Capabilities
from ...prompts import load
from .normalise import SNIPPET_MAX_CHARS, hits_from
from .outcome import FailureKind, SearchFailed, SearchHit

__all__ = ["LABEL", "SETTING", "AnthropicSearch", "ServerSearchModel", "server_tool"]

LABEL = "Anthropic web search"
SETTING = "ANTHROPIC_API_KEY"  # nothing more than the model key
# The tool types we can send, best first (PLATFORM-NOTES "Anthropic server tools").
TOOL_TYPES = (WEB_SEARCH, WEB_SEARCH_BASIC)

# What each error code of a web_search_tool_result means for the chain, and what to do now.
ERRORS: dict[str, tuple[FailureKind, str]] = {
    "too_many_requests": (
        "rate_limited",
        "Anthropic's web search is rate-limiting this key (too_many_requests); read pages you already have, "
        "then search again in a minute",
    ),
    "max_uses_exceeded": (
        "unavailable",
        "Anthropic's web search stopped at its per-request search limit (max_uses_exceeded) before any result "
        "came back; search again with a plainer query",
    ),
    "query_too_long": ("refused_query", "the query is too long for Anthropic's web search; use 2–6 plain words"),
    "invalid_tool_input": (
        "refused_query",
        "Anthropic's web search could not accept this query (invalid_tool_input); use 2–6 plain words",
    ),
    "request_too_large": ("refused_query", "the search request was too large; use a shorter query"),
    "unavailable": (
        "unavailable",
        "Anthropic's web search is unavailable right now; read pages you already have, or search again later",
    ),
}


class ServerSearchModel(Protocol):
    """The part of agent.model.ModelClient this provider uses."""

    small_model: str
    small_caps: Capabilities

    async def server_search(self, *, system: str, prompt: str, tool: dict[str, Any], max_tokens: int) -> Message: ...


def server_tool(caps: Capabilities, config: SearchConfig) -> dict[str, Any] | None:
    """The web search tool the small model may run, or None when the table says it has none."""
    kind = next((t for t in TOOL_TYPES if t in caps.server_tools), None)
    if kind is None:
        return None
    tool: dict[str, Any] = {"type": kind, "name": "web_search", "max_uses": config.anthropic_max_uses}
    # The API takes one of the two lists, never both (the allow-list wins: it is the narrower).
    if config.anthropic_allowed_domains:
        tool["allowed_domains"] = list(config.anthropic_allowed_domains)
    elif config.anthropic_blocked_domains:
        tool["blocked_domains"] = list(config.anthropic_blocked_domains)
    return tool


class AnthropicSearch:
    """A ProviderCall bound to one run's model client."""

    label = LABEL

    def __init__(self, model: ServerSearchModel) -> None:
        self.model = model

    async def __call__(self, client: httpx.AsyncClient, config: SearchConfig, query: str) -> list[SearchHit]:
        tool = server_tool(self.model.small_caps, config)
        if tool is None:
            raise SearchFailed(
                f"the small model {self.model.small_model} cannot run Anthropic's web search here (the capability "
                "table lists no web search tool for it on this provider); the operator can put another provider "
                "first in DEEPTHREAD_SEARCH, or use a model that has it",
                "configuration",
            )
        prompt = f"<query>{query}</query>\nResults wanted: {config.results or defaults.SEARCH_RESULTS}"
        try:
            message = await asyncio.wait_for(
                self.model.server_search(
                    system=load("server_search"),
                    prompt=prompt,
                    tool=tool,
                    max_tokens=defaults.SERVER_SEARCH_MAX_TOKENS,
                ),
                defaults.SERVER_SEARCH_TIMEOUT_SECONDS,
            )
        except TimeoutError as exc:
            raise SearchFailed(
                f"Anthropic's web search did not answer within {defaults.SERVER_SEARCH_TIMEOUT_SECONDS:.0f} s; "
                "search again once, then read pages you already have",
                "timeout",
            ) from exc
        except ModelUnavailable as exc:
            raise SearchFailed(
                f"Anthropic's web search could not be used ({exc}); read pages you already have", "unavailable"
            ) from exc
        return hits_of(message)


def hits_of(message: Message) -> list[SearchHit]:
    """web_search_tool_result blocks → hits, in the order the API returned them; the quotes the
    model's citations carry for a URL become its snippet. Only errors and no results: SearchFailed."""
    results: list[dict[str, Any]] = []
    quotes: dict[str, list[str]] = {}
    errors: list[str] = []
    for block in message.content:
        if block.type == "web_search_tool_result":
            content = block.content
            if isinstance(content, list):
                results += [{"url": r.url, "title": r.title, "page_age": r.page_age} for r in content]
            else:
                errors.append(content.error_code)
        elif block.type == "text":
            for citation in block.citations or []:
                if citation.type == "web_search_result_location" and citation.cited_text:
                    quotes.setdefault(citation.url, []).append(" ".join(citation.cited_text.split()))
    if not results and errors:
        kind, text = ERRORS.get(errors[0], ("unavailable", f"Anthropic's web search failed ({errors[0]})"))
        raise SearchFailed(text, kind)
    for result in results:
        said = list(dict.fromkeys(quotes.get(result["url"], [])))
        result["snippet"] = " … ".join(said)[: SNIPPET_MAX_CHARS * 2]
    return hits_from(results, snippet="snippet", dates=("page_age",))
