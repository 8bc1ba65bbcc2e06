"""`deepthread ask`'s progress on stderr: what the run is doing, counted, timed, and what it waits on.

On a terminal it is one live line, redrawn every TICK_SECONDS in place; anywhere else (a pipe, a
log, CI) it is plain lines: one whenever what the run does changes, and the same again every
PLAIN_EVERY_SECONDS while nothing changes, so a run waiting on a silent service reads as waiting,
not as hung. A model request the service has been quiet on for WAIT_SHOWN_AFTER_SECONDS is named
with its endpoint (agent.ModelWatch), since that is what the run is waiting on then.

Plain text, no library: one line, a carriage return and an erase-to-end are all a live line needs.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TextIO

from agent import ModelWatch
from jobs import RunState

__all__ = ["ProgressLine"]

# A terminal's line is redrawn this often: the elapsed time and the wait move.
TICK_SECONDS = 1.0
# Elsewhere an unchanged line is printed again this often (and at once when it changes).
PLAIN_EVERY_SECONDS = 10.0
# A model request is named as what the run waits on once the service has been quiet on it this long.
WAIT_SHOWN_AFTER_SECONDS = 2.0
# A phase before the run has said anything.
STARTING = "starting"
ERASE_TO_END = "\x1b[K"


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class ProgressLine:
    """The run's progress, drawn on `out`; `live`: redraw in place (default: when `out` is a terminal)."""

    def __init__(
        self,
        out: TextIO,
        watch: ModelWatch | None = None,
        *,
        live: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out = out
        self.watch = watch
        self.live = out.isatty() if live is None else live
        self._clock = clock
        self._started = clock()
        self._state: RunState | None = None
        self._shown = ""  # what the line says, without the clock: a change prints at once
        self._printed_at = float("-inf")
        self._drawn = False  # a live line is on the screen

    def update(self, state: RunState) -> None:
        self._state = state
        self.tick()

    def waiting_on(self, *, seconds: bool = True) -> str:
        """The model request the service is quiet on, when it has been for a while ("" otherwise);
        without `seconds`, the same words without the count (which moves every tick)."""
        watch = self.watch
        waiting = watch.quietest() if watch is not None else None
        if watch is None or waiting is None:
            return ""
        quiet = waiting.quiet_for(watch.clock())
        if quiet < WAIT_SHOWN_AFTER_SECONDS:
            return ""
        counted = f" for {quiet:.0f} s" if seconds else ""
        if waiting.last_byte is None:
            return f"waiting for the model at {waiting.url}: nothing received{counted}"
        return f"the model at {waiting.url} has sent nothing{counted}"

    def text(self, *, seconds: bool = True) -> str:
        """The line: phase and activity, requests, sources, sections, and what it waits on."""
        state = self._state
        phase = STARTING if state is None or state.phase == "queued" else state.phase
        parts = [f"[{phase}] {state.activity}" if state is not None and state.activity else f"[{phase}]"]
        if state is not None:
            parts += [
                _count(state.usage.requests, "request"),
                _count(len(state.sources), "source"),
                _count(len(state.sections), "section"),
            ]
        waiting = self.waiting_on(seconds=seconds)
        if waiting:
            parts.append(waiting)
        return " · ".join(parts)

    def tick(self) -> None:
        line = f"{self.text()} · {_elapsed(self._clock() - self._started)}"
        if self.live:
            width = shutil.get_terminal_size((100, 24)).columns
            self.out.write("\r" + line[: max(width - 1, 20)] + ERASE_TO_END)
            self.out.flush()
            self._drawn = True
            return
        # A plain line when what it says changed (the clock and the wait's count are not news), or
        # again after a while, to show it is still waiting.
        shown = self.text(seconds=False)
        if shown != self._shown or self._clock() - self._printed_at >= PLAIN_EVERY_SECONDS:
            print(line, file=self.out, flush=True)
            self._printed_at = self._clock()
        self._shown = shown

    def clear(self) -> None:
        """Take the live line off the screen, so other output starts on a clean line."""
        if self._drawn:
            self.out.write("\r" + ERASE_TO_END)
            self.out.flush()
            self._drawn = False

    def above(self) -> _Above:
        """A stream for log lines: each clears the live line first (the next tick draws it again)."""
        return _Above(self)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[ProgressLine]:
        """Ticks until the block ends, then leaves a clean line."""

        async def ticking() -> None:
            while True:
                await asyncio.sleep(TICK_SECONDS)
                self.tick()

        self.tick()
        ticker = asyncio.create_task(ticking())
        try:
            yield self
        finally:
            ticker.cancel()
            self.clear()


class _Above:
    """A file-like object that writes above the live line (for the logging handler)."""

    def __init__(self, line: ProgressLine) -> None:
        self._line = line

    def write(self, text: str) -> int:
        self._line.clear()
        return self._line.out.write(text)

    def flush(self) -> None:
        self._line.out.flush()

    def isatty(self) -> bool:
        return self._line.out.isatty()
