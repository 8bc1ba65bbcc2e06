"""The RQ job: run the agent for one Run, applying every event to run state as it happens."""
from __future__ import annotations

import asyncio
import logging
from datetime import date

from anthropic import AsyncAnthropic
from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from rq import get_current_job

from agent import ResearchTask, RunEvent, research
from agent.config import budget_for
from agent.context.requestlog import RedisRequestLog
from agent.results import RedisResultStore

from .models import RunState, RunStatus
from .runtime import JobRuntime, current
from .store import RunStore

log = logging.getLogger(__name__)


def task_for(state: RunState, runtime: JobRuntime | None = None) -> ResearchTask:
    run = state.run
    where = f"Slack channel {run.channel}, thread {run.thread_ts}" if run.channel else "terminal"
    return ResearchTask(
        question=run.question,
        constraints=run.constraints,
        requester=f"<@{run.requester}>" if run.requester else "",
        where=where,
        today=date.today(),
        budget=budget_for(run.profile, runtime.agent.caps if runtime else None),
    )


def anthropic_client(runtime: JobRuntime) -> AsyncAnthropic:
    return AsyncAnthropic(api_key=runtime.anthropic_api_key, base_url=runtime.anthropic_base_url)


async def run_agent(store: RunStore, state: RunState, runtime: JobRuntime) -> RunState:
    holder = {"state": state}

    async def emit(event: RunEvent) -> None:
        # Redis writes are sub-millisecond; doing them inline keeps event order exact.
        holder["state"] = store.apply(holder["state"], event)

    if not runtime.redis_url:
        raise RuntimeError("the worker runtime has no redis_url; start workers with `deepthread worker`")
    async_redis = AsyncRedis.from_url(runtime.redis_url)
    try:
        async with anthropic_client(runtime) as client:
            await research(task_for(state, runtime), runtime.agent, anthropic=client, emit=emit,
                           results=RedisResultStore(async_redis, state.run.id),
                           request_log=RedisRequestLog(async_redis, state.run.id))
    finally:
        await async_redis.aclose()
    return holder["state"]


def execute(run_id: str) -> str:
    """RQ entry point. Returns the run's final status; never leaves a run looking alive."""
    job = get_current_job()
    redis: Redis = job.connection if job is not None else Redis()
    store = RunStore(redis)
    state = store.get(run_id)
    if state.status.finished:
        return state.status.value
    try:
        state = asyncio.run(run_agent(store, state, current()))
    except Exception as exc:
        log.exception("run %s crashed", run_id)
        state = store.mark_failed(run_id, f"internal error ({type(exc).__name__}); the operator can find details in the worker log")
    return state.status.value


def run_status(store: RunStore, run_id: str) -> RunStatus:
    return store.get(run_id).status
