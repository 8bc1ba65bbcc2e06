"""Compact link markers: a page's links become 【12†anchor†domain】 so the agent can follow
one by id (read_page(url="12")) without full URLs bloating the context."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from ..display import domain_of

# 【12†anchor】 for a link on the same site, 【12†anchor†domain】 for another site.
LINK_MARKER_RE = re.compile(r"【(\d+)†([^†】]*)(?:†[^】]*)?】")
# Possessive: the optional parts between runs of whitespace would otherwise try every split of a run.
LINK_ID_RE = re.compile(r"^\s*+【?+\s*+L?+(\d++)\s*+(?:†[^】]*+)?+】?+\s*+$")
ANCHOR_CHARS = 60  # anchor text kept in a link list's marker; enough to judge where it leads
# A link offered by many pages keeps this many of them (to charge whichever has budget left).
OFFERS_KEPT = 8
# The page a link restored from an old checkpoint was offered by: not known, so not the request.
UNKNOWN_PAGE = "about:unknown-page"


def domain(url: str) -> str:
    """A link's domain for its marker; "" when it has none (`mailto:`, malformed), so none is shown."""
    shown = domain_of(url)
    return "" if shown == url else shown


@dataclass
class LinkTable:
    """Run-wide link ids: the same URL keeps its id across pages. A link found on a page remembers
    the pages that offered it (agent/tools/offered_links.py bounds what follows from them); a link of
    the request has none."""

    urls: list[str] = field(default_factory=list)
    anchors: dict[int, str] = field(default_factory=dict)  # the first anchor text seen per link
    offered_by: dict[int, list[str]] = field(default_factory=dict)  # link id → pages that offered it
    _ids: dict[str, int] = field(default_factory=dict)
    # Pages are extracted in worker threads, several at once.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, url: str, anchor: str = "", page: str = "") -> int:
        """The link's id; `page` is the URL of the page that offered it ("" for the request's links)."""
        with self._lock:
            if url not in self._ids:
                self.urls.append(url)
                self._ids[url] = len(self.urls)
                self.anchors[len(self.urls)] = " ".join(anchor.split())[:ANCHOR_CHARS]
            link_id = self._ids[url]
            pages = self.offered_by.setdefault(link_id, [])
            if page and page not in pages and len(pages) < OFFERS_KEPT:
                pages.append(page)
            return link_id

    def get(self, link_id: int) -> str | None:
        return self.urls[link_id - 1] if 1 <= link_id <= len(self.urls) else None

    def given(self) -> list[str]:
        """The links no page offered: the request's own (agent/opening.py lists them)."""
        return [url for link_id, url in enumerate(self.urls, 1) if not self.offered_by.get(link_id)]

    def offering_pages(self, url: str) -> list[str]:
        """The pages that offered `url` as a link (none for a link of the request, or an unknown URL)."""
        link_id = self._ids.get(url)
        return list(self.offered_by.get(link_id, [])) if link_id is not None else []

    def snapshot(self) -> dict[str, Any]:
        return {"urls": self.urls, "anchors": self.anchors, "offered_by": self.offered_by}

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Ids as they were: a link id the model saw before a crash still leads to the same URL."""
        for url in snapshot["urls"]:
            self.add(url)
        # JSON turned the ids into strings.
        self.anchors = {int(k): v for k, v in snapshot["anchors"].items()}
        # A checkpoint written before links kept their pages: each link counts as offered by an
        # unknown page (its budget is shared), never as given.
        unknown = {str(i): [UNKNOWN_PAGE] for i in range(1, len(self.urls) + 1)}
        self.offered_by = {int(k): list(v) for k, v in snapshot.get("offered_by", unknown).items()}


def resolve_href(href: str, page_url: str) -> str | None:
    """An absolute http(s) URL for a link, or None for anchors, scripts and mail links."""
    href = href.strip()
    if not href or href.startswith("#"):
        return None
    absolute = urljoin(page_url, href)
    parts = urlsplit(absolute)
    if parts.scheme not in ("http", "https"):
        return None
    return urlunsplit(parts._replace(fragment=""))


def marker_ends(link_id: int, url: str, page_url: str) -> tuple[str, str]:
    """What goes before and after a link's label: 【12† and †domain】 (or 】 on the same site)."""
    target = domain(url)
    return f"【{link_id}†", (f"†{target}】" if target and target != domain(page_url) else "】")


def marker(link_id: int, anchor: str, url: str, page_url: str) -> str:
    """A marker with a short label, for link lists; in page text the label stays whole."""
    anchor = " ".join(anchor.replace("†", " ").replace("】", " ").split())[:ANCHOR_CHARS] or "link"
    head, tail = marker_ends(link_id, url, page_url)
    return f"{head}{anchor}{tail}"


def strip_markers(text: str) -> str:
    """The plain reading of linked text: each marker becomes its anchor text."""
    return LINK_MARKER_RE.sub(lambda m: m.group(2), text)


def parse_link_id(value: str) -> int | None:
    match = LINK_ID_RE.match(value)
    return int(match.group(1)) if match else None
