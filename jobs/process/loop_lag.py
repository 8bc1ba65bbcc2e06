"""How late the event loop a worker's runs share wakes a timer (deepthread_event_loop_lag_seconds).

On a loop shared by many runs, CPU work done on the loop itself (not in the offload pool) delays
every other run: its model stream, its lease renewal, its stop. The lateness of a short timer is that
delay, measured where it happens; bench/density.py reads it from the metrics endpoint.
"""

from __future__ import annotations

import asyncio

from .background import Stop
from .metrics import metrics

__all__ = ["INTERVAL_SECONDS", "watch_lag"]

# A timer every 100 ms: ten cheap wake-ups a second, enough samples for a p99 within a minute.
INTERVAL_SECONDS = 0.1


async def watch_lag(stop: Stop) -> None:
    """Record each timer's lateness until asked to stop (jobs/background.beside)."""
    loop = asyncio.get_running_loop()
    histogram = metrics().loop_lag
    while True:
        due = loop.time() + INTERVAL_SECONDS
        if await stop.pause(INTERVAL_SECONDS):
            return
        histogram.observe(max(0.0, loop.time() - due))
