"""CPU-bound work (page extraction, charts) off the event loop.

By default in a thread: a process researching one run loses nothing while its own loop waits on
it. A worker carrying many runs on one loop (jobs/workers/concurrent_worker.py) switches to a process
pool: in a thread, a long page would hold the interpreter's lock and delay every other run's
awaits, heartbeats and lease renewals. The pool's processes fork from a server that has loaded
the extractor once (copy-on-write), so each adds little memory.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any, TypeVar

__all__ = ["cpu", "pooled", "use_processes", "use_threads"]

T = TypeVar("T")

# What the pool's server loads before forking its workers: the extractor and its dependencies.
PRELOAD = ["agent.tools.extract"]

_pool: Executor | None = None


def use_processes(workers: int | None = None) -> None:
    """Run CPU work in a process pool from now on (one per core unless `workers` says otherwise)."""
    global _pool
    if _pool is not None:
        return
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    count = workers or os.cpu_count() or 2
    pool = ProcessPoolExecutor(max_workers=count, mp_context=context)
    # Started here, not at a run's first page: starting the server (it imports the extractor) and
    # its workers takes seconds, which would stall every run on the loop that first used it.
    for started in [pool.submit(_ready) for _ in range(count)]:
        started.result()
    _pool = pool


def _ready() -> bool:
    return True


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
    return await asyncio.get_running_loop().run_in_executor(_pool, function, *args)
