"""RQ job functions for tests/jobs/test_concurrent_worker.py (RQ imports a job's function by its
dotted path, so they live in a module of their own rather than in the test file).

Each reaches async code the way a research run does, through jobs.process.shared_loop.run_coroutine, and
reports where it ran: the job's thread, the loop's thread, the process, and whether the shared
loop was installed."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any

from redis.asyncio import Redis as AsyncRedis
from rq.job import Job

from jobs.process import shared_loop

# How long a job waits for the others before giving up (it then reports how many it saw).
TOGETHER_SECONDS = 20.0
# How long the follow-up job waits for the timed-out job to be recorded failed.
FAILED_SECONDS = 40.0


def _where() -> dict[str, Any]:
    return {"pid": os.getpid(), "thread": threading.get_ident(), "shared": shared_loop.shared() is not None}


def wait_together(url: str, key: str, n: int) -> dict[str, Any]:
    """Count itself in, then wait until `n` jobs have: returns with seen == n only if they ran at once."""
    where = _where()
    seen, loop_thread = shared_loop.run_coroutine(_count_and_wait(url, key, n))
    return {**where, "seen": seen, "loop_thread": loop_thread}


async def _count_and_wait(url: str, key: str, n: int) -> tuple[int, int]:
    redis = AsyncRedis.from_url(url)
    try:
        seen = await redis.incr(key)
        deadline = time.monotonic() + TOGETHER_SECONDS
        while seen < n and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            seen = int(await redis.get(key) or 0)
        return seen, threading.get_ident()
    finally:
        await redis.aclose()


def sleep_then_return(seconds: float, value: str) -> str:
    """A job that outlives the worker's dequeuing (burst mode finds the queue empty meanwhile)."""
    return shared_loop.run_coroutine(_sleep_then_return(seconds, value))


async def _sleep_then_return(seconds: float, value: str) -> str:
    await asyncio.sleep(seconds)
    return value


def sleep_long(url: str, marker: str) -> str:
    """A run that waits 30 s; when its task is cancelled it records `marker` (its wind-down)."""
    return shared_loop.run_coroutine(_sleep_long(url, marker))


async def _sleep_long(url: str, marker: str) -> str:
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        redis = AsyncRedis.from_url(url)
        try:
            await redis.set(marker, "cancelled")
        finally:
            await redis.aclose()
        raise
    return "slept"


def after_failed(url: str, job_id: str, marker: str) -> dict[str, Any]:
    """Wait on the shared loop until RQ records `job_id` failed; return that status and `marker`."""
    return shared_loop.run_coroutine(_after_failed(url, job_id, marker))


async def _after_failed(url: str, job_id: str, marker: str) -> dict[str, Any]:
    redis = AsyncRedis.from_url(url)
    try:
        deadline = time.monotonic() + FAILED_SECONDS
        status = None
        while time.monotonic() < deadline:
            raw = await redis.hget(Job.key_for(job_id), "status")
            status = raw.decode() if raw else None
            if status == "failed":
                break
            await asyncio.sleep(0.05)
        raw_marker = await redis.get(marker)
        return {"status": status, "marker": raw_marker.decode() if raw_marker else None}
    finally:
        await redis.aclose()


def raise_inside(message: str) -> None:
    """A run whose coroutine fails: the error crosses the shared loop into RQ's failure handling."""
    shared_loop.run_coroutine(_raise(message))


async def _raise(message: str) -> None:
    await asyncio.sleep(0)
    raise ValueError(message)
