"""The runs this process is researching right now, how to hand each back at shutdown, and how to
stop one at once.

A forked work-horse carries one run and takes SIGTERM itself; a worker carrying many runs on a
shared loop (jobs/workers/concurrent_worker.py) takes the signal in its main thread and asks every run
here to hand itself back: each stops at once, keeps its checkpoint and is queued again at the front.
RQ stops one job by killing its work-horse; that worker has none to kill, so it stops the job's run
here: its work is cancelled mid-call, whatever it was waiting on.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

__all__ = ["count", "hand_back_all", "register", "stop"]

_lock = threading.Lock()
_running: dict[str, tuple[asyncio.AbstractEventLoop, Callable[[], None], Callable[[], None]]] = {}


def register(run_id: str, hand_back: Callable[[], None], stop: Callable[[], None]) -> Callable[[], None]:
    """Note that `run_id` runs on the current loop, with what hands it back and what stops it;
    returns the undo (call it when the run ends)."""
    loop = asyncio.get_running_loop()
    with _lock:
        _running[run_id] = (loop, hand_back, stop)

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
    for loop, hand_back, _ in running:
        loop.call_soon_threadsafe(hand_back)
    return len(running)


def stop(run_id: str) -> bool:
    """Stop the run's work at once (its job was stopped); safe from any thread. False when this
    process is not researching it."""
    with _lock:
        carried = _running.get(run_id)
    if carried is None:
        return False
    loop, _, stop_now = carried
    loop.call_soon_threadsafe(stop_now)
    return True
