"""What a run may fetch because a page offered it, and how much.

A link a person wrote or a search gave is the run's to read. A link that only a fetched page offered
is the page's choice of what the run may request next, and the model's choice among them is a signal
the page's server receives: a page offering one link per character (`/a`, `/b`, … `/0`) lets a model
it steers spell a figure it read elsewhere, one request at a time. So fetches of page-offered links
are bounded, and told to the model when refused:

- per page: at most PAGE_BUDGET of them follow from one page the run was given (a person's or a
  search's), counting every page reached through offered links from it (a chain of offered pages
  spends its first page's budget, so a page cannot grant itself more by linking to itself);
- per host: at most HOST_BUDGET page-offered fetches go to one host in a run, whichever pages
  offered them.

A repeated fetch of the same link counts again: the order of requests is a signal too.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = ["HOST_BUDGET", "PAGE_BUDGET", "Offer", "OfferedLinks"]

# Page-offered links one given page may lead to (its whole chain): enough to follow a page's
# "next" or "full report" link a few steps; too few to spell a figure of four characters.
PAGE_BUDGET = 3
# Page-offered fetches one host receives in a run, from every page that offered its links.
HOST_BUDGET = 8


def host_of(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


@dataclass(frozen=True)
class Offer:
    """A page-offered fetch that may go ahead: the budget it spends and the page whose text it is
    checked against."""

    root: str  # the given page whose budget it spends
    host: str
    page: str  # the page that offered the link (normalised URL)


class OfferedLinks:
    """Where each fetched page came from (its root: the given page its chain started at) and what the
    run has spent; the pages' stored texts, for the run-text check."""

    def __init__(self) -> None:
        self.roots: dict[str, str] = {}  # fetched page → the given page its chain started at
        self.spent_by_root: Counter[str] = Counter()
        self.spent_by_host: Counter[str] = Counter()
        self.page_results: dict[str, str] = {}  # fetched page → the id its text is stored under

    def root_of(self, page: str) -> str:
        """The given page a page's chain started at ("" for a page whose fetch was not recorded)."""
        return self.roots.get(page, "")

    def choose(self, url: str, pages: list[str]) -> tuple[Offer | None, str]:
        """The offer to charge for fetching `url`, offered by `pages`, or (None, why not): the page
        with the most budget left, so a link offered twice is charged where it can be afforded."""
        host = host_of(url)
        if self.spent_by_host[host] >= HOST_BUDGET:
            return None, "host"
        best = max(pages, key=lambda p: PAGE_BUDGET - self.spent_by_root[self.root_of(p)])
        if self.spent_by_root[self.root_of(best)] >= PAGE_BUDGET:
            return None, "page"
        return Offer(root=self.root_of(best), host=host, page=best), ""

    def spend(self, offer: Offer) -> None:
        self.spent_by_root[offer.root] += 1
        self.spent_by_host[offer.host] += 1

    def landed(self, page: str, root: str) -> None:
        """A fetched page (its final URL) and the root its chain started at (itself, when given)."""
        self.roots.setdefault(page, root)

    def snapshot(self) -> dict[str, Any]:
        return {
            "roots": self.roots,
            "by_root": dict(self.spent_by_root),
            "by_host": dict(self.spent_by_host),
            "page_results": self.page_results,
        }

    def restore(self, state: dict[str, Any] | None) -> None:
        state = state or {}
        self.roots = dict(state.get("roots", {}))
        self.spent_by_root = Counter(state.get("by_root", {}))
        self.spent_by_host = Counter(state.get("by_host", {}))
        self.page_results = dict(state.get("page_results", {}))
