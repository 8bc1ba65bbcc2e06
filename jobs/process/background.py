"""Background loops beside a piece of work (a lease renewed while a sync or a run goes on), stopped
by an event between their Redis calls, never by cancelling one mid-call.

Cancelling a task that waits on redis-py's asyncio client is not reliable on Python 3.11: a
cancellation that meets a socket timeout (`asyncio.timeout`, `asyncio.wait_for`) can be swallowed,
the loop goes on to its next sleep, and whoever awaits the cancelled task waits for ever. Seen in
`bench.publish` on a loaded machine: a publisher's sync lease renewed for minutes after the sync
had ended, so no process could show that run's final state. A loop here waits with `pause`, which
returns True once it is asked to stop; leaving `beside` asks, then waits for the call under way
(bounded by the connection's socket timeout) to end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

__all__ = ["Stop", "beside"]


class Stop:
    """Asked once the work a loop runs beside has ended."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    @property
    def asked(self) -> bool:
        return self._event.is_set()

    async def pause(self, seconds: float) -> bool:
        """Wait `seconds`, or less if asked to stop meanwhile; True when asked (the loop should end)."""
        if self._event.is_set():
            return True
        with contextlib.suppress(TimeoutError):
            # Cancelling Event.wait on timeout touches no connection, so nothing can be left half-read.
            await asyncio.wait_for(self._event.wait(), seconds)
        return self._event.is_set()


@contextlib.asynccontextmanager
async def beside(loop: Callable[[Stop], Coroutine[Any, Any, None]], name: str) -> AsyncIterator[asyncio.Task[None]]:
    """Run `loop(stop)` as a task while the block runs; on leaving, ask it to stop and wait for it.

    If the block's own task is cancelled while it waits, the loop still ends by itself at its next
    pause (it was asked), so nothing is left running for long."""
    stop = Stop()
    task = asyncio.create_task(loop(stop), name=name)
    try:
        yield task
    finally:
        stop.set()
        await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # retrieved: a loop that failed is the block's to notice, not the loop's log
