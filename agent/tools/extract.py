"""Turn fetched bytes into readable text, off the event loop (extraction is CPU work)."""
from __future__ import annotations

import asyncio
import json
import re

import trafilatura

from .fetch import Fetched

TEXT_TYPES = ("text/plain", "text/markdown", "text/csv")
HTML_TYPES = ("text/html", "application/xhtml+xml", "")
JSON_TYPES = ("application/json",)


class UnreadableContent(Exception):
    """The resource is of a kind we cannot read; the message says what to do."""


def _decode(body: bytes, charset: str | None) -> str:
    # Declared charsets are often wrong (a fixture page claims ISO-8859-1 but is UTF-8):
    # try UTF-8 first, which rarely decodes non-UTF-8 text by accident.
    for encoding in ("utf-8", charset or "utf-8", "cp1252"):
        try:
            return body.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            continue
    return body.decode("utf-8", errors="replace")


def _title_of(html: bytes) -> str:
    match = re.search(rb"<title[^>]*>(.*?)</title>", html[:200_000], re.I | re.S)
    if not match:
        return ""
    return " ".join(_decode(match.group(1), None).split())[:200]


def _extract_sync(page: Fetched) -> tuple[str, str]:
    media = page.content_type
    if media in HTML_TYPES or media.endswith("+xml") and "html" in media:
        text = trafilatura.extract(page.body, include_comments=False, include_tables=True)
        if not text:
            raise UnreadableContent("no readable article text was found on this page; try another source")
        return _title_of(page.body), text
    if media in TEXT_TYPES or media.startswith("text/"):
        return "", _decode(page.body, page.charset)
    if media in JSON_TYPES or media.endswith("+json"):
        raw = _decode(page.body, page.charset)
        try:
            return "", json.dumps(json.loads(raw), indent=1, ensure_ascii=False)
        except ValueError:
            return "", raw
    if media == "application/pdf":
        raise UnreadableContent("PDF reading is not available yet; search for an HTML version of this document")
    raise UnreadableContent(f"this URL serves {media or 'unknown content'}, not a readable page; try another source")


async def extract_text(page: Fetched) -> tuple[str, str]:
    """(title, text) of a fetched page."""
    return await asyncio.to_thread(_extract_sync, page)
