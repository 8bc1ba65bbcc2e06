"""The thread as a workspace: the files shared in it and its earlier messages.

The engine knows nothing about Slack: it reads the thread through this protocol. The Slack
version lives in `bot/slack/workspace.py`; `MemoryWorkspace` serves tests and the terminal.
Every failure is a `WorkspaceError` whose message says what went wrong and what to do, so
the thread tools hand it to the agent as it is.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field

from .exceptions import FileUnavailable, WorkspaceError

__all__ = [
    "MAX_FILE_BYTES",
    "FileInfo",
    "FileUnavailable",
    "MemoryWorkspace",
    "ThreadMessage",
    "ThreadWorkspace",
    "WorkspaceError",
    "too_large",
]

# Files larger than this are not downloaded: converting them would hold a worker for minutes
# and their text would not fit the reading budget anyway.
MAX_FILE_BYTES = 20 * 1024 * 1024


class FileInfo(BaseModel):
    """A file shared in the thread: what the opening's markers and the tools show of it."""

    id: str
    name: str
    title: str = ""
    mimetype: str = ""
    filetype: str = ""  # Slack's short type ("pdf", "xlsx"); "" when unknown
    size: int = Field(ge=0)
    shared_by: str = ""  # who shared it (a user id)
    shared_ts: str = ""  # the message it came with
    permalink: str = ""  # the file's page in Slack, for a reader of the report's sources
    version: str = ""  # changes when the file's content does (Slack: its `updated`, else `created` time)
    # Known from the listing alone: why a person must act before the bot can read it (a refusal
    # Slack gave for it, its size). The run tells the thread at once, whether or not the model reads it.
    unavailable: str = ""

    @property
    def version_key(self) -> str:
        """One version of this file: a refusal is remembered for it, and a new upload is tried afresh."""
        return f"{self.id}:{self.version or '-'}:{self.size}"

    @property
    def extension(self) -> str:
        return self.name.rsplit(".", 1)[-1].lower() if "." in self.name else ""


class ThreadMessage(BaseModel):
    """One message of the thread, oldest first; `number` is its place in the thread from 1."""

    number: int = Field(ge=1)
    ts: str
    author: str  # a user id, or the bot's name for its own messages
    text: str
    is_bot: bool = False
    files: list[str] = Field(default_factory=list)  # ids of files shared with it

    @property
    def time(self) -> datetime:
        return datetime.fromtimestamp(float(self.ts), tz=UTC)


@runtime_checkable
class ThreadWorkspace(Protocol):
    """The run's thread. Only files of this thread can be downloaded."""

    async def files(self) -> list[FileInfo]:
        """Every file shared in the thread so far, in the order shared."""
        ...

    async def download(self, file_id: str, max_bytes: int = MAX_FILE_BYTES) -> bytes:
        """The file's bytes; FileUnavailable when it is not of this thread, too large or not readable."""
        ...

    async def messages(self, start: int, end: int) -> list[ThreadMessage]:
        """Messages `start`..`end` (numbers from 1, both included) that exist."""
        ...

    async def message_count(self) -> int: ...


class MemoryWorkspace:
    """A thread held in memory, for tests and the terminal."""

    def __init__(
        self, files: list[tuple[FileInfo, bytes]] | None = None, messages: list[ThreadMessage] | None = None
    ) -> None:
        self._files: dict[str, tuple[FileInfo, bytes]] = {info.id: (info, data) for info, data in files or []}
        self._messages = list(messages or [])
        self.downloads: list[str] = []  # file ids downloaded, in order (tests count them)

    def share(self, info: FileInfo, data: bytes) -> None:
        self._files[info.id] = (info, data)

    def post(self, author: str, text: str, ts: str, *, files: list[str] | None = None) -> ThreadMessage:
        message = ThreadMessage(number=len(self._messages) + 1, ts=ts, author=author, text=text, files=files or [])
        self._messages.append(message)
        return message

    async def files(self) -> list[FileInfo]:
        return [info for info, _ in self._files.values()]

    async def download(self, file_id: str, max_bytes: int = MAX_FILE_BYTES) -> bytes:
        found = self._files.get(file_id)
        if found is None:
            known = ", ".join(self._files) or "none"
            raise FileUnavailable(f"there is no file {file_id!r} in this thread (its files: {known})")
        info, data = found
        if len(data) > max_bytes:
            raise FileUnavailable(too_large(info.name, len(data), max_bytes))
        self.downloads.append(file_id)
        return data

    async def messages(self, start: int, end: int) -> list[ThreadMessage]:
        return [m for m in self._messages if start <= m.number <= end]

    async def message_count(self) -> int:
        return len(self._messages)


def too_large(name: str, size: int, cap: int) -> str:
    return (
        f"{name} is {size / 1_048_576:.1f} MB, over the {cap / 1_048_576:.0f} MB limit for reading files; "
        "ask the requester for a smaller export (a single sheet, the relevant pages) or work without it"
    )
