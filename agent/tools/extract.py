"""Turn fetched bytes into readable text, off the event loop (extraction is CPU work).

HTML, text and JSON are read in a thread; PDFs and Office documents go to the converter's child
process (agent/converter), which reads them under OS limits and a deadline that kills it."""

from __future__ import annotations

import asyncio
import json
from copy import deepcopy
from dataclasses import dataclass
from typing import TypedDict

import trafilatura
from lxml import etree
from lxml.html import HtmlElement
from trafilatura.utils import normalize_unicode
from trafilatura.xml import xmltotxt

from .. import offload
from ..converter import ConversionRefused
from ..converter import convert as convert_document
from ..converter.parsers import HTML_BLOCK_TAGS
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


# Where a page's <title> is looked for: the head, never the whole body.
TITLE_WINDOW_BYTES = 200_000

# What we ask of trafilatura: tables are often the facts sought; comments rarely are.
TRAFILATURA_OPTIONS = TrafilaturaOptions(include_tables=True, include_comments=False)


@dataclass
class Extracted:
    title: str
    text: PageText
    kind: str  # html, pdf, text, json
    note: str = ""  # e.g. "first 300 of 2,415 pages"


def _title_of(html: bytes) -> str:
    # Three finds, not a pattern: `<title[^>]*>(.*?)</title>` retries from every `<title` of a
    # hostile page ("<title>" × 20,000 and no closing tag), quadratic in the window.
    window = html[:TITLE_WINDOW_BYTES].lower()
    start = window.find(b"<title")
    opened = window.find(b">", start) if start >= 0 else -1
    end = window.find(b"</title>", opened) if opened >= 0 else -1
    if end < 0:
        return ""
    import html as html_lib

    return html_lib.unescape(" ".join(_decode(html[opened + 1 : end], None).split()))[:200]


def _plain(text: str) -> PageText:
    return PageText(linked=text, plain=text, link_ids=[])


# Inline elements a link may sit at the edge of: the space after `<strong><a>x</a></strong> is`
# belongs to the <strong>, so it is kept there.
INLINE_TAGS = frozenset(
    "a abbr b bdi bdo cite code del dfn em font i ins kbd label mark q s small span strong sub sup time u var".split()
)
# A printable symbol no page uses (trafilatura keeps it): it holds the whitespace beside a link,
# which trafilatura's linked extraction drops ("Pro</a> with" would read "Prowith").
_SPACE_HOLDER = "\U0001d303"


def _edge_chain(link: HtmlElement, last: bool) -> list[HtmlElement]:
    """The link, and the inline elements it ends (`last`) or starts, innermost first."""
    chain, element = [link], link
    while (parent := element.getparent()) is not None and parent.tag in INLINE_TAGS:
        children = list(parent)
        if (children[-1] if last else children[0]) is not element:
            break
        if (last and element.tail and element.tail.strip()) or (not last and parent.text and parent.text.strip()):
            break
        chain.append(parent)
        element = parent
    return chain


def _wrap_loose_text(tree: HtmlElement) -> None:
    """Text loose after a block element (`…</ul>more words <a>…</a>`) becomes a paragraph of its
    own, with the inline elements of its line: the linked extraction drops such tails, the plain
    one keeps them, and a browser shows them as a block anyway."""
    for element in list(tree.iter(*HTML_BLOCK_TAGS)):
        if element.tag == "br" or not (element.tail and element.tail.strip()) or element.getparent() is None:
            continue
        paragraph = etree.Element("p")
        paragraph.text, element.tail = element.tail, "\n"
        # The inline elements that follow (a link, emphasis) up to the next block are the same line.
        inline = []
        following = element.getnext()
        while following is not None and isinstance(following.tag, str) and following.tag not in HTML_BLOCK_TAGS:
            inline.append(following)
            following = following.getnext()
        element.addnext(paragraph)
        paragraph.extend(inline)


def _hold_spaces_beside_links(tree: HtmlElement) -> None:
    """Mark the whitespace just before and just after every link, so the one linked extraction
    keeps every word apart (the plain extraction would have kept it)."""
    for link in list(tree.iter("a")):
        for element in _edge_chain(link, last=True):
            if element.tail and element.tail[0].isspace():
                element.tail = _SPACE_HOLDER + element.tail
                break
        for element in _edge_chain(link, last=False):
            before = element.getprevious()
            if before is not None:
                if before.tail and before.tail[-1].isspace():
                    before.tail += _SPACE_HOLDER
                    break
                if before.tail and before.tail.strip():
                    break
            elif (parent := element.getparent()) is not None and parent.text and parent.text[-1].isspace():
                parent.text += _SPACE_HOLDER
                break


