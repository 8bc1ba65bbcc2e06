"""The thread's view of parallel task agents: one progress line with every branch's state.

Task agents' own Progress events would overwrite each other (and the lead's), so each is
turned into its branch's state and the whole board is shown instead.
"""

from __future__ import annotations

from .. import defaults
from ..activity import BRANCH_SEPARATOR, BRANCH_STATES, say
from ..display import shorten
from ..events import Emit, Progress, RunEvent
from .report import TaskReport

DONE_MARK = {status: BRANCH_STATES[status] for status in ("completed", "incomplete", "failed")}
# Each branch's current activity is shortened to this, so the line stays readable in Slack.
TASK_ACTIVITY_CHARS = 60


class Board:
    def __init__(self, emit: Emit, labels: dict[int, str]) -> None:
        self._emit = emit
        self._labels = {n: shorten(label, defaults.TASK_LABEL_CHARS) for n, label in labels.items()}
        self._running: dict[int, str] = {n: BRANCH_STATES["starting"] for n in labels}
        self._done: dict[int, str] = {}
        self._last = ""

    def line(self) -> str:
        done, running = len(self._done), len(self._running)
        branches = []
        for number, label in self._labels.items():
            state = self._done.get(number) or self._running.get(number, "")
            branches.append(say("branch", number=number, label=label, state=state))
        return say("board", done=done, running=running, branches=BRANCH_SEPARATOR.join(branches))

    async def show(self) -> None:
        line = self.line()
        if line != self._last:  # a repeated line would only cost a Redis write and a Slack edit
            self._last = line
            await self._emit(Progress(phase="researching", activity=line))

    def mark(self, report: TaskReport) -> None:
        self._running.pop(report.number, None)
        self._done[report.number] = DONE_MARK[report.status]

    async def finished(self, report: TaskReport) -> None:
        self.mark(report)
        await self.show()

    def emitter(self, number: int) -> Emit:
        """The emit a task agent gets: its progress becomes its branch's state; sources and usage pass on."""

        async def emit(event: RunEvent) -> None:
            if isinstance(event, Progress):
                if number in self._running:
                    self._running[number] = shorten(event.activity, TASK_ACTIVITY_CHARS)
                    await self.show()
                return
            await self._emit(event)

        return emit
