"""Turn fetched bytes into readable text, off the event loop (extraction is CPU work).

HTML, text and JSON are read in a thread; PDFs and Office documents go to the converter's child
process (agent/converter), which reads them under OS limits and a deadline that kills it."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import TypedDict

import trafilatura

from ..converter import ConversionRefused
from ..converter import convert as convert_document
from ..converter.parsers import decode as _decode
from ..converter.parsers import looks_binary as _looks_binary
from ..converter.parsers import separate_blocks as _separate_blocks
from ..exceptions import UnreadableContent
from .fetch import Fetched
from .links import LinkTable
from .page_text import PageText, page_text

TEXT_TYPES = ("text/plain", "text/markdown", "text/csv")
HTML_TYPES = ("text/html", "application/xhtml+xml")
JSON_TYPES = ("application/json",)
PDF_TYPES = ("application/pdf", "application/x-pdf")
OFFICE_TYPES = {
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
}
# Kinds read by the converter, and how a refusal names them.
DOCUMENT_KINDS = {"pdf": "PDF", "docx": "Word document", "xlsx": "spreadsheet", "pptx": "presentation"}


class TrafilaturaOptions(TypedDict):
    include_tables: bool
    include_comments: bool


# What we ask of trafilatura: tables are often the facts sought; comments rarely are.
TRAFILATURA_OPTIONS = TrafilaturaOptions(include_tables=True, include_comments=False)


@dataclass
class Extracted:
    title: str
    text: PageText
    kind: str  # html, pdf, text, json
    note: str = ""  # e.g. "first 300 of 2,415 pages"


def _title_of(html: bytes) -> str:
    match = re.search(rb"<title[^>]*>(.*?)</title>", html[:200_000], re.IGNORECASE | re.DOTALL)
    if not match:
        return ""
    import html as html_lib

    return html_lib.unescape(" ".join(_decode(match.group(1), None).split()))[:200]


def _plain(text: str) -> PageText:
    return PageText(linked=text, plain=text, link_ids=[])


def html_text(body: bytes | str, url: str, links: LinkTable) -> PageText:
    """trafilatura's plain text of the page, with the links of its linked extraction marked in it.

    Two extractions from one parse: the plain text keeps every word, the linked tree knows the
    links (see page_text for why neither alone will do).
    """
    tree = trafilatura.load_html(body)
    if tree is not None:
        _separate_blocks(tree)
    plain = trafilatura.extract(tree, url=url, **TRAFILATURA_OPTIONS) if tree is not None else None
    if not plain or not plain.strip():
        raise UnreadableContent("no readable article text was found on this page; try another source")
    # No url here: trafilatura would resolve relative links against the site's root, not this
    # page, and turn "#note" into the home page; page_text resolves the raw hrefs itself.
    # fast=True skips the fallback extractors: this pass only locates links (a third of its time;
    # the same 500 links placed on the fixture pages), the words come from the pass above.
    linked = trafilatura.bare_extraction(
        tree, include_links=True, output_format="txt", fast=True, **TRAFILATURA_OPTIONS
    )
    return page_text(plain, getattr(linked, "body", None), url, links)


def _sniff(page: Fetched) -> str:
    media = page.content_type
    head = page.body[:1024].lstrip()
    if media in PDF_TYPES or head.startswith(b"%PDF-"):
        return "pdf"
    if media in OFFICE_TYPES:
        return OFFICE_TYPES[media]
    if media in HTML_TYPES or (
        media in ("", "application/octet-stream", "text/plain")
        and head[:15].lower().startswith((b"<!doctype html", b"<html"))
    ):
        return "html"
    if media in JSON_TYPES or media.endswith("+json"):
        return "json"
    if media in TEXT_TYPES or media.startswith("text/"):
        return "text"
    return "other"


async def _document(page: Fetched, kind: str) -> Extracted:
    """A PDF or an Office document, converted in the converter's child process."""
    try:
        converted = await convert_document(kind, page.body)
    except ConversionRefused as exc:
        raise UnreadableContent(
            f"this {DOCUMENT_KINDS[kind]} was not read: {exc}; look for an HTML version or another source"
        ) from None
    if not converted.text.strip():
        raise UnreadableContent(f"this {DOCUMENT_KINDS[kind]} has no text to read; look for an HTML version")
    return Extracted(title=converted.title, text=_plain(converted.text), kind=kind, note=converted.note)


def _extract_sync(page: Fetched, links: LinkTable) -> Extracted:
    kind = _sniff(page)
    if kind in ("html", "text", "json") and _looks_binary(page.body):
        raise UnreadableContent("this URL serves binary data, not a readable page; try another source")
    if kind == "html":
        return Extracted(title=_title_of(page.body), text=html_text(page.body, page.url, links), kind="html")
    if kind == "json":
        raw = _decode(page.body, page.charset)
        try:
            raw = json.dumps(json.loads(raw), indent=1, ensure_ascii=False)
        except ValueError:
            pass
        return Extracted(title="", text=_plain(raw), kind="json")
    if kind == "text":
        return Extracted(title="", text=_plain(_decode(page.body, page.charset)), kind="text")
    raise UnreadableContent(
        f"this URL serves {page.content_type or 'an unknown kind of content'}, not a readable page; try another source"
    )


async def extract_text(page: Fetched, links: LinkTable) -> Extracted:
    kind = _sniff(page)
    if kind in DOCUMENT_KINDS:
        return await _document(page, kind)
    return await asyncio.to_thread(_extract_sync, page, links)
