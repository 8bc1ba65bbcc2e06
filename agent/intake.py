"""What reaches a running loop from outside, taken in at the start of each turn.

Files newly shared in the thread arrive as a note (markers, not content); a budget upgrade is
adopted at once (deadlines, admission and the budget block read the same revision); a user
note joins the history and is pinned with the task, so it outlives compaction like the
original constraints. A stop is only handed back: ending the run is the loop's decision.
"""

from __future__ import annotations

import logging

from .activity import say
from .budget import Ledger
from .context.history import History
from .control import RunControl, StopRequest
from .events import Emit, FileUnreadable, Progress
from .tools.seen_urls import SeenUrls
from .tools.thread_markers import file_note
from .workspace import FileInfo, ThreadWorkspace

__all__ = ["Intake", "tell_unavailable", "thread_files"]

# The loop's logger: a thread that cannot be listed is part of the loop's story.
log = logging.getLogger("agent.loop")


async def thread_files(workspace: ThreadWorkspace) -> list[FileInfo]:
    """The thread's files, or none when they cannot be listed now: the thread is context, not the task."""
    try:
        return await workspace.files()
    except Exception as exc:
        log.warning("thread files unavailable: %s", exc)
        return []


async def tell_unavailable(emit: Emit, files: list[FileInfo]) -> None:
    """Files the listing already knows a person must act on are said in the thread now: the model
    may never try to read them (the thread is told each once; bot/publishing/file_notices.py)."""
    for info in files:
        if info.unavailable:
            await emit(FileUnreadable(file_id=info.id, name=info.name, notice=info.unavailable))


class Intake:
    def __init__(self, control: RunControl, emit: Emit, workspace: ThreadWorkspace | None) -> None:
        self.control = control
        self.emit = emit
        self.workspace = workspace
        self.notes: list[str] = []  # user notes arriving mid-run (steering), pinned with the task

    async def take(
        self, history: History, ledger: Ledger, files_seen: set[str], seen: SeenUrls | None = None
    ) -> StopRequest | None:
        """Everything new since the last turn into `history` (and `ledger`); a stop, if one was asked."""
        await self._new_files(history, files_seen)
        update = await self.control.poll()
        if update.budget is not None:
            ledger.upgrade(update.budget)
            await self.emit(
                Progress(
                    phase="researching",
                    activity=say("upgraded", profile=update.budget.profile, revision=ledger.revision),
                )
            )
        for note in update.notes:
            self.notes.append(f"{note.author}: {note.text}")
            if seen is not None:
                seen.add_text(note.text)  # a link the team gives mid-run may be read
            history.add_text(
                f'<user_note from="{note.author}">{note.text}</user_note>\n'
                "Take this into account from now on; it is a constraint like the original ones."
            )
        return update.stop

    async def _new_files(self, history: History, files_seen: set[str]) -> None:
        """A file shared while the run is active arrives as a note at the next turn."""
        if self.workspace is None:
            return
        new = [f for f in await thread_files(self.workspace) if f.id not in files_seen]
        await tell_unavailable(self.emit, new)
        if new:
            files_seen.update(f.id for f in new)  # the run's own set (ToolContext.files_seen), checkpointed with it
            history.add_text(file_note(new))
