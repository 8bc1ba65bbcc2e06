"""What RQ keeps that names a forgotten run or thread, and how it goes with them.

RQ's records are not ours to name, but they hold our data: a run's jobs (`run-{run_id}`, and its
later jobs `run-{run_id}-…`: a plan's, a retry's, one handed back) hold the run id, and a re-check's
job (`recheck-{token}`, jobs/upkeep/recheck.py) holds the thread's channel, ts and workspace in its
arguments, kept a day after it ran (`keys.JOB_RESULT_TTL_SECONDS`) and, while scheduled, for good.
Each is deleted with RQ's own `Job.delete` (its hash, its results, its place in every registry),
and any id left in a registry without its hash is taken out of every registry too.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Iterator
from typing import Protocol

from redis import Redis
from rq import Queue
from rq.exceptions import DeserializationError, NoSuchJobError
from rq.job import Job
from rq.registry import (
    BaseRegistry,
    CanceledJobRegistry,
    DeferredJobRegistry,
    FailedJobRegistry,
    FinishedJobRegistry,
    ScheduledJobRegistry,
    StartedJobRegistry,
)
from rq.results import Result

from ..keyspace import keys
from ..keyspace.connection import text


class Subject(Protocol):
    """What is forgotten (jobs/upkeep/retention.py Subject): `*` matches any."""

    @property
    def run_id(self) -> str: ...
    @property
    def team(self) -> str | None: ...
    @property
    def channel(self) -> str: ...
    @property
    def thread_ts(self) -> str: ...


__all__ = ["RECHECK_JOB_PREFIX", "delete_recheck_jobs", "delete_run_jobs", "registries"]

# A re-check's job id (jobs/upkeep/recheck.py job_id_for): named by a token, not by its thread.
RECHECK_JOB_PREFIX = "recheck-"
# RQ's keys of a job: `rq:job:{id}` (and `rq:job:{id}:dependents`, …, which are not jobs).
_JOB_KEY = Job.redis_job_namespace_prefix
_SCAN_COUNT = 1000


def registries(redis: Redis) -> list[BaseRegistry]:
    """Every registry RQ keeps for our queue: where a job id may stay after its job went."""
    queue = Queue(keys.QUEUE, connection=redis)
    return [
        cls(queue=queue)
        for cls in (
            StartedJobRegistry,
            FinishedJobRegistry,
            FailedJobRegistry,
            DeferredJobRegistry,
            ScheduledJobRegistry,
            CanceledJobRegistry,
        )
    ]


def _job_ids(redis: Redis, pattern: str) -> Iterator[str]:
    for key in redis.scan_iter(match=f"{_JOB_KEY}{pattern}", count=_SCAN_COUNT):
        job_id = text(key)[len(_JOB_KEY) :]
        if ":" not in job_id:
            yield job_id


def _delete(redis: Redis, job_ids: Iterable[str]) -> int:
    """Delete the jobs and take their ids out of the queue and every registry; returns the jobs deleted."""
    deleted = 0
    ids = list(dict.fromkeys(job_ids))
    for job_id in ids:
        try:
            Job.fetch(job_id, connection=redis).delete()
            deleted += 1
        except (NoSuchJobError, DeserializationError):
            redis.delete(Job.key_for(job_id), Result.get_key(job_id))
    if ids:
        queue = Queue(keys.QUEUE, connection=redis)
        pipe = redis.pipeline(transaction=False)
        for job_id in ids:
            queue.remove(job_id, pipeline=pipe)
            for registry in registries(redis):
                pipe.zrem(registry.key, job_id)
        pipe.execute()
        started = StartedJobRegistry(queue=queue).key  # its members are executions, `{job id}:{execution}`
        for job_id in ids:
            stale = [m for m, _ in redis.zscan_iter(started, match=f"{job_id}:*", count=_SCAN_COUNT)]
            if stale:
                redis.zrem(started, *stale)
    return deleted


def _run_job_ids(redis: Redis, run_id: str) -> list[str]:
    """Every job of the run, by its hash or by its id in a registry (the first one by its id alone)."""
    first = keys.job_id(run_id)
    found = [first, *_job_ids(redis, f"{first}-*")]
    for registry in registries(redis):  # matched by Redis itself: a registry may hold many jobs
        for member, _ in redis.zscan_iter(registry.key, match=f"{first}*", count=_SCAN_COUNT):
            job_id = text(member).split(":", 1)[0]  # the started registry's members are `{job id}:{execution}`
            if job_id == first or job_id.startswith(f"{first}-"):
                found.append(job_id)
    return found


def _recheck_job_ids(redis: Redis, subject: Subject) -> list[str]:
    """The re-check jobs of the thread, channel (`*` threads) or workspace (`*` channels) forgotten."""
    ids = list(_job_ids(redis, f"{RECHECK_JOB_PREFIX}*"))
    found = []
    for job_id, job in zip(ids, Job.fetch_many(ids, connection=redis), strict=True):
        if job is None:
            continue
        try:
            args = [str(a) if a is not None else None for a in job.args]
        except DeserializationError:
            found.append(job_id)  # unreadable: it can name no one we keep
            continue
        channel, thread_ts = (args + [None, None])[:2]
        team = args[3] if len(args) > 3 else None
        if team is None and subject.channel == "*":
            continue  # planned before keys had a team: only its channel's or thread's forget can tell it is theirs
        if subject.team not in ("*", None) and team is not None and team != subject.team:
            continue
        if fnmatch.fnmatchcase(channel or "", subject.channel) and fnmatch.fnmatchcase(
            thread_ts or "", subject.thread_ts
        ):
            found.append(job_id)
    return found


def delete_run_jobs(redis: Redis, subject: Subject) -> int:
    """RQ's records of a forgotten run: every job of it; returns the jobs deleted."""
    return _delete(redis, _run_job_ids(redis, subject.run_id)) if subject.run_id != "*" else 0


def delete_recheck_jobs(redis: Redis, subject: Subject) -> int:
    """RQ's records of a forgotten thread, channel or workspace: its re-check jobs, scheduled or run;
    returns the jobs deleted. A run's forget has none of its own."""
    if subject.run_id != "*" or (subject.team == "*" and subject.channel == "*"):
        return 0
    return _delete(redis, _recheck_job_ids(redis, subject))
