"""The team's own Slack as a search the engine can ask: messages and files the requester can see.

The engine knows nothing about Slack: it searches through this protocol. The Slack version
(`bot/slack/workspace_search.py`) calls Slack's Real-time Search API with the triggering event's
action token, so it finds only what the acting user may see; `MemoryWorkspaceSearch` serves
tests. `private` asks for private channels, group DMs and DMs as well as public channels; the
caller decides whether it may (agent/visibility.py). Every hit says whether it is private, decided
by which kind of conversation the search was asked for, not by the hit's own fields.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from .exceptions import WorkspaceError
from .workspace import ThreadMessage

__all__ = [
    "MemoryWorkspaceSearch",
    "SearchUnavailable",
    "WorkspaceHit",
    "WorkspaceSearch",
]


class WorkspaceHit(BaseModel):
    """One message or file the search found."""

    kind: Literal["message", "file"] = "message"
    channel: str = ""  # conversation id (C…, G…, D…); "" for a file shared nowhere the search names
    ts: str = ""  # the message's ts (messages); when the file was shared (files)
    author: str = ""  # user id
    text: str  # the message text, or the file's title and the text the search matched
    permalink: str  # where a reader opens it in Slack; the citation's link
    title: str = ""  # a file's title
    private: bool = False  # from a private channel, a group DM or a DM
    is_bot: bool = False

    @property
    def time(self) -> datetime | None:
        try:
            return datetime.fromtimestamp(float(self.ts), tz=UTC) if self.ts else None
        except ValueError:
            return None


class SearchUnavailable(WorkspaceError):
    """The search cannot run as configured; `kind` tells the notice apart ("token", "scope", "refused")."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@runtime_checkable
class WorkspaceSearch(Protocol):
    async def search(self, query: str, *, private: bool, limit: int) -> list[WorkspaceHit]:
        """Up to `limit` hits, public channels first; SearchUnavailable when Slack will not search."""
        ...

    async def thread(self, channel: str, ts: str) -> list[ThreadMessage]:
        """The thread a found message belongs to (the message itself when it has none), oldest first."""
        ...


class MemoryWorkspaceSearch:
    """Hits held in memory, for tests: every hit whose text shares a word with the query."""

    def __init__(self, hits: list[WorkspaceHit] | None = None, threads: dict[str, list[ThreadMessage]] | None = None):
        self.hits = list(hits or [])
        self.threads = dict(threads or {})
        self.queries: list[tuple[str, bool]] = []

    async def search(self, query: str, *, private: bool, limit: int) -> list[WorkspaceHit]:
        self.queries.append((query, private))
        words = {w for w in query.lower().split() if len(w) > 2}
        found = [h for h in self.hits if (private or not h.private) and words & set(h.text.lower().split())]
        return found[:limit]

    async def thread(self, channel: str, ts: str) -> list[ThreadMessage]:
        return self.threads.get(f"{channel}:{ts}", [])
