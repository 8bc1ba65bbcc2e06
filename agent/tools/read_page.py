"""read_page(url, goal): fetch a page and return only the cited passages that serve the goal."""
from __future__ import annotations

import json
import re

from pydantic import BaseModel, Field, ValidationError

from .. import defaults
from ..model import ModelUnavailable
from ..prompts import load
from ..report import domain_of
from .base import Tool, ToolContext, ToolResult
from .extract import UnreadableContent, extract_text
from .fetch import FetchError, fetch

# Unparsable extraction answers are retried this often before giving up on the page.
EXTRACTION_ATTEMPTS = 2


class ReadPageInput(BaseModel):
    url: str = Field(description="Full http(s) URL of the page, usually taken from a web_search result.")
    goal: str = Field(
        description="What you need from this page, as a specific question or list of facts "
        "(e.g. 'the 2024 expense ratio of SCHB and the date it took effect')."
    )


class Extraction(BaseModel):
    relevance: str = "partial"
    judgement: str = ""
    excerpts: list[str] = Field(default_factory=list)


def _normalise(text: str) -> str:
    return " ".join(text.split())


def verified_excerpts(candidates: list[str], page_text: str) -> list[str]:
    """Keep only passages that really are in the page (whitespace-insensitive)."""
    page = _normalise(page_text)
    kept: list[str] = []
    for candidate in candidates:
        passage = _normalise(candidate).strip(" .…\"'")
        if len(passage) < 12 or passage in kept:
            continue
        if passage in page:
            kept.append(passage)
    return kept[: defaults.MAX_EXCERPTS]


def parse_extraction(answer: str) -> Extraction:
    match = re.search(r"\{.*\}", answer, re.S)
    if not match:
        raise ValueError("no JSON object in the answer")
    return Extraction.model_validate(json.loads(match.group(0)))


class ReadPage(Tool):
    name = "read_page"
    Input = ReadPageInput
    description = (
        "Read one web page and get back only the passages that serve your goal, each verbatim "
        "and prefixed with a citation marker like [s7] that you can cite in the report. "
        "Use it after web_search to verify a lead: snippets are leads, pages are evidence. "
        "Not for searching (use web_search) and not for pages you have already read with the "
        "same goal. Say precisely what you need in `goal`; a vague goal returns vague passages. "
        "Handles HTML, plain text and JSON; pages behind logins, PDFs and binary files cannot "
        "be read. Long pages are cut to their first ~48,000 characters, and the result says so."
    )

    def progress(self, args: BaseModel) -> str:
        assert isinstance(args, ReadPageInput)
        return f"Reading {domain_of(args.url)}: {args.goal}"

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, ReadPageInput)
        try:
            page = await fetch(ctx.http, args.url, ctx.config.fetch)
            title, text = await extract_text(page)
        except (FetchError, UnreadableContent) as exc:
            return ToolResult(f"Could not read this page: {exc}.", is_error=True)
        title = title or domain_of(page.url)
        cut = len(text) > defaults.EXTRACT_INPUT_CHARS
        window = text[: defaults.EXTRACT_INPUT_CHARS]
        try:
            extraction = await self._extract(ctx, args.goal, window)
        except ModelUnavailable as exc:
            return ToolResult(f"Could not read this page: {exc}. Try again later or use another source.", is_error=True)
        except ValueError:
            return ToolResult(
                "Could not read this page: the extraction step gave no usable answer twice. "
                "Try another source for the same facts.",
                is_error=True,
            )
        excerpts = verified_excerpts(extraction.excerpts, window)
        header = [
            f"Page: {title} — {domain_of(page.url)}",
            f"URL: {page.url}",
            f"Read: {'first ' + format(len(window), ',') + ' of ' if cut else ''}{len(text):,} characters of text"
            + (" (byte cap reached while downloading)" if page.truncated else ""),
        ]
        if not excerpts:
            judgement = extraction.judgement or "the page does not address the goal"
            return ToolResult(
                "\n".join(header + [f"Nothing on this page serves the goal: {judgement}",
                                    "Try another search result or a different query."])
            )
        lines = header + [f"Judgement: {extraction.judgement}" if extraction.judgement else "", "Excerpts:"]
        for passage in excerpts:
            source, _new = ctx.registry.add(page.url, title, passage, kind="excerpt")
            lines.append(f'[{source.marker}] "{passage}"')
        return ToolResult("\n".join(line for line in lines if line))

    async def _extract(self, ctx: ToolContext, goal: str, text: str) -> Extraction:
        prompt = f"<goal>{goal}</goal>\n<page>\n{text}\n</page>"
        last_error: Exception | None = None
        for _ in range(EXTRACTION_ATTEMPTS):
            answer = await ctx.model.small(
                system=load("read_page"), prompt=prompt, max_tokens=defaults.EXTRACT_MAX_TOKENS
            )
            try:
                return parse_extraction(answer)
            except (ValueError, ValidationError) as exc:
                last_error = exc
        raise ValueError(str(last_error))
