"""The run's copy of the thread's files: each downloaded and converted once, shared by read_file and
find_in_files (and by task agents), however often and however concurrently they ask."""

from __future__ import annotations

import asyncio
import re

from ..events import Emit, FileUnreadable
from ..exceptions import NoWorkspace
from ..results import FileRefusals, MemoryFileRefusals
from ..workspace import FileInfo, FileUnavailable, ThreadWorkspace, WorkspaceError
from .file_index import FileIndex
from .file_text import FileText, UnsupportedFile, convert, kind_of, unsupported

__all__ = ["FileLibrary", "NoWorkspace", "describe", "display_name"]

# Names are shown to the model: one line, bounded, so a file name cannot pose as a tool result.
MAX_NAME_CHARS = 120


def display_name(info: FileInfo) -> str:
    name = " ".join(re.sub(r"[\[\]【】<>\"]", "", info.name).split()) or info.id
    return name[:MAX_NAME_CHARS]


def describe(info: FileInfo) -> str:
    kind = (kind_of(info) or info.filetype or "unsupported").upper()
    size = f"{info.size / 1024:.0f} KB" if info.size < 1_048_576 else f"{info.size / 1_048_576:.1f} MB"
    by = f", shared by <@{info.shared_by}>" if info.shared_by else ""
    return f"{info.id} · {display_name(info)} · {kind} · {size}{by}"


class FileLibrary:
    def __init__(self) -> None:
        self._texts: dict[str, FileText] = {}
        self._refusals: dict[str, str] = {}  # file id -> why it cannot be read (unsupported: asking again won't help)
        self._locks: dict[str, asyncio.Lock] = {}
        self.index = FileIndex()  # find_in_files' chunks, built from the same converted texts
        self._memory: FileRefusals = MemoryFileRefusals()  # when the caller keeps no refusals of its own
        self._told: set[str] = set()  # files whose refusal the thread was told of in this run

    async def tell_people(self, emit: Emit, info: FileInfo, exc: WorkspaceError | UnsupportedFile) -> None:
        """A refusal a person in the thread can fix is said to them too (once per run per file), not
        only to the model: the publisher posts it in the thread, once per file."""
        people = getattr(exc, "for_people", "")
        if not people or info.id in self._told:
            return
        self._told.add(info.id)
        await emit(FileUnreadable(file_id=info.id, name=display_name(info), notice=people))

    async def resolve(self, workspace: ThreadWorkspace | None, ref: str) -> FileInfo:
        """The thread's file named by id (F0123…) or by its exact name."""
        if workspace is None:
            raise NoWorkspace()
        files = await workspace.files()
        wanted = ref.strip()
        for info in files:
            if info.id == wanted:
                return info
        named = [info for info in files if info.name.lower() == wanted.lower()]
        if len(named) == 1:
            return named[0]
        listing = "; ".join(describe(info) for info in files) or "none"
        raise FileUnavailable(
            f"there is no file {wanted!r} in this thread. Its files: {listing}. Pass a file id from that list"
        )

    async def text(self, workspace: ThreadWorkspace, info: FileInfo, refusals: FileRefusals | None = None) -> FileText:
        """The file's text, downloaded and converted once. A file that cannot be read is refused
        with why; the refusal is remembered for this version of the file (in `refusals`, which
        outlives the run), so asking again neither downloads nor parses it again."""
        refusals = refusals or self._memory
        async with self._locks.setdefault(info.id, asyncio.Lock()):
            if info.id in self._refusals:
                raise UnsupportedFile(self._refusals[info.id])
            if info.id not in self._texts:
                if kind_of(info) is None:  # refused by its type, before the download
                    raise unsupported(info)
                remembered = await refusals.get(info.version_key)
                if remembered:
                    self._refusals[info.id] = remembered
                    raise UnsupportedFile(remembered)
                data = await workspace.download(info.id)
                try:
                    self._texts[info.id] = await convert(info, data)
                except UnsupportedFile as exc:
                    if exc.lasting:  # about the file, not the run: asking again won't help
                        self._refusals[info.id] = str(exc)
                        await refusals.put(info.version_key, str(exc))
                    raise
            return self._texts[info.id]

    def cached(self, file_id: str) -> FileText | None:
        return self._texts.get(file_id)
