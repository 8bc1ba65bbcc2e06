"""The RQ job: run the agent for one Run, applying every event to run state as it happens.

One job at a time holds a run (a lease with a fencing token, jobs/control/ownership.py): its writes land
only while it holds the lease, and it stops the moment the lease is lost. A job that finds a
checkpoint resumes from it, so a worker that dies costs at most the turn it was on; a worker asked
to shut down hands its run back to the front of the queue.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from redis import Redis
from rq import get_current_job

from agent import Finished, ResearchTask, RunEvent, SourceRegistry, research
from agent.backend import RunBackend
from agent.config import Caps, budget_for
from agent.task import PriorRun
from agent.visibility import is_requester_dm

from ..budgets.reservations import RedisSpendGate
from ..budgets.spend import Spend, record_spend
from ..control import ownership
from ..control.control import RedisRunControl, upgraded_profile
from ..control.control_listener import for_this_loop
from ..control.ownership import Tenure
from ..exceptions import LeaseLost
from ..keyspace import keys
from ..keyspace.connection import connect_async
from ..lifecycle.model_client import model_client, model_limiter
from ..lifecycle.runtime import JobRuntime, current
from ..process import running, shared_loop
from ..process.background import Stop
from ..process.logcontext import log_context
from ..process.loop_lag import watch_lag
from ..process.metrics import metrics
from ..records.continuation import prior_of
from ..records.models import RunState
from ..records.store import RunStore
from ..records.stores import RedisCheckpointStore, RedisFileRefusals, RedisRequestLog, RedisResultStore, RedisSeenUrls
from ..records.workspace_settings import config_for

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
        private_sources=run.private_sources and is_requester_dm(run.channel) and not run.shared_audience,
        approved_plan=state.plan.text() if state.plan is not None and state.approved_by else "",
        budget=budget_for(profile or run.profile, caps or (runtime.agent.caps if runtime else None)),
    )


@dataclass
class _Ran:
    state: RunState
    handed_back: bool = False  # asked to shut down mid-run: the run goes back to the queue


async def run_agent(store: RunStore, state: RunState, runtime: JobRuntime, tenure: Tenure) -> _Ran:
    """Research the run under `tenure`: every write carries its fence, the lease is renewed while the
    research runs, and the research is cancelled the moment the lease is lost (LeaseLost is raised)
    or the process is asked to shut down (SIGTERM: the run is handed back, its checkpoint kept)."""
    if not runtime.redis_url:
        raise RuntimeError("the worker runtime has no redis_url; start workers with `deepthread worker`")
    holder = {"state": state}
    writing = asyncio.Lock()  # parallel tool calls emit too: one event at a time, in order

    async def emit(event: RunEvent) -> None:
        async with writing:
            was_open = not holder["state"].status.finished
            try:
                # Off the loop, so the lease keeps being renewed while a write waits out Redis.
                holder["state"] = await asyncio.to_thread(store.apply, holder["state"], event, fence=tenure.fence)
            except LeaseLost:
                raise tenure.refused() from None
            if isinstance(event, Finished) and holder["state"].status.finished:
                # Counted the moment it ends, not after the job's teardown: a `usage` asked as soon as
                # the report shows final must see it (counted once per run: execute's call adds nothing).
                await asyncio.to_thread(record_spend, store.redis, holder["state"])
        if was_open and holder["state"].status.finished and not isinstance(event, Finished):
            # Ended from outside (a forced stop): the store refuses this job's writes from now on.
            log.info(
                "run %s ended from outside (%s); this job's further events are dropped",
                run_id,
                holder["state"].reason or holder["state"].status.value,
            )

    run_id = state.run.id
    # The channel's and workspace's monthly budgets cap what this run may spend (upgrades too).
    caps = Spend(store.redis).run_caps(state.run.team, state.run.channel, runtime.agent.caps, state.run.requester)
    async_redis = connect_async(runtime.redis_url)  # a Redis restart mid-run is waited out, not fatal
    alive = await async_redis.get(keys.alive(run_id))
    if alive:  # an earlier attempt's heartbeat: this job resumes it from its checkpoint
        metrics().runs_resumed.labels(team=state.run.team or keys.NO_TEAM).inc()
    checkpoints = RedisCheckpointStore(async_redis, run_id, tenure)
    control = RedisRunControl(async_redis, run_id, caps, for_this_loop(runtime.redis_url))
    handing_back = asyncio.Event()

    # The claim check: on for the deployment (DEEPTHREAD_CLAIM_CHECK) unless the workspace's admins turned it off.
    config = config_for(store.redis, state.run.team, runtime.agent)

    async def work() -> None:
        async with model_client(runtime) as client:
            await research(
                task_for(state, runtime, upgraded_profile(store.redis, run_id), prior_of(store, state), caps),
                config,
                anthropic=client,
                emit=emit,
                backend=RunBackend(
                    results=RedisResultStore(async_redis, run_id, tenure, runtime.bulky_retention_seconds),
                    checkpoints=checkpoints,
                    request_log=RedisRequestLog(async_redis, run_id, runtime.bulky_retention_seconds),
                    control=control,
                    refusals=RedisFileRefusals(async_redis, state.run.team),
                    seen_urls=RedisSeenUrls(
                        async_redis, run_id, state.run.channel, state.run.thread_ts, team=state.run.team
                    ),
                    limiter=model_limiter(async_redis, runtime),
                    team=state.run.team or "",
                    run_id=run_id,
                    # Each request reserved against the budgets this run shares with its channel's and
                    # workspace's other runs (jobs/budgets/reservations.py).
                    spend_gate=RedisSpendGate(
                        async_redis,
                        team=state.run.team,
                        channel=state.run.channel,
                        user=state.run.requester,
                        run_id=run_id,
                    ),
                ),
                registry=SourceRegistry(state.sources.values()),
                sections=state.sections,
                active_until=float(alive) if alive else None,
                workspace=runtime.workspace_for(state.run) if runtime.workspace_for else None,
                # A channel shared with another organization gets nothing from the team's Slack (jobs/records/models.py).
                workspace_search=(
                    runtime.search_for(state.run) if runtime.search_for and not state.run.shared_audience else None
                ),
                earlier=runtime.earlier_for(state.run) if runtime.earlier_for else None,
            )
        await checkpoints.clear()

    task = asyncio.create_task(work(), name=f"research-{run_id}")
    tenure.on_lost(task.cancel)  # a job that lost the run stops at once, mid-turn if need be
    stop_keeping = Stop()
    keeper = asyncio.create_task(tenure.keep(async_redis, stop_keeping), name=f"lease-{run_id}")
    # A loop of the run's own (a work-horse) has its lateness watched here; a shared loop's is
    # watched once by its worker (jobs/workers/concurrent_worker.py).
    watching = None if shared_loop.shared() else asyncio.create_task(watch_lag(stop_keeping), name="loop-lag")

    def hand_back() -> None:
        handing_back.set()
        task.cancel()

    stopping = _on_shutdown(hand_back)
    unregister = running.register(run_id, hand_back)  # a worker carrying many runs hands each back itself
    try:
        await task
    except asyncio.CancelledError:
        if tenure.lost is not None:
            raise LeaseLost(run_id) from None
        if not handing_back.is_set():
            raise
        return _Ran(holder["state"], handed_back=True)
    finally:
        stopping()
        unregister()
        stop_keeping.set()  # between renewals, never by cancelling one mid-call (jobs/process/background.py)
        await asyncio.wait([keeper] + ([watching] if watching else []))
        await control.close()
        await async_redis.aclose()
    if tenure.lost is not None:  # lost as the work ended: whatever it wrote last was refused
        raise LeaseLost(run_id)
    return _Ran(holder["state"])


def _on_shutdown(callback: Callable[[], object]) -> Callable[[], None]:
    """Call `callback` on SIGTERM (the worker forwards its shutdown to the work-horse); returns the
    undo. Only the main thread may take signals (an in-process worker in tests does not)."""
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGTERM, callback)
    except (ValueError, RuntimeError):
        return lambda: None

    def undo() -> None:
        loop.remove_signal_handler(signal.SIGTERM)

    return undo


def execute(run_id: str) -> str:
    """RQ entry point. Returns the run's final status; never leaves a run looking alive.

    "held": another job holds the run. "lost": this job lost the run's lease to another (which
    carries on from the checkpoint). "handed back": the worker is shutting down; the run waits at
    the front of the queue for the next worker, its checkpoint kept."""
    job = get_current_job()
    redis: Redis = job.connection if job is not None else Redis()
    store = RunStore(redis)
    state = store.get(run_id)
    if state.status.finished:
        return state.status.value
    runtime = current()
    token = job.id if job is not None else f"inline-{uuid.uuid4().hex[:8]}"
    lease = ownership.acquire(redis, run_id, token, runtime.lock_seconds)
    if lease is None:  # a duplicate from recovery, while another live job holds the run
        log.info("run %s is held by another job; this one exits", run_id)
        return "held"
    tenure = Tenure(lease, runtime.lock_seconds)
    # Everything alive now (modules, schemas) lives as long as the process: take it out of the
    # collector's view, so a full collection mid-run scans only the run's own objects
    # (measured: max event-loop pause 150 ms → 33 ms over 1,000 turns, bench/loop_lag.py). A worker
    # carrying many runs froze once at start-up: freezing now would pin other runs' garbage for good.
    if shared_loop.shared() is None:
        gc.freeze()
    if state.run.plan_first and not state.approved_by:  # plan first: draft the plan, spend nothing more
        from ..lifecycle.planning import plan_run

        try:
            return plan_run(store, state, runtime).status.value
        except Exception:
            log.exception("run %s: drafting its plan crashed", run_id)
            failed = store.mark_failed(run_id, "drafting the plan failed; ask again")
            record_spend(redis, failed)
            return failed.status.value
        finally:
            ownership.release(redis, lease)  # only our own lease: another job may hold the run by now
    try:
        with log_context(run_id=run_id, team=state.run.team):
            log.info("run %s: researching (job %s)", run_id, tenure.fence)
            ran = shared_loop.run_coroutine(run_agent(store, state, runtime, tenure))
            log.info("run %s: %s", run_id, ran.state.status.value)
        if ran.handed_back:
            from ..lifecycle.queue import enqueue  # the queue names this module's entry point

            ownership.release(redis, lease)  # before queueing, so the next job finds the run free
            enqueue(redis, ran.state.run, resume=True)
            log.info("run %s: handed back at shutdown; queued at the front to resume from its checkpoint", run_id)
            return "handed back"
        state = ran.state
    except LeaseLost:
        log.warning("run %s: another job holds it now (this one's lease lapsed); this job stopped", run_id)
        return "lost"
    except Exception as exc:
        log.exception("run %s crashed", run_id)
        try:
            state = store.mark_failed(
                run_id,
                f"internal error ({type(exc).__name__}); the operator can find details in the worker log",
                fence=lease.fence,
            )
        except LeaseLost:
            return "lost"
    finally:
        ownership.release(redis, lease)
    record_spend(redis, state)
    return state.status.value