def release_held_spaces(text: str) -> str:
    """Each holder, with the spaces and tabs around it, as one space.

    Split at the holders, not `[ \t]*HOLDER[ \t]*`, which rescans a run of spaces from each of them.
    """
    parts = text.split(_SPACE_HOLDER)
    if len(parts) == 1:
        return text
    inner = [p.strip(" \t") for p in parts[1:-1]]
    return " ".join([parts[0].rstrip(" \t"), *inner, parts[-1].lstrip(" \t")])


def _release_spaces(tree: etree._Element) -> None:
    for element in tree.iter():
        if element.text and _SPACE_HOLDER in element.text:
            element.text = release_held_spaces(element.text)
        if element.tail and _SPACE_HOLDER in element.tail:
            element.tail = release_held_spaces(element.tail)


# No paragraph ends with an opening bracket: one that does was cut at the link that follows it.
OPENING_BRACKETS = "([{«“‘„"


def _join_cut_paragraphs(body: etree._Element) -> None:
    """Join a paragraph the linked extraction cut just before a link ("…(" | "<link>), …")."""
    for paragraph in list(body.iter("p")):
        following = paragraph.getnext()
        if len(paragraph) or following is None or following.tag != "p":
            continue
        if not (paragraph.text or "").rstrip().endswith(tuple(OPENING_BRACKETS)):
            continue
        if not len(following) or following[0].tag != "ref" or (following.text or "").strip():
            continue
        paragraph.text = (paragraph.text or "").rstrip()
        paragraph.extend(list(following))
        following.getparent().remove(following)


def html_text(body: bytes | str, url: str, links: LinkTable) -> PageText:
    """trafilatura's text of the page with its links marked in it, from one extraction.

    One linked extraction (`include_links=True`, the full extractor with its fallbacks) gives
    both: its tree rendered with the links unwrapped is the plain text (the words a plain
    extraction gives; the whitespace beside links is held for it, see `_hold_spaces_beside_links`),
    and the same tree knows where the links are (page_text places them).
    """
    plain, linked = _extracted(body)
    return page_text(plain, linked, url, links)


def _extracted(body: bytes | str) -> tuple[str, etree._Element]:
    """The page's plain text and its linked tree (trafilatura's one extraction: the CPU-heavy part)."""
    tree = trafilatura.load_html(body)
    if tree is None:
        raise UnreadableContent("no readable article text was found on this page; try another source")
    _separate_blocks(tree)
    _wrap_loose_text(tree)
    _hold_spaces_beside_links(tree)
    # No url here: trafilatura would resolve relative links against the site's root, not this
    # page, and turn "#note" into the home page; page_text resolves the raw hrefs itself.
    document = trafilatura.bare_extraction(tree, include_links=True, output_format="txt", **TRAFILATURA_OPTIONS)
    linked = getattr(document, "body", None)
    if linked is None:
        raise UnreadableContent("no readable article text was found on this page; try another source")
    _release_spaces(linked)
    _join_cut_paragraphs(linked)
    unwrapped = deepcopy(linked)
    etree.strip_tags(unwrapped, "ref")
    plain = normalize_unicode(xmltotxt(unwrapped, include_formatting=False))
    if not plain.strip():
        raise UnreadableContent("no readable article text was found on this page; try another source")
    return plain, linked


def _extracted_portable(body: bytes) -> tuple[str, bytes]:
    """`_extracted` for a process pool: the tree travels back serialized (lxml trees do not pickle)."""
    plain, linked = _extracted(body)
    return plain, etree.tostring(linked, encoding="utf-8")


def _linked_text(plain: str, linked: bytes, url: str, links: LinkTable) -> PageText:
    return page_text(plain, etree.fromstring(linked), url, links)


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
    if kind == "html" and offload.pooled() and not _looks_binary(page.body):
        # In a worker carrying many runs: trafilatura in the pool, the run's link ids here.
        plain, linked = await offload.cpu(_extracted_portable, page.body)
        text = await asyncio.to_thread(_linked_text, plain, linked, page.url, links)
        return Extracted(title=_title_of(page.body), text=text, kind="html")
    return await asyncio.to_thread(_extract_sync, page, links)
