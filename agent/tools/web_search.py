"""web_search(query): leads from the web, each snippet already citable."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from ..report import domain_of
from .base import Tool, ToolContext, ToolResult
from .search_providers import SearchFailed, search

MAX_QUERY_CHARS = 300


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
        "Short, broad queries first (2–6 words), then narrower ones; never repeat a query."
    )

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def state(self) -> Any:
        return self._seen

    def restore(self, state: Any) -> None:
        self._seen = dict(state or {})

    def progress(self, args: BaseModel) -> str:
        assert isinstance(args, WebSearchInput)
        return f"Searching: {args.query}"

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
        try:
            hits = await search(ctx.http, ctx.config.search, args.query)
        except SearchFailed as exc:
            return ToolResult(f"Search failed: {exc}.", is_error=True)
        if not hits:
            return ToolResult(
                f'No results for "{args.query}". Try fewer or more general words, or synonyms.'
            )
        lines = [f'{len(hits)} results for "{args.query}":']
        for i, hit in enumerate(hits, 1):
            snippet = hit.snippet or "(no snippet)"
            source, _ = ctx.registry.add(hit.url, hit.title, snippet, kind="snippet")
            date = f" · {hit.date}" if hit.date else ""
            lines.append(f"{i}. {hit.title} — {domain_of(hit.url)}{date}\n   {hit.url}\n   [{source.marker}] {snippet}")
        return ToolResult("\n".join(lines))
