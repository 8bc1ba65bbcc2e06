"""How things are shown to a reader: text cut to a length, a URL by its domain. One rule each,
shared by the report, stubs, task boards, link markers and the bot."""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["domain_of", "shorten"]


def shorten(text: str, limit: int) -> str:
    """Whitespace collapsed; cut with an ellipsis when longer than `limit`."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def domain_of(url: str) -> str:
    """The host a reader recognises; a URL without one (`mailto:`) or malformed (`https://[x`) is
    shown as written, never a crash."""
    try:
        host = urlsplit(url).hostname or url
    except ValueError:
        return url
    return host.removeprefix("www.")
