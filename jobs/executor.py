"""The RQ job: run the agent for one Run, applying every event to run state as it happens.

One job at a time holds a run (a Redis lock its heartbeat refreshes); a job that finds a
checkpoint resumes from it, so a worker that dies costs at most the turn it was on.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from datetime import date

from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from rq import get_current_job

from agent import Finished, ResearchTask, RunEvent, SourceRegistry, research
from agent.backend import RunBackend
from agent.config import Caps, budget_for
from agent.model_provider import ModelAPI, model_api
from agent.task import PriorRun
from agent.visibility import is_requester_dm

from . import keys
from .connection import connect_async
from .continuation import prior_of
from .control import RedisRunControl, upgraded_profile
from .models import RunState
from .runtime import JobRuntime, current
from .spend import Spend, record_spend
from .store import RunStore
from .stores import RedisCheckpointStore, RedisRequestLog, RedisResultStore

log = logging.getLogger(__name__)


def task_for(
    state: RunState,
    runtime: JobRuntime | None = None,
    profile: str | None = None,
    prior: PriorRun | None = None,
    caps: Caps | None = None,  # the operator's caps, lowered to the monthly budget left (Spend.run_caps)
) -> ResearchTask:
    run = state.run
    where = f"Slack channel {run.channel}, thread {run.thread_ts}" if run.channel else "terminal"
    return ResearchTask(
        # Constraints stated in the question (a first run) or the follow-up (a continuation) are
        # pulled out before the run starts; a resumed run keeps the opening it had. A re-check's
        # request is the bot's fixed brief, not the team's words: nothing to pin for later runs.
        constraints_from=(None if run.recheck else run.follow_up) if prior else run.question,
        # A first run's question is the thread's first message when the mention started the thread.
        started_ts=(run.thread_ts or "") if prior is None else "",
        follow_up=run.follow_up,
        prior=prior,
        earlier_runs=[f"run {prior.run_id} (continued by this one)"] if prior else [],
        question=run.question,
        constraints=run.constraints,
        requester=f"<@{run.requester}>" if run.requester else "",
        where=where,
        today=date.today(),
        # Held again here, whatever the surface decided: only a DM with the requester (agent/visibility.py).
        private_sources=run.private_sources and is_requester_dm(run.channel),
        approved_plan=state.plan.text() if state.plan is not None and state.approved_by else "",
        budget=budget_for(profile or run.profile, caps or (runtime.agent.caps if runtime else None)),
    )


def anthropic_client(runtime: JobRuntime) -> ModelAPI:
    """The SDK client of the configured provider (the Anthropic API, Bedrock or Vertex)."""
    return model_api(runtime.provider_config())


async def _heartbeat(redis: AsyncRedis, run_id: str, token: str, ttl: float) -> None:
    """Keep the run's lock while this job lives, and note how far it got."""
    while True:
        await redis.set(keys.lock(run_id), token, ex=max(1, int(ttl)))
        await redis.set(keys.alive(run_id), str(time.time()), ex=keys.RUN_ALIVE_TTL_SECONDS)
        await asyncio.sleep(ttl / 3)


async def run_agent(store: RunStore, state: RunState, runtime: JobRuntime, token: str) -> RunState:
    if not runtime.redis_url:
        raise RuntimeError("the worker runtime has no redis_url; start workers with `deepthread worker`")
    holder = {"state": state}

    async def emit(event: RunEvent) -> None:
        # Redis writes are sub-millisecond; doing them inline keeps event order exact.
        was_open = not holder["state"].status.finished
        holder["state"] = store.apply(holder["state"], event)
        if was_open and holder["state"].status.finished and not isinstance(event, Finished):
            # Ended from outside (a forced stop): the store refuses this job's writes from now on.
            log.info(
                "run %s ended from outside (%s); this job's further events are dropped",
                run_id,
                holder["state"].reason or holder["state"].status.value,
            )

    run_id = state.run.id
    # The channel's and workspace's monthly budgets cap what this run may spend (upgrades too).
    caps = Spend(store.redis).run_caps(state.run.team, state.run.channel, runtime.agent.caps)
    async_redis = connect_async(runtime.redis_url)  # a Redis restart mid-run is waited out, not fatal
    heartbeat = asyncio.create_task(_heartbeat(async_redis, run_id, token, runtime.lock_seconds))
    alive = await async_redis.get(keys.alive(run_id))
    try:
        async with anthropic_client(runtime) as client:
            await research(
                task_for(state, runtime, upgraded_profile(store.redis, run_id), prior_of(store, state), caps),
                runtime.agent,
                anthropic=client,
                emit=emit,
                backend=RunBackend(
                    results=RedisResultStore(async_redis, run_id),
                    checkpoints=RedisCheckpointStore(async_redis, run_id),
                    request_log=RedisRequestLog(async_redis, run_id),
                    control=RedisRunControl(async_redis, run_id, caps),
                ),
                registry=SourceRegistry(state.sources.values()),
                sections=state.sections,
                active_until=float(alive) if alive else None,
                workspace=runtime.workspace_for(state.run) if runtime.workspace_for else None,
                workspace_search=runtime.search_for(state.run) if runtime.search_for else None,
            )
        await RedisCheckpointStore(async_redis, run_id).clear()
    finally:
        heartbeat.cancel()
        await asyncio.gather(heartbeat, return_exceptions=True)
        await async_redis.delete(keys.lock(run_id))
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
    runtime = current()
    token = job.id if job is not None else "inline"
    # Another live job holds this run (a duplicate from recovery): leave it alone.
    if not redis.set(keys.lock(run_id), token, nx=True, ex=max(1, int(runtime.lock_seconds))):
        log.info("run %s is held by another job; this one exits", run_id)
        return "held"
    # Everything alive now (modules, schemas) lives as long as the process: take it out of the
    # collector's view, so a full collection mid-run scans only the run's own objects
    # (measured: max event-loop pause 150 ms → 33 ms over 1,000 turns, bench/loop_lag.py).
    gc.freeze()
    if state.run.plan_first and not state.approved_by:  # plan first: draft the plan, spend nothing more
        from .planning import plan_run

        try:
            return plan_run(store, state, runtime).status.value
        except Exception:
            log.exception("run %s: drafting its plan crashed", run_id)
            failed = store.mark_failed(run_id, "drafting the plan failed; ask again")
            record_spend(redis, failed)
            return failed.status.value
        finally:
            redis.delete(keys.lock(run_id))
    try:
        state = asyncio.run(run_agent(store, state, runtime, token))
    except Exception as exc:
        log.exception("run %s crashed", run_id)
        state = store.mark_failed(
            run_id, f"internal error ({type(exc).__name__}); the operator can find details in the worker log"
        )
    record_spend(redis, state)
    return state.status.value
