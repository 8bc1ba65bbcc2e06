"""The runs this process is researching right now, and how to hand each back at shutdown.

A forked work-horse carries one run and takes SIGTERM itself; a worker carrying many runs on a
shared loop (jobs/workers/concurrent_worker.py) takes the signal in its main thread and asks every run
here to hand itself back: each stops at once, keeps its checkpoint and is queued again at the front.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

__all__ = ["count", "hand_back_all", "register"]

_lock = threading.Lock()
_running: dict[str, tuple[asyncio.AbstractEventLoop, Callable[[], None]]] = {}


def register(run_id: str, hand_back: Callable[[], None]) -> Callable[[], None]:
    """Note that `run_id` runs on the current loop; returns the undo (call it when the run ends)."""
    loop = asyncio.get_running_loop()
    with _lock:
        _running[run_id] = (loop, hand_back)

    def undo() -> None:
        with _lock:
            _running.pop(run_id, None)

    return undo


def count() -> int:
    with _lock:
        return len(_running)


def hand_back_all() -> int:
    """Ask every run of this process to hand itself back; safe from any thread. Returns how many."""
    with _lock:
        running = list(_running.values())
    for loop, hand_back in running:
        loop.call_soon_threadsafe(hand_back)
    return len(running)
