"""The run's opening, made ready before the first turn: markers, not content (DESIGN.md).

Constraints the request states in words become pinned constraints (shown to the team once, so
they can correct them); the thread's files and earlier messages become marker lines; links in
the request become link ids that read_page follows. A resumed run skips all of this: its
opening is in its checkpoint.
"""

from __future__ import annotations

import logging
import re

from .constraints import extract_constraints
from .constraints import merge as merge_constraints
from .events import ConstraintsFound, Emit
from .intake import tell_unavailable, thread_files
from .model import ModelClient
from .task import ResearchTask
from .tools.links import LinkTable, domain, marker
from .tools.thread_markers import thread_markers
from .workspace import ThreadWorkspace

__all__ = ["with_markers", "with_stated_constraints"]

# The loop's logger: an opening without its thread markers is part of the loop's story.
log = logging.getLogger("agent.loop")

MAX_LINKS_LISTED = 20  # links in a request listed in the opening
URL_IN_TEXT = re.compile(r"https?://[^\s<>|\"'`\])]+")


async def with_stated_constraints(task: ResearchTask, model: ModelClient, emit: Emit) -> ResearchTask:
    """Constraints stated in the question (or a follow-up) become pinned constraints, shown to the team."""
    assert task.constraints_from is not None
    found = await extract_constraints(model, task.constraints_from)
    constraints = merge_constraints(task.constraints, found)
    if constraints != task.constraints:
        await emit(
            ConstraintsFound(constraints=constraints, added=[c for c in constraints if c not in task.constraints])
        )
    return task.model_copy(update={"constraints": constraints, "constraints_from": None})


async def with_markers(
    task: ResearchTask, workspace: ThreadWorkspace | None, links: LinkTable, emit: Emit | None = None
) -> tuple[ResearchTask, set[str]]:
    """Markers, not content: the thread's files and earlier messages, and links in the request as
    link ids that read_page follows (added to `links`). Also the ids of the files the opening
    lists, so only files shared after it arrive as notes (agent/intake.py); those already known to be
    unreadable are said in the thread through `emit`."""
    update: dict[str, str] = {}
    files_seen: set[str] = set()
    if workspace is not None:
        try:
            update["thread_markers"] = await thread_markers(workspace, before_ts=task.started_ts)
        except Exception as exc:  # the thread is context, not the task: a Slack hiccup must not stop the run
            log.warning("thread markers unavailable: %s", exc)
            update["thread_markers"] = (
                "The thread's files and earlier messages could not be listed just now; "
                "read_thread and find_in_files may still work."
            )
        files = await thread_files(workspace)
        files_seen = {f.id for f in files}
        if emit is not None:
            await tell_unavailable(emit, files)
    urls = list(
        dict.fromkeys(u.rstrip(".,;:!?") for u in URL_IN_TEXT.findall(f"{task.question}\n{task.follow_up or ''}"))
    )
    if urls:
        lines = ["Links in the request (read_page takes the id or the URL):"]
        lines += [f"- {marker(links.add(url), domain(url), url, '')} {url}" for url in urls[:MAX_LINKS_LISTED]]
        update["link_markers"] = "\n".join(lines)
    return (task.model_copy(update=update) if update else task), files_seen
