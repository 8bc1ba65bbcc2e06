"""One event loop for every research run of a worker process that carries many at once.

A run spends almost all its hour waiting on the model, so many runs share one loop (their I/O
interleaves) instead of a process each. RQ still runs each job in a thread of its own (its
registries, heartbeats, results and failures stay RQ's, jobs/workers/concurrent_worker.py); the thread
only hands the run's coroutine to this loop and waits for it.

The wait wakes every second so RQ's job timeout (delivered to the job's thread as an exception
between bytecodes, rq.timeouts.TimerDeathPenalty) lands within a second; the run's task is then
cancelled on the loop and the exception goes on to RQ.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["SharedLoop", "install", "run_coroutine"]

T = TypeVar("T")

# How often a waiting job thread runs Python again, so an exception sent to it arrives.
WAKE_SECONDS = 1.0
# Threads for the runs' blocking I/O (asyncio.to_thread): Redis writes that wait on the network.
IO_THREADS = 64
# After a cut (timeout, shutdown) how long the job thread waits for the run's task to wind down.
WIND_DOWN_SECONDS = 30.0


class SharedLoop:
    """An event loop running in a daemon thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        # Every run's `asyncio.to_thread` (its state writes, blocking reads) shares this pool: the
        # default (cores + 4 threads) would queue fifty runs' writes behind each other.
        self.loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(IO_THREADS, thread_name_prefix="runs-io"))
        self._thread = threading.Thread(target=self.loop.run_forever, name="runs-loop", daemon=True)

    def start(self) -> SharedLoop:
        self._thread.start()
        return self

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the loop from another thread and return its result (or raise its error)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            while True:
                try:
                    return future.result(timeout=WAKE_SECONDS)
                except concurrent.futures.TimeoutError:
                    continue
        except BaseException:
            # Cut from outside (RQ's job timeout, a cold shutdown): end the run's task too, and let
            # it finish its cancellation (its lease loop ends between calls) before the error goes on.
            if not future.done():
                future.cancel()
                concurrent.futures.wait([future], timeout=WIND_DOWN_SECONDS)
            raise

    def call_soon(self, callback: Any) -> None:
        """Schedule `callback()` on the loop from any thread (a signal handler, RQ's main loop)."""
        self.loop.call_soon_threadsafe(callback)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)


_shared: SharedLoop | None = None


def install(loop: SharedLoop | None) -> None:
    """Set (or clear) the process's shared loop: set by the concurrent worker at start-up."""
    global _shared
    _shared = loop


def shared() -> SharedLoop | None:
    return _shared


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """The job's way into async code: the shared loop when this process carries many runs, else a
    loop of the job's own (a forked work-horse carries one run)."""
    if _shared is not None:
        return _shared.run(coroutine)
    return asyncio.run(coroutine)
