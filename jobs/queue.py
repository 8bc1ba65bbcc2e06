"""Enqueueing runs on the RQ queue, with a timeout taken from the run's budget."""

from __future__ import annotations

from redis import Redis
from rq import Queue
from rq.job import Job

from agent.config import budget_for

from . import keys
from .executor import execute
from .models import Run

# Headroom past the wall-time budget for finalization and state writes before RQ kills the job.
JOB_TIMEOUT_GRACE_SECONDS = 300


def job_timeout_for(run: Run) -> int:
    # The deep profile's wall time: an upgrade mid-run must not be cut short by RQ.
    return int(max(budget_for(run.profile).wall_seconds, budget_for("deep").wall_seconds)) + JOB_TIMEOUT_GRACE_SECONDS


def enqueue(redis: Redis, run: Run, attempt: int = 0, *, stage: str = "") -> Job:
    """Queue the run (again, after a crash, with attempt > 0: it resumes from its checkpoint). `stage`
    names a later job of the same run (plan first: a redrafted plan, the approved research)."""
    queue = Queue(keys.QUEUE, connection=redis)
    job_id = keys.job_id(run.id) + (f"-{stage}" if stage else "") + (f"-r{attempt}" if attempt else "")
    redis.set(keys.current_job(run.id), job_id, ex=keys.CURRENT_JOB_TTL_SECONDS)
    return queue.enqueue(
        execute,
        run.id,
        job_id=job_id,
        job_timeout=job_timeout_for(run),
        result_ttl=keys.JOB_RESULT_TTL_SECONDS,
        failure_ttl=keys.JOB_RESULT_TTL_SECONDS,
        description=f"research run {run.id}",
    )
