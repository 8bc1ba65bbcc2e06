"""read_page(url, goal): fetch a page and return only the cited passages that serve the goal.

Routing: a short page is read in one extraction call; a long page or a PDF is split on its
structure (headings, paragraphs) and its parts are read in parallel, then merged.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from .. import defaults, offload
from ..activity import say
from ..display import domain_of
from ..json_text import json_object_text
from ..model import ModelUnavailable
from ..prompts import load
from ..results import Locator, StoredResult
from .base import Tool, ToolContext, ToolResult
from .extract import Extracted, UnreadableContent, extract_text
from .fetch import FetchError, fetch
from .links import domain, marker, parse_link_id, strip_markers
from .near import start_of

# Unparsable extraction answers are retried this often before giving up on a part.
EXTRACTION_ATTEMPTS = 2
# Up to this much text is read in one call (~12k tokens): most articles fit.
DIRECT_CHARS = 48_000
# Long pages are read in parts of about this size, at most MAX_PARTS of them.
PART_CHARS = 24_000
MAX_PARTS = 8
# Extraction calls in flight for one page; more would only queue at the model.
PARALLEL_PARTS = 4
# Links suggested back to the agent per page.
MAX_LINKS = 5
# Evidence kept with each excerpt: this much page text either side of it.
CONTEXT_CHARS = 300


class ReadPageInput(BaseModel):
    url: str = Field(
        description="A full http(s) URL, or the id of a link from an earlier read_page "
        "result (the 12 in 【12†anchor】)."
    )
    goal: str = Field(
        description="What you need from this page, as a specific question or list of facts "
        "(e.g. 'the 2024 expense ratio of SCHB and the date it took effect')."
    )
    near: str = Field(
        default="",
        description="Optional: a heading or a few words of the page to start reading from, for a long page "
        "whose first parts did not hold what you need (the result of a long page says what to pass). "
        "Leave empty to read from the start.",
    )

    @field_validator("goal")
    @classmethod
    def _goal_given(cls, value: str) -> str:
        if len(value.strip()) < 3:
            raise ValueError("goal is empty: say what you need from the page")
        return value.strip()


class Extraction(BaseModel):
    relevance: str = "partial"
    judgement: str = ""
    excerpts: list[str] = Field(default_factory=list)
    links: list[int] = Field(default_factory=list)

    @field_validator("links", mode="before")
    @classmethod
    def _ids(cls, value: object) -> list[int]:
        ids = []
        for item in value if isinstance(value, list) else []:
            found = parse_link_id(str(item))
            if found is not None:
                ids.append(found)
        return ids


# Compiled here, not inline, so tests/test_linear_patterns.py times them with the rest.
_PARAGRAPH_BREAK = re.compile(r"\n{2,}")
_HTTP_URL = re.compile(r"^https?://", re.I)


def _normalise(text: str) -> str:
    return " ".join(text.split())


def verified_excerpts(candidates: list[str], plain_text: str) -> list[str]:
    """Keep only passages that really are in the page (whitespace- and marker-insensitive)."""
    page = _normalise(plain_text)
    kept: list[str] = []
    for candidate in candidates:
        passage = _normalise(strip_markers(candidate)).strip(" …\"'")
        if len(passage) < 12 or passage in kept:
            continue
        if passage in page:
            kept.append(passage)
        elif passage.rstrip(".") in page:  # a full stop added by the model
            kept.append(passage.rstrip("."))
    return kept[: defaults.MAX_EXCERPTS]


def surrounding(page: str, passage: str, chars: int = CONTEXT_CHARS) -> str:
    """The passage with the page text around it, kept as evidence in case the page changes."""
    at = page.find(passage)
    if at < 0:
        return passage
    start, end = max(0, at - chars), min(len(page), at + len(passage) + chars)
    return ("…" if start else "") + page[start:end] + ("…" if end < len(page) else "")


def parse_extraction(answer: str) -> Extraction:
    found = json_object_text(answer)
    if not found:
        raise ValueError("no JSON object in the answer")
    return Extraction.model_validate(json.loads(found))


def split_parts(text: str, size: int = PART_CHARS) -> list[str]:
    """Split on headings and paragraphs into parts of at most `size` characters."""
    blocks = _PARAGRAPH_BREAK.split(text)
    parts: list[str] = []
    current = ""
    for block in blocks:
        while len(block) > size:  # a giant paragraph: cut at a space
            cut = block.rfind(" ", 0, size) if block.rfind(" ", 0, size) > size // 2 else size
            block_head, block = block[:cut], block[cut:].lstrip()
            if current:
                parts.append(current)
                current = ""
            parts.append(block_head)
        starts_section = block.startswith("#") or block.startswith("[page ")
        if current and (len(current) + len(block) + 2 > size or (starts_section and len(current) > size // 2)):
            parts.append(current)
            current = ""
        current = f"{current}\n\n{block}" if current else block
    if current:
        parts.append(current)
    return parts


class ReadPage(Tool):
    name = "read_page"
    stage = "reading a page"
    Input = ReadPageInput
    description = (
        "Read one web page or PDF and get back only the passages that serve your goal, each "
        "verbatim and prefixed with a citation marker like [s7] that you can cite in the report, "
        "plus up to 5 links worth following, shown as 【12†anchor†domain】: pass 12 as `url` to "
        "read that link next (links a page offers are followed a few at a time: at most 3 from one page you "
        "were given, counting the pages they lead to, and 8 to one site a run; search results and links "
        "people wrote are not limited). Use it after web_search to verify a lead: snippets are leads, "
        "pages are evidence. Not for searching (use web_search), not for re-reading a page with "
        "the same goal, and not for arithmetic (use calculator). Say precisely what you need in "
        "`goal`; a vague goal returns vague passages. Reads HTML, PDF, plain text and JSON; pages "
        "behind logins and binary files cannot be read. Long pages are read in parts (up to "
        "~190,000 characters at a time); past that, the result says what to pass as `near` to read on "
        "from there, and the page's full text is stored under the id the result names (fetch_result)."
    )

    def __init__(self) -> None:
        self._seen: set[tuple[str, str, str]] = set()

    def snapshot(self) -> Any:
        return sorted(self._seen)

    def restore(self, state: Any) -> None:
        # Checkpoints from before `near` saved (url, goal) pairs.
        self._seen = {(item[0], item[1], item[2] if len(item) > 2 else "") for item in state or []}

    def progress(self, args: BaseModel) -> str:
        assert isinstance(args, ReadPageInput)
        target = args.url if parse_link_id(args.url) is None else f"link {args.url}"
        return say("reading", target=domain_of(target) if "://" in target else target, goal=args.goal)

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, ReadPageInput)
        url = self._resolve(args.url, ctx)
        if isinstance(url, ToolResult):
            return url
        key = (url, " ".join(args.goal.lower().split()), " ".join(args.near.lower().split()))
        if key in self._seen:
            return ToolResult(
                "You already read this page with this goal; its passages are in an earlier result. "
                "Read another source, follow one of its links, or ask for something different.",
                is_error=True,
            )
        # Only URLs the run has seen, and page-offered links within their budgets (agent/tools/seen_urls.py).
        admission = await ctx.seen.admit(url, ctx)
        if isinstance(admission, ToolResult):
            return admission
        # Held while the read runs (a parallel duplicate is refused), kept only when it succeeded: a
        # page that timed out or failed for a while may be read again.
        self._seen.add(key)
        try:
            page = await fetch(ctx.http, url, ctx.config.fetch)
            ctx.seen.landed(admission, page.url)
            extracted = await extract_text(page, ctx.links)
        except (FetchError, UnreadableContent) as exc:
            self._seen.discard(key)
            return ToolResult(f"Could not read this page: {exc}.", is_error=True)
        except BaseException:
            self._seen.discard(key)  # cut short (a deadline, a stop): it was never read
            raise
        result = await self._read(ctx, args.goal, page.url, page.truncated, extracted, args.near.strip())
        if result.is_error:
            self._seen.discard(key)
        return result

    def _resolve(self, value: str, ctx: ToolContext) -> str | ToolResult:
        link_id = parse_link_id(value)
        if link_id is not None:
            url = ctx.links.get(link_id)
            if url is None:
                known = f"1–{len(ctx.links.urls)}" if ctx.links.urls else "none yet"
                return ToolResult(
                    f"There is no link {link_id} (link ids issued so far: {known}). "
                    "Pass a full URL or a link id from a read_page result.",
                    is_error=True,
                )
            return url
        value = value.strip()
        if not _HTTP_URL.match(value):
            return ToolResult(
                f"{value!r} is neither a URL nor a link id. Pass a full http(s) URL, or the "
                "number of a 【12†…】 link from a read_page result.",
                is_error=True,
            )
        return value

    async def _read(
        self, ctx: ToolContext, goal: str, url: str, truncated: bool, extracted: Extracted, near: str = ""
    ) -> ToolResult:
        text = extracted.text
        title = extracted.title or domain_of(url)
        page_id = ctx.result_ids.next()
        await ctx.results.put(
            StoredResult(
                id=page_id,
                kind="page",
                arguments={"url": url},
                text=text.plain,
                locator=Locator(what=url, start=0, end=len(text.plain), total=len(text.plain)),
            )
        )
        ctx.seen.page_stored(url, page_id)  # the links it offers are checked against its text
        body, start_note = text.linked, ""
        if near:
            # Off the loop: linear, but a megabyte's words are still a few tens of milliseconds.
            at = await offload.cpu(start_of, text.linked, near)
            if at is None:
                return ToolResult(
                    f"There is no {near!r} on this page. Its headings: {headings(text.linked)}. Pass one of them "
                    "(or a few words that appear on the page) as `near`, or leave `near` empty to read from the start.",
                    is_error=True,
                )
            body, start_note = text.linked[at:], f", from {near!r} (character {at:,})"
        if len(body) <= DIRECT_CHARS:
            parts, route = [body], "direct"
        else:
            all_parts = split_parts(body)
            parts = all_parts[:MAX_PARTS]
            route = f"in {len(parts)} parts read in parallel"
            if len(all_parts) > MAX_PARTS:
                rest = opening_words(all_parts[MAX_PARTS])
                route += (
                    f" (the first {len(parts)} of {len(all_parts)}; read on with near='{rest}', or page through "
                    f"fetch_result('{page_id}'))"
                )
        route += start_note
        try:
            extraction = await self._extract_parts(ctx, goal, parts)
        except ModelUnavailable as exc:
            return ToolResult(f"Could not read this page: {exc}. Try again later or use another source.", is_error=True)
        except ValueError:
            return ToolResult(
                "Could not read this page: the extraction step gave no usable answer twice. "
                "Try another source for the same facts.",
                is_error=True,
            )
        excerpts = verified_excerpts(extraction.excerpts, text.plain)
        kind = {"pdf": "PDF", "html": "page", "text": "text", "json": "JSON"}.get(
            extracted.kind, extracted.kind.upper()
        )
        lines = [
            f"Page: {title} — {domain_of(url)}",
            f"URL: {url}",
            f"Read: {kind}, {len(text.plain):,} characters{', ' + extracted.note if extracted.note else ''}, {route}"
            + (" (download cut at the size cap)" if truncated else ""),
            f"Full text: fetch_result('{page_id}')",
        ]
        if extraction.judgement:
            lines.append(f"Judgement: {extraction.judgement}")
        if excerpts:
            lines.append("Excerpts:")
            page = _normalise(text.plain)
            page_sha256 = hashlib.sha256(text.plain.encode("utf-8")).hexdigest()
            for passage in excerpts:
                source, _new = ctx.registry.add(
                    url, title, passage, kind="excerpt", context=surrounding(page, passage), page_sha256=page_sha256
                )
                lines.append(f'[{source.marker}] "{passage}"')
        else:
            lines.append(
                "Nothing on this page serves the goal. Try a link below, another search result or a different query."
            )
        links = self._links(ctx, extraction.links, set(text.link_ids), url)
        if links:
            lines.append("Links worth following: " + " ".join(links))
        return ToolResult("\n".join(lines))

    def _links(self, ctx: ToolContext, proposed: list[int], on_page: set[int], page_url: str) -> list[str]:
        shown = []
        for link_id in dict.fromkeys(proposed):
            target = ctx.links.get(link_id)
            if link_id in on_page and target:
                shown.append(marker(link_id, _anchor_of(link_id, ctx) or domain(target), target, page_url))
            if len(shown) == MAX_LINKS:
                break
        return shown

    async def _extract_parts(self, ctx: ToolContext, goal: str, parts: list[str]) -> Extraction:
        semaphore = asyncio.Semaphore(PARALLEL_PARTS)

        async def one(part: str, index: int) -> Extraction | None:
            where = f' part="{index + 1} of {len(parts)}"' if len(parts) > 1 else ""
            async with semaphore:
                try:
                    return await self._extract(ctx, goal, part, where)
                except ValueError:
                    return None  # one unreadable part must not sink the others

        results = await asyncio.gather(*(one(part, i) for i, part in enumerate(parts)))
        found = [r for r in results if r is not None]
        if not found:
            raise ValueError("no part could be read")
        if len(found) == 1:
            return found[0]
        relevant = [r for r in found if r.relevance != "none"]
        return Extraction(
            relevance="high" if any(r.relevance == "high" for r in found) else ("partial" if relevant else "none"),
            judgement=" ".join(r.judgement for r in (relevant or found[:1]) if r.judgement),
            excerpts=[e for r in found for e in r.excerpts],
            links=[link for r in found for link in r.links],
        )

    async def _extract(self, ctx: ToolContext, goal: str, text: str, where: str) -> Extraction:
        prompt = f"<goal>{goal}</goal>\n<page{where}>\n{text}\n</page>"
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


# A part's first words offered as the `near` that reads on from it, and the headings listed when a
# `near` is not on the page (agent/tools/near.py finds it).
NEAR_WORDS = 8
HEADINGS_SHOWN = 12


def headings(text: str) -> str:
    found = [line.lstrip("# ").strip() for line in text.splitlines() if line.startswith("#")]
    return "; ".join(found[:HEADINGS_SHOWN]) or "none marked (pass a few words that appear on the page)"


def opening_words(part: str) -> str:
    """The first words of a part, as a `near` that reads on from it (quotes dropped, markers stripped)."""
    words = strip_markers(part).replace("'", " ").replace("#", " ").split()
    return " ".join(words[:NEAR_WORDS])


def _anchor_of(link_id: int, ctx: ToolContext) -> str:
    return ctx.links.anchors.get(link_id, "")
