"""The result store: every tool result, and every page read, under its own id with a locator.

Results live outside the prompt; the model gets them back by id with fetch_result. Memory in
the terminal mode and tests; a worker keeps them in Redis (jobs.records.stores.RedisResultStore).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel, Field

from .events import utcnow


class Locator(BaseModel):
    """What was read, which range of it this text is, and whether more follows."""

    what: str  # 'web_search "vti fees"' or a URL
    start: int = 0
    end: int = 0
    total: int = 0
    more: bool = False


class StoredResult(BaseModel):
    id: str
    kind: str  # a tool name, or "page" for the full text of a page read
    arguments: dict[str, Any] = Field(default_factory=dict)
    text: str
    is_error: bool = False
    locator: Locator
    created_at: datetime = Field(default_factory=utcnow)


class ResultStore(Protocol):
    async def put(self, result: StoredResult) -> None: ...

    async def get(self, result_id: str) -> StoredResult | None: ...


class MemoryResultStore:
    def __init__(self) -> None:
        self._results: dict[str, StoredResult] = {}

    async def put(self, result: StoredResult) -> None:
        self._results[result.id] = result

    async def get(self, result_id: str) -> StoredResult | None:
        return self._results.get(result_id)


class ResultIds:
    """Sequential ids (r_0001, …): stable, short, and readable in a stub."""

    def __init__(self, issued: int = 0) -> None:
        self.issued = issued

    def next(self) -> str:
        self.issued += 1
        return f"r_{self.issued:04x}"


class FileRefusals(Protocol):
    """Why a file version could not be read, remembered so it is not downloaded and parsed again
    (by this run, its task agents, or any later run in the thread). Keyed by `FileInfo.version_key`."""

    async def get(self, key: str) -> str | None: ...

    async def put(self, key: str, reason: str) -> None: ...


class MemoryFileRefusals:
    def __init__(self) -> None:
        self._reasons: dict[str, str] = {}

    async def get(self, key: str) -> str | None:
        return self._reasons.get(key)

    async def put(self, key: str, reason: str) -> None:
        self._reasons[key] = reason
