"""Enqueueing runs on the RQ queue, with a timeout taken from the run's budget."""

from __future__ import annotations

import uuid

from redis import Redis
from rq import Queue
from rq.job import Job

from agent.config import budget_for

from ..keyspace import keys
from ..keyspace.connection import durably
from ..records.models import Run

# The job function, named rather than imported (RQ records a job by this name either way): the serve
# process enqueues runs and must not load the executor, the engine and the model SDK to do it.
EXECUTE = "jobs.workers.executor.execute"

# Headroom past the wall-time budget for finalization and state writes before RQ kills the job.
JOB_TIMEOUT_GRACE_SECONDS = 300


def job_timeout_for(run: Run) -> int:
    # The deep profile's wall time: an upgrade mid-run must not be cut short by RQ.
    return int(max(budget_for(run.profile).wall_seconds, budget_for("deep").wall_seconds)) + JOB_TIMEOUT_GRACE_SECONDS


def enqueue(redis: Redis, run: Run, attempt: int = 0, *, stage: str = "", resume: bool = False) -> Job:
    """Queue the run. `stage` names a later job of the same run (plan first: a redrafted plan, the
    approved research). A run queued again (`resume`: after its worker died, `attempt` > 0, or handed
    back by a worker shutting down) resumes from its checkpoint, and goes to the front of the queue:
    it has a team waiting on it already, and its budget's clock is running."""
    queue = Queue(keys.QUEUE, connection=redis)
    job_id = keys.job_id(run.id) + (f"-{stage}" if stage else "") + (f"-r{attempt}" if attempt else "")
    if resume and not attempt:  # handed back: a fresh id each time (RQ keeps finished jobs by id)
        job_id += f"-h{uuid.uuid4().hex[:8]}"

    def put() -> Job:
        redis.set(keys.current_job(run.id), job_id, ex=keys.CURRENT_JOB_TTL_SECONDS)
        return queue.enqueue(
            EXECUTE,
            run.id,
            job_id=job_id,
            job_timeout=job_timeout_for(run),
            result_ttl=keys.JOB_RESULT_TTL_SECONDS,
            failure_ttl=keys.JOB_RESULT_TTL_SECONDS,
            description=f"research run {run.id}",
            at_front=resume or attempt > 0,
        )

    # Queued again on the new primary if a failover lost it: a lost job is a run nobody works.
    return durably(redis, str(Job.key_for(job_id)), put, f"run {run.id}'s job")
