"""How the outside world steers a running loop: stop it, give it more budget, add a note.

The engine only reads; the job layer implements it (Redis), tests use the in-memory one.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel, Field

from . import defaults
from .config import Budget
from .events import utcnow


class StopRequest(BaseModel):
    by: str  # who asked, e.g. "<@U0ANA>"
    at: datetime = Field(default_factory=utcnow)


class Note(BaseModel):
    author: str
    text: str


class ControlUpdate(BaseModel):
    stop: StopRequest | None = None
    budget: Budget | None = None  # a new effective budget (an upgrade), when it changed
    notes: list[Note] = Field(default_factory=list)  # notes not delivered before


class RunControl(Protocol):
    async def poll(self) -> ControlUpdate:
        """Everything new since the last poll (called at every step)."""
        ...

    async def stop_requested(self) -> StopRequest | None:
        """Cheap check, called while the loop waits on the model or tools: when `stop_signal` is
        set, and otherwise every `stop_check_seconds`."""
        ...

    def stop_signal(self) -> asyncio.Event:
        """Set when a stop may have come (a notification): the waiting loop clears it and checks.
        A control without notifications returns an event nobody sets, and checks often instead."""
        ...

    def stop_check_seconds(self) -> float:
        """The longest the loop may wait between two checks when no signal comes."""
        ...

    def snapshot(self) -> Any:
        """The control's cursor (what it has delivered), carried across a crash (JSON-able)."""
        ...

    def restore(self, snapshot: Any) -> None: ...


class MemoryControl:
    """In-process control: tests and the terminal mode."""

    def __init__(self) -> None:
        self.stop: StopRequest | None = None
        self.budget: Budget | None = None
        self.pending: list[Note] = []
        self._signal = asyncio.Event()

    def request_stop(self, stop: StopRequest) -> None:
        """Stop the loop now, as a notification would (setting `stop` alone is seen at the next check)."""
        self.stop = stop
        self._signal.set()

    async def poll(self) -> ControlUpdate:
        update = ControlUpdate(stop=self.stop, budget=self.budget, notes=self.pending)
        self.budget, self.pending = None, []
        return update

    async def stop_requested(self) -> StopRequest | None:
        return self.stop

    def stop_signal(self) -> asyncio.Event:
        return self._signal

    def stop_check_seconds(self) -> float:
        return defaults.STOP_POLL_SECONDS

    def snapshot(self) -> Any:
        return None  # in-process: nothing outlives the process to resume

    def restore(self, snapshot: Any) -> None:
        return None
