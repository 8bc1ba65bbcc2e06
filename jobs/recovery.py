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

from redis import Redis
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from agent.events import utcnow

from . import keys
from .connection import text
from .exceptions import RunNotFound
from .models import RunState, RunStatus
from .queue import enqueue
from .spend import record_spend
from .store import RunStore

log = logging.getLogger(__name__)

# A run re-queued this often and still orphaned is marked failed instead of looping forever.
MAX_ATTEMPTS = 5
# The bot launches a run right after recording it (milliseconds); one still not launched, and
# not shown in Slack, after this long was abandoned by a process that died.
UNLAUNCHED_GRACE_SECONDS = 60
WAITING = {JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.DEFERRED}


def _job_waiting(redis: Redis, run_id: str) -> bool:
    job_id = redis.get(keys.current_job(run_id))
    if not job_id:
        return False
    try:
        return Job.fetch(text(job_id), connection=redis).get_status() in WAITING
    except NoSuchJobError:
        return False


def _being_set_up(state: RunState) -> bool:
    """The bot recorded the run moments ago and is launching and posting it."""
    age = (utcnow() - state.run.created_at).total_seconds()
    return bool(state.run.channel) and not state.run.progress_message and age < UNLAUNCHED_GRACE_SECONDS


def sweep(redis: Redis) -> list[str]:
    """Re-queue orphaned runs; returns their ids."""
    store = RunStore(redis)
    recovered = []
    for run_id in store.active_ids():
        if redis.exists(keys.lock(run_id)) or _job_waiting(redis, run_id):
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
        enqueue(redis, state.run, attempt=attempt)
        recovered.append(run_id)
        log.warning(
            "run %s had no live worker; queued again to resume from its checkpoint (attempt %d)", run_id, attempt
        )
    return recovered
