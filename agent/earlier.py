"""What the team already knows: its earlier reports, as a search the engine can ask.

The engine knows nothing of Slack or Redis: it asks through this protocol. The Slack version
(bot/desk/earlier.py) searches the team's library (jobs/records/library.py) and keeps only the
reports that everyone who can read this run's thread may read too, decided in code before the
engine sees a word of them. `MemoryEarlierResearch` serves tests.

A run asks once before it researches (run.py): what it finds is its first tool result
(`earlier_research`, agent/tools/earlier_research.py), the report's opening names it, and the
agent may search again with other words. An earlier report's sources are leads: they become
fetchable (seen, agent/tools/seen_urls.py), never citable, until read_page reads them again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field

__all__ = ["EarlierReport", "EarlierResearch", "EarlierSource", "MemoryEarlierResearch"]


class EarlierSource(BaseModel):
    url: str
    title: str = ""


class EarlierReport(BaseModel):
    """An earlier report of the team, as a run is shown it (never its whole text)."""

    run_id: str
    title: str
    date: datetime
    permalink: str = ""
    summary: str = ""
    headings: list[str] = Field(default_factory=list)
    sources: list[EarlierSource] = Field(default_factory=list)


@runtime_checkable
class EarlierResearch(Protocol):
    async def search(self, query: str, *, limit: int) -> list[EarlierReport]:
        """The team's reports best matching `query` that this run's readers may all read, best first."""
        ...


class MemoryEarlierResearch:
    """Reports held in memory, matched by any shared word (tests)."""

    def __init__(self, reports: Sequence[EarlierReport] = ()) -> None:
        self.reports = list(reports)
        self.queries: list[str] = []

    async def search(self, query: str, *, limit: int) -> list[EarlierReport]:
        self.queries.append(query)
        words = {w.lower() for w in query.split()}
        found = [r for r in self.reports if words & {w.lower() for w in f"{r.title} {r.summary}".split()}]
        return found[:limit]
