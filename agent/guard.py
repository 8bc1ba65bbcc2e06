"""Awaiting model or tool work under the run's two cut-offs: a stop from the team, and a deadline.

Both end the await the same way, with Interrupted (its `stop` set when the team asked), so the
loop decides in one place what a cut means. The work is cancelled with the await: in-flight
model and HTTP calls never outlive it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from .budget import Clock, Ledger
from .control import RunControl
from .exceptions import Interrupted

__all__ = ["guarded"]

T = TypeVar("T")


async def guarded(
    work: Awaitable[T], stage: str, deadline: float, *, control: RunControl, ledger: Ledger, clock: Clock
) -> T:
    """Await `work`, cutting it short on a stop or when `deadline` seconds have passed."""
    task = asyncio.ensure_future(work)
    signal = control.stop_signal()
    started = clock()
    try:
        while True:
            remaining = deadline - (clock() - started)
            if remaining <= 0:
                raise Interrupted(f"{ledger.time_limit_name(clock())} reached while {stage}")
            # A stop wakes the wait by its notification; the check every stop_check_seconds is the
            # fallback for a notification lost (a reconnect) or a control that has none.
            woken = asyncio.ensure_future(signal.wait())
            try:
                done, _ = await asyncio.wait(
                    {task, woken},
                    timeout=min(remaining, control.stop_check_seconds()),
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                woken.cancel()  # Event.wait touches no connection: safe to cancel
            if task in done:
                return task.result()
            signal.clear()
            stop = await control.stop_requested()
            if stop is not None:
                raise Interrupted(f"stopped by {stop.by} while {stage}", stop=stop)
    finally:
        if not task.done():
            task.cancel()  # in-flight model and HTTP calls are cancelled with it
            await asyncio.gather(task, return_exceptions=True)
