"""Finding runs whose worker died, and queueing them again to resume from their checkpoint.

A run is orphaned when it is active, no job holds its lock, and its current job is not
waiting in the queue. Every worker sweeps at start and then periodically; the lock makes a
duplicate harmless (the second job sees the lock and exits).

That includes a run the bot recorded but never launched (serve died between the two): once
it is older than a grace period it is launched here, and serve posts its messages
(bot/publishing/orphans.py); while younger, the bot may still be launching it.
"""

from __future__ import annotations

import logging
from datetime import UTC

from redis import Redis
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from agent.events import utcnow

from ..budgets.spend import record_spend
from ..exceptions import RunNotFound
from ..keyspace import keys
from ..keyspace.connection import text
from ..lifecycle.queue import enqueue
from ..process.metrics import metrics
from ..records.models import RunState, RunStatus
from ..records.store import RunStore

log = logging.getLogger(__name__)

# A run re-queued this often and still orphaned is marked failed instead of looping forever.
MAX_ATTEMPTS = 5
# The bot launches a run right after recording it (milliseconds); one still not launched, and
# not shown in Slack, after this long was abandoned by a process that died.
UNLAUNCHED_GRACE_SECONDS = 60
WAITING = {JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.DEFERRED}
# A job takes its run's lease moments after a worker starts it (a fork, an import or two): one started
# this recently and not yet holding the lease is starting, not dead.
JOB_START_GRACE_SECONDS = 30


def _job_waiting(redis: Redis, run_id: str) -> bool:
    """The run's current job is queued, or was started moments ago and is about to take the lease."""
    job_id = redis.get(keys.current_job(run_id))
    if not job_id:
        return False
    try:
        job = Job.fetch(text(job_id), connection=redis)
    except NoSuchJobError:
        return False
    status = job.get_status()
    if status in WAITING:
        return True
    started = job.started_at
    if status == JobStatus.STARTED and started is not None:
        return (utcnow() - started.replace(tzinfo=UTC)).total_seconds() < JOB_START_GRACE_SECONDS
    return False


def _being_set_up(state: RunState) -> bool:
    """The bot recorded the run moments ago and is launching and posting it."""
    age = (utcnow() - state.run.created_at).total_seconds()
    return bool(state.run.channel) and not state.run.progress_message and age < UNLAUNCHED_GRACE_SECONDS


def sweep(redis: Redis) -> list[str]:
    """Re-queue orphaned runs; returns their ids."""
    store = RunStore(redis)
    recovered = []
    active = store.active_ids()
    # One read for every run's lease: a sweep runs every few seconds in every process, and most
    # runs are held (a command per run would be most of an idle run's Redis traffic).
    held = redis.mget([keys.lock(run_id) for run_id in active]) if active else []
    for run_id, holder in zip(active, held, strict=True):
        if holder is not None or _job_waiting(redis, run_id):
            continue
        try:
            state = store.get(run_id)
        except RunNotFound:
            continue
        if state.status.finished or _being_set_up(state):
            continue
        if state.status == RunStatus.planned and not state.approved_by:
            continue  # waiting on a person's approval, not on a worker
        # Only one sweeper re-queues a given orphan.
        if not redis.set(keys.dedupe(f"recover:{run_id}"), "1", nx=True, ex=30):
            continue
        attempt = int(redis.incr(keys.attempts(run_id)))
        if attempt > MAX_ATTEMPTS:
            failed = store.mark_failed(run_id, f"the run's worker died {MAX_ATTEMPTS} times; ask again to start afresh")
            record_spend(redis, failed)
            continue
        enqueue(redis, state.run, attempt=attempt, resume=True)
        metrics().runs_requeued.labels(team=state.run.team or keys.NO_TEAM).inc()
        recovered.append(run_id)
        log.warning(
            "run %s had no live worker; queued again to resume from its checkpoint (attempt %d)", run_id, attempt
        )
    return recovered
