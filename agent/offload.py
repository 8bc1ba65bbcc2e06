"""CPU-bound work (page extraction, charts) off the event loop.

By default in a thread: a process researching one run loses nothing while its own loop waits on
it. A worker carrying many runs on one loop (jobs/workers/concurrent_worker.py) switches to a process
pool: in a thread, a long page would hold the interpreter's lock and delay every other run's
awaits, heartbeats and lease renewals. The pool's processes fork from a server that has loaded
the extractor once (copy-on-write), so each adds little memory.

The pool's processes are shared fairly by run (agent/converter/fair_queue.py, without a budget): work
goes to the pool only when its run has a slot, and a slot that comes free goes to the run served
longest ago. A run that sent twenty big pages no longer holds another run's one page behind them
(370 s, first come first served): that page waits for one extraction at most.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import weakref
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any, TypeVar

from . import defaults
from .converter.fair_queue import RUN_OF_CONVERSION, FairSlots

__all__ = ["cpu", "pooled", "use_processes", "use_threads"]

T = TypeVar("T")

# What the pool's server loads before forking its workers: the extractor and its dependencies.
PRELOAD = ["agent.tools.extract"]

_pool: Executor | None = None
_workers = 0
# Each event loop's share-out of the pool (a loop is one process's set of runs).
_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, FairSlots] = weakref.WeakKeyDictionary()


def use_processes(workers: int | None = None) -> None:
    """Run CPU work in a process pool from now on (one per core unless `workers` says otherwise)."""
    global _pool, _workers
    if _pool is not None:
        return
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    count = workers or os.cpu_count() or 2
    pool = ProcessPoolExecutor(max_workers=count, mp_context=context, initializer=_lower_priority)
    # Started here, not at a run's first page: starting the server (it imports the extractor) and
    # its workers takes seconds, which would stall every run on the loop that first used it.
    for started in [pool.submit(_ready) for _ in range(count)]:
        started.result()
    _pool, _workers = pool, count
    _slots.clear()


def _ready() -> bool:
    return True


def _lower_priority() -> None:
    """In each pool process: below the loop that waits on it (defaults.OFFLOAD_NICE)."""
    os.nice(defaults.OFFLOAD_NICE)


def use_threads() -> None:
    """Back to threads (the pool's processes are ended)."""
    global _pool
    pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


def pooled() -> bool:
    return _pool is not None


async def cpu(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)` off the loop: in the pool when there is one (its arguments and result are
    pickled: plain data only), else in a thread."""
    if _pool is None:
        return await asyncio.to_thread(function, *args)
    pool, loop = _pool, asyncio.get_running_loop()
    if loop not in _slots:
        # A run may use every process while no other waits: the round robin, not a cap, is the share.
        _slots[loop] = FairSlots(parallel=_workers, per_run=_workers, budget_seconds=None)
    slots = _slots[loop]
    run = await slots.acquire(RUN_OF_CONVERSION.get())
    try:
        task = loop.run_in_executor(pool, function, *args)
    except BaseException:
        slots.release(run)
        raise

    def done(finished: asyncio.Future[T]) -> None:
        # The slot is the process's: held until the work ends, though its caller stopped waiting (a
        # deadline, a stop) and nobody reads what it gave.
        slots.release(run)
        if not finished.cancelled():
            finished.exception()

    task.add_done_callback(done)
    return await asyncio.shield(task)
