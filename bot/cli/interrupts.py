"""Ctrl-C and SIGTERM end a terminal run within seconds, keeping what it wrote.

Either signal cancels the run's task; the run gets UNWIND_SECONDS to close its clients, and the
command then writes the report so far and says where it is. A run whose clean-up hangs past that
is not waited for: the command ends anyway (the report is already on disk).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["UNWIND_SECONDS", "Interrupts", "interrupts"]

# After a signal, the run's task has this long to unwind before the command ends without it.
UNWIND_SECONDS = 3.0
# How each signal is said, in the report and on stderr, and the exit status a shell expects (128 + n).
SAID = {signal.SIGINT: "Interrupted (Ctrl-C)", signal.SIGTERM: "Stopped (SIGTERM)"}


class Interrupts:
    """The first stop signal received, if any."""

    def __init__(self) -> None:
        self.received: signal.Signals | None = None
        self._event = asyncio.Event()

    def receive(self, signum: signal.Signals) -> None:
        if self.received is None:
            self.received = signum
        self._event.set()

    @property
    def said(self) -> str:
        return SAID[self.received] if self.received is not None else ""

    @property
    def exit_status(self) -> int:
        return 128 + int(self.received) if self.received is not None else 0

    async def race(self, task: asyncio.Task[Any]) -> bool:
        """Wait for `task` or a signal: True when the task finished first. On a signal the task is
        cancelled and given UNWIND_SECONDS; whether it finished unwinding is `task.done()`."""
        signalled = asyncio.create_task(self._event.wait())
        try:
            await asyncio.wait({task, signalled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            signalled.cancel()
        if task.done() and self.received is None:
            return True
        task.cancel()
        await asyncio.wait({task}, timeout=UNWIND_SECONDS)
        return False


@contextmanager
def interrupts() -> Iterator[Interrupts]:
    """SIGINT and SIGTERM are received by the returned Interrupts while the block runs."""
    loop = asyncio.get_running_loop()
    received = Interrupts()
    for signum in SAID:
        loop.add_signal_handler(signum, received.receive, signum)
    try:
        yield received
    finally:
        for signum in SAID:
            loop.remove_signal_handler(signum)
