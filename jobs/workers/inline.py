"""Run one research in this process with in-memory state (the terminal mode)."""

from __future__ import annotations

from collections.abc import Callable

from agent import RunEvent, research
from agent.backend import RunBackend

from ..keyspace.connection import connect_async
from ..lifecycle.model_client import model_client
from ..lifecycle.runtime import JobRuntime
from ..records.models import Run, RunState
from ..records.state import apply_event
from ..records.stores import RedisRequestLog
from .executor import task_for

__all__ = ["run_inline"]


async def run_inline(run: Run, runtime: JobRuntime, on_change: Callable[[RunState], None]) -> RunState:
    """Research `run` here, telling `on_change` each new state. With a Redis configured, the
    model requests are logged there under the run's id, so `deepthread inspect` reads them."""
    holder = {"state": RunState(run=run)}

    async def emit(event: RunEvent) -> None:
        holder["state"] = apply_event(holder["state"], event)
        on_change(holder["state"])

    redis = connect_async(runtime.redis_url) if runtime.redis_url else None
    try:
        async with model_client(runtime) as client:
            await research(
                task_for(holder["state"], runtime),
                runtime.agent,
                anthropic=client,
                emit=emit,
                backend=RunBackend(request_log=RedisRequestLog(redis, run.id) if redis is not None else None),
            )
    finally:
        if redis is not None:
            await redis.aclose()
    return holder["state"]
