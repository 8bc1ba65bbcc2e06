"""Research tools with realistic result sizes and no network, for long scripted runs.

They keep the real tools' names and result formats (so stubs, markers and citations behave
as in production) but make their text up deterministically.
"""
from __future__ import annotations

import random

from pydantic import BaseModel

from agent.tools import Calculator, FetchResult
from agent.tools.base import Tool, ToolContext, ToolResult
from agent.tools.read_page import ReadPageInput
from agent.tools.report_tools import ReviseSection, WriteSection
from agent.tools.web_search import WebSearchInput

DOMAINS = ["vanguard.com", "schwab.com", "ishares.com", "morningstar.com", "sec.gov", "ft.com", "reuters.com"]
WORDS = ("fund index expense ratio tracking difference error holdings market total return benchmark "
         "quarter annual report fee basis points liquidity spread assets billion").split()


def _sentence(rng: random.Random, k: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(12, 22))]
    return f"{' '.join(words).capitalize()} {k}.{rng.randint(0, 99):02d}% in {rng.randint(2015, 2025)}."


class BulkSearch(Tool):
    name = "web_search"
    Input = WebSearchInput
    description = "Search (scripted for tests)."

    def __init__(self, snippet_sentences: int = 5, results: int = 8) -> None:
        self.snippet_sentences = snippet_sentences
        self.results = results

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, WebSearchInput)
        rng = random.Random(args.query)
        lines = [f'{self.results} results for "{args.query}":']
        for i in range(1, self.results + 1):
            domain = rng.choice(DOMAINS)
            url = f"https://{domain}/{args.query.replace(' ', '-')}/{i}"
            snippet = " ".join(_sentence(rng, i) for _ in range(self.snippet_sentences))
            source, _ = ctx.registry.add(url, f"{domain} page {i}", snippet, kind="snippet")
            lines.append(f"{i}. {domain} page {i} — {domain}\n   {url}\n   [{source.marker}] {snippet}")
        return ToolResult("\n".join(lines))


class BulkRead(Tool):
    name = "read_page"
    Input = ReadPageInput
    description = "Read a page (scripted for tests)."

    def __init__(self, excerpts: int = 16, sentences: int = 5) -> None:
        self.excerpts = excerpts
        self.sentences = sentences

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, ReadPageInput)
        rng = random.Random(args.url + args.goal)
        domain = args.url.split("/")[2] if "://" in args.url else "example.org"
        lines = [f"Page: {domain} article — {domain}", f"URL: {args.url}",
                 "Read: page, 40,000 characters, direct", f"Judgement: covers {args.goal}", "Excerpts:"]
        for i in range(self.excerpts):
            passage = " ".join(_sentence(rng, i) for _ in range(self.sentences))
            source, _ = ctx.registry.add(args.url, f"{domain} article", passage)
            lines.append(f'[{source.marker}] "{passage}"')
        return ToolResult("\n".join(lines))


def bulk_tools() -> list[Tool]:
    """The long-run tool set: bulky fake search and reading, with the real report and arithmetic tools."""
    return [BulkSearch(), BulkRead(), Calculator(), FetchResult(), WriteSection(), ReviseSection()]
