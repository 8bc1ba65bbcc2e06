"""One normaliser for every provider: result dicts in, plain-text SearchHits out.

Providers differ only in which keys hold the URL, the snippet and the date; what a hit looks
like (no markup, unescaped entities, a bounded snippet, an ISO date, web URLs only, each
once) is decided here, once.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

from .outcome import SearchHit

__all__ = ["SNIPPET_MAX_CHARS", "hits_from", "plain"]

# A snippet is a lead, not evidence: enough to judge a result, small enough for many of them.
SNIPPET_MAX_CHARS = 500
# A date we cannot parse is kept as the provider wrote it ("3 days ago"), this short.
RAW_DATE_MAX_CHARS = 40

_TAG = re.compile(r"</?[A-Za-z][^<>]*>")


def plain(value: object, limit: int | None = None) -> str:
    """Text without markup: tags like <strong> dropped, entities unescaped, spaces collapsed."""
    if not isinstance(value, str):
        return ""
    text = " ".join(html.unescape(_TAG.sub("", value)).split())
    if limit is not None and len(text) > limit:
        cut = text.rfind(" ", 0, limit)
        text = text[: cut if cut > limit // 2 else limit].rstrip(" ,;:") + "…"
    return text


def _date(value: object) -> str | None:
    """An ISO date (YYYY-MM-DD) from ISO or RFC 1123 timestamps; other text is kept as given."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        return datetime.fromisoformat(text).date().isoformat()  # 3.11 reads a trailing "Z" itself
    except ValueError:
        pass
    try:
        return parsedate_to_datetime(text).date().isoformat()
    except (TypeError, ValueError, IndexError):
        pass
    return plain(text, RAW_DATE_MAX_CHARS) or None


def hits_from(
    results: Iterable[Any], *, url: str = "url", title: str = "title", snippet: str, dates: tuple[str, ...] = ()
) -> list[SearchHit]:
    """Provider result dicts → SearchHits: web URLs only (http/https), each once, in the provider's order.

    Entries that are not dicts or lack a URL string are skipped, never fatal.
    """
    seen: set[str] = set()
    hits = []
    for r in results:
        if not isinstance(r, dict):
            continue
        link = r.get(url)
        if not isinstance(link, str):
            continue
        link = link.strip()
        if not link.startswith(("http://", "https://")) or link in seen:
            continue
        seen.add(link)
        hits.append(
            SearchHit(
                title=plain(r.get(title)) or link,
                url=link,
                snippet=plain(r.get(snippet), SNIPPET_MAX_CHARS),
                date=next((d for d in (_date(r.get(key)) for key in dates) if d), None),
            )
        )
    return hits
