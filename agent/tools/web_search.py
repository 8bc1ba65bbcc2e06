"""web_search(query): leads from the web, each snippet already citable.

The search itself is a fallback chain (agent/tools/search); this tool turns its answer into
what the model reads, and tells a human once per run when search is degraded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ddgs import DDGS
from pydantic import BaseModel, Field, field_validator

from ..activity import say
from ..display import domain_of
from ..events import SearchDegraded
from .base import Tool, ToolContext, ToolResult
from .search import (
    DDGSFactory,
    SearchAnswer,
    SearchHealth,
    operator_advice,
    providers,
    search,
)

MAX_QUERY_CHARS = 300
# Failures no rephrasing can fix: the result says so, and what the operator can do.
_HOPELESS = ("blocked", "rate_limited")


class WebSearchInput(BaseModel):
    query: str = Field(description="A short query, 2–6 words works best; broaden before you narrow.")

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query is empty: write a few keywords")
        if len(value) > MAX_QUERY_CHARS:
            raise ValueError(f"query is {len(value)} characters; keep it under {MAX_QUERY_CHARS} (2–6 words work best)")
        return value.strip()


class WebSearch(Tool):
    name = "web_search"
    stage = "searching the web"
    Input = WebSearchInput
    description = (
        "Search the web. Returns up to 8 results, each with title, domain, URL and a snippet "
        "prefixed with a citation marker like [s3]. Use it to find candidate sources; then read "
        "the promising ones with read_page, because a snippet is a lead, not evidence for a "
        "specific figure. Not for reading a page you already have a URL for (use read_page). "
        "Short, broad queries first (2–6 words), then narrower ones; never repeat a query. "
        "When the result says search is blocked or rate-limited, do not rephrase: read pages "
        "you already have or URLs you know."
    )

    def __init__(self, ddgs: DDGSFactory = DDGS) -> None:
        self._ddgs = ddgs
        self._providers = providers(ddgs)
        self._seen: dict[str, int] = {}
        self._health = SearchHealth()

    def snapshot(self) -> Any:
        return {"seen": self._seen, "health": self._health.to_state()}

    def restore(self, state: Any) -> None:
        if isinstance(state, dict) and isinstance(state.get("seen"), dict) and isinstance(state.get("health"), dict):
            self._seen = dict(state["seen"])
            self._health.load(state["health"])
        else:
            self._seen = dict(state or {})  # checkpoints from before the chain saved the query counts alone

    def fresh(self) -> WebSearch:
        clone = WebSearch(self._ddgs)
        clone._health = self._health  # one run, one health: a task agent's block is announced once too
        return clone

    def progress(self, args: BaseModel) -> str:
        assert isinstance(args, WebSearchInput)
        return say("searching", query=args.query)

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, WebSearchInput)
        key = " ".join(args.query.lower().split())
        self._seen[key] = self._seen.get(key, 0) + 1
        if self._seen[key] > 1:
            return ToolResult(
                f'You already searched for "{args.query}". Repeating it returns the same results: '
                "try a different angle (other terms, a source type, a narrower or broader query) "
                "or read a result you already have.",
                is_error=True,
            )
        chain = list(ctx.config.search.providers)
        registry = self._providers
        if "anthropic" in chain:  # Anthropic's own search runs through this run's model client (and ledger)
            registry = providers(self._ddgs, ctx.model)
        answer = await search(ctx.http, ctx.config.search, args.query, registry=registry, skip=self._health.dead)
        if not answer.answered:
            self._seen.pop(key, None)  # nothing came back, so asking again later is no repeat
        for notice in self._health.observe(answer, chain):
            await ctx.emit(SearchDegraded(text=notice))
        return self._render(args.query, answer, chain, ctx)

    def _render(self, query: str, answer: SearchAnswer, chain: Sequence[str], ctx: ToolContext) -> ToolResult:
        if not answer.answered:
            return ToolResult(_all_failed(answer, chain), is_error=True)
        earlier = "".join(f" {f.label} could not answer: {f.message}." for f in answer.failures)
        handover = f"\n({earlier.strip()} {answer.label} answered instead.)" if earlier else ""
        if answer.uncertain_empty:
            return ToolResult(
                f'{answer.label} returned nothing for "{query}". It reports "no matches" and "refused" alike, so '
                "this may be a block rather than an empty result: try one broader query; if that finds nothing "
                "too, treat web search as unavailable and read pages you already have or URLs you know with "
                f"read_page ({operator_advice(chain)}).{handover}"
            )
        if not answer.hits:
            return ToolResult(
                f'No results for "{query}" from {answer.label}. Try fewer or more general words, or synonyms.{handover}'
            )
        lines = [f'{len(answer.hits)} results for "{query}" from {answer.label}:']
        for i, hit in enumerate(answer.hits, 1):
            snippet = hit.snippet or "(no snippet)"
            source, _ = ctx.registry.add(hit.url, hit.title, snippet, kind="snippet")
            date = f" · {hit.date}" if hit.date else ""
            lines.append(f"{i}. {hit.title} — {domain_of(hit.url)}{date}\n   {hit.url}\n   [{source.marker}] {snippet}")
        return ToolResult("\n".join(lines) + handover)


def _all_failed(answer: SearchAnswer, chain: Sequence[str]) -> str:
    """No provider answered: what each said, and whether waiting or rephrasing can help."""
    if len(answer.failures) == 1:
        text = f"Search failed: {answer.failures[0].message}."
    else:
        text = "Search failed: no configured provider answered. " + " ".join(
            f"{f.label}: {f.message}." for f in answer.failures
        )
    if any(f.kind in _HOPELESS for f in answer.failures):
        text += (
            " Do not rephrase the query: read pages you already have or URLs you know with read_page. "
            f"Web search is degraded for this run; {operator_advice(chain)}."
        )
    return text
