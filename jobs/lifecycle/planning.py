"""Plan first: the job that drafts a run's plan, and the plan's life until someone approves it.

A plan-first run's first job drafts the plan (one model request, agent/planning.py) and stops: the
run is `planned` and nothing more is spent. Approving it (the requester or an admin) queues the
research, which starts from the approved plan; a thread reply before that asks for a new plan; a
plan nobody approves within its time ends the run as stopped, with a note saying so. The run's
status only moves forward: queued → planned → running → ended.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import cast

from redis import Redis

from agent.config import budget_for
from agent.events import utcnow
from agent.planning import Plan, draft_plan

from ..exceptions import RunNotFound
from ..keyspace import keys
from ..keyspace.connection import text
from ..process import shared_loop
from ..records.continuation import notes_of
from ..records.models import RunState, RunStatus
from ..records.store import RunStore
from .model_client import model_client
from .queue import enqueue
from .runtime import JobRuntime

__all__ = ["approve", "expire_due", "plan_run"]

log = logging.getLogger(__name__)


def plan_run(store: RunStore, state: RunState, runtime: JobRuntime) -> RunState:
    """Draft (or redraft, with the thread's change requests) the plan and post it for approval."""
    run = state.run
    changes = [n.split(": ", 1)[-1] for n in notes_of(store, run.id)]

    async def draft() -> Plan:
        async with model_client(runtime) as client:
            return await draft_plan(
                client,
                runtime.agent,
                question=run.question,
                constraints=run.constraints,
                budget=budget_for(run.profile, runtime.agent.caps),
                changes=changes,
            )

    plan = shared_loop.run_coroutine(draft())
    if store.get(run.id).approved_by:
        return store.get(run.id)  # approved while this draft was made: the approved plan stands
    expires = utcnow() + timedelta(seconds=runtime.plan_expiry_seconds)
    planned = store.propose_plan(run.id, plan, expires)
    store.redis.zadd(keys.PLANS_DUE, {run.id: expires.timestamp()})
    log.info("run %s: plan posted for approval (%d changes asked)", run.id, len(changes))
    return planned


def approve(redis: Redis, run_id: str, by: str) -> RunState | None:
    """Approve the plan and queue the research; None when it is not awaiting approval (expired, ended,
    already approved)."""
    store = RunStore(redis)
    state = store.approve(run_id, by)
    if state is None:
        return None
    redis.zrem(keys.PLANS_DUE, run_id)
    enqueue(redis, state.run, stage="approved")
    return state


def expire_due(redis: Redis) -> list[str]:
    """End every plan whose time ran out unapproved; returns their run ids."""
    store = RunStore(redis)
    seconds, micros = redis.time()
    ended = []
    due = cast(list[bytes], redis.zrangebyscore(keys.PLANS_DUE, "-inf", seconds + micros / 1e6))
    for raw in due:
        run_id = text(raw)
        redis.zrem(keys.PLANS_DUE, run_id)
        try:
            state = store.get(run_id)
        except RunNotFound:
            continue
        if state.status != RunStatus.planned or state.approved_by:
            continue
        minutes = (
            max(1, round((state.plan_expires_at - state.updated_at).total_seconds() / 60))
            if (state.plan_expires_at and state.updated_at)
            else None
        )
        within = f" within {minutes} min" if minutes else " in time"
        store.finish(
            run_id,
            RunStatus.stopped,
            f"the plan was not approved{within}, so nothing was researched; ask again to start over",
        )
        ended.append(run_id)
        log.info("run %s: its plan expired unapproved", run_id)
    return ended
