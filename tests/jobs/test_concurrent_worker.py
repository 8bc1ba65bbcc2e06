"""ConcurrentWorker (jobs/workers/concurrent_worker.py) carries many RQ jobs at once in one process, each
in a thread of its own whose coroutine runs on the one shared loop, and RQ still records every
job's end: finished with its return value, failed with its error, timed out by its own timer.

A real redis-server and a real RQ queue; the worker runs in burst mode from plain sync test code,
as `deepthread worker` runs it. The job functions are in tests/jobs/concurrent_jobs.py (RQ imports
them by name)."""

from __future__ import annotations

import gc
import os
import signal
import threading
import uuid
from collections.abc import Iterator

import pytest
from redis import Redis
from rq.job import Job, JobStatus
from rq.queue import Queue
from rq.results import Result

from agent import offload
from jobs.process import shared_loop
from jobs.workers.concurrent_worker import ConcurrentWorker
from tests.jobs import concurrent_jobs


@pytest.fixture(autouse=True)
def worker_process_state() -> Iterator[None]:
    """What ConcurrentWorker.work changes in this (the test's) process, put back afterwards: RQ's
    SIGINT/SIGTERM handlers, the frozen garbage-collector generation, the pool and the shared loop."""
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    yield
    for number, handler in handlers.items():
        signal.signal(number, handler)
    gc.unfreeze()
    offload.use_threads()
    shared_loop.install(None)


@pytest.fixture
def queue(redis: Redis) -> Queue:
    return Queue(f"concurrent-{uuid.uuid4().hex[:8]}", connection=redis)


def work_in_burst(queue: Queue, runs: int = 3) -> bool:
    worker = ConcurrentWorker([queue], connection=queue.connection, runs=runs)
    return worker.work(burst=True)


def ended(job: Job) -> Result:
    result = job.latest_result()
    assert result is not None, f"RQ recorded no result for job {job.id} (status {job.get_status()})"
    return result


def test_three_jobs_run_at_once_in_threads_of_this_process_on_one_shared_loop(
    queue: Queue, redis_url: str, redis: Redis
) -> None:
    key = f"together:{uuid.uuid4().hex}"
    jobs = [queue.enqueue(concurrent_jobs.wait_together, redis_url, key, 3) for _ in range(3)]

    assert work_in_burst(queue, runs=3) is True

    reports = []
    for job in jobs:
        assert job.get_status() == JobStatus.FINISHED
        result = ended(job)
        assert result.type == Result.Type.SUCCESSFUL
        reports.append(result.return_value)
    # Each job saw all three counted in: none could finish before the last one started.
    assert [report["seen"] for report in reports] == [3, 3, 3]
    # In this process, each in a thread of its own (alive at once, so their idents are distinct),
    # none of them the main thread, and all their coroutines on the one shared loop's thread.
    assert {report["pid"] for report in reports} == {os.getpid()}
    job_threads = {report["thread"] for report in reports}
    assert len(job_threads) == 3 and threading.main_thread().ident not in job_threads
    loop_threads = {report["loop_thread"] for report in reports}
    assert len(loop_threads) == 1 and not loop_threads & job_threads
    assert all(report["shared"] for report in reports)
    # RQ's registries say the same; the worker put the process back as it found it.
    assert set(queue.finished_job_registry.get_job_ids()) == {job.id for job in jobs}
    assert queue.started_job_registry.get_job_ids() == []
    assert shared_loop.shared() is None and not offload.pooled()


def test_burst_mode_returns_only_after_the_jobs_still_running_have_ended(queue: Queue) -> None:
    # One job, three slots: execute_job returns at once, the next dequeue finds the queue empty
    # and burst mode ends the loop while the job is still sleeping. teardown must wait for it.
    job = queue.enqueue(concurrent_jobs.sleep_then_return, 2.0, "done")

    assert work_in_burst(queue, runs=3) is True

    assert job.get_status() == JobStatus.FINISHED
    assert ended(job).return_value == "done"
    assert queue.started_job_registry.get_job_ids() == []


def test_a_job_past_its_timeout_is_failed_by_rq_and_a_job_queued_after_it_still_runs(
    queue: Queue, redis_url: str, redis: Redis
) -> None:
    marker = f"wound-down:{uuid.uuid4().hex}"
    sleeper = queue.enqueue(concurrent_jobs.sleep_long, redis_url, marker, job_timeout=2)
    follower = queue.enqueue(concurrent_jobs.after_failed, redis_url, sleeper.id, marker)

    assert work_in_burst(queue, runs=3) is True

    assert sleeper.get_status() == JobStatus.FAILED
    result = ended(sleeper)
    assert result.type == Result.Type.FAILED
    assert "JobTimeoutException" in (result.exc_string or ""), result.exc_string
    assert sleeper.id in queue.failed_job_registry.get_job_ids()
    # The job queued after it ran on the same loop, saw it recorded failed, and by then the timed-out
    # run's task had been cancelled and had finished winding down (its cancellation handler ran).
    assert follower.get_status() == JobStatus.FINISHED
    assert ended(follower).return_value == {"status": "failed", "marker": "cancelled"}
    assert redis.get(marker) == b"cancelled"
    assert queue.started_job_registry.get_job_ids() == []


def test_a_job_that_raises_is_failed_with_its_error_and_the_others_finish(
    queue: Queue, redis_url: str, redis: Redis
) -> None:
    key = f"together:{uuid.uuid4().hex}"
    first = queue.enqueue(concurrent_jobs.wait_together, redis_url, key, 2)
    failing = queue.enqueue(concurrent_jobs.raise_inside, "the page could not be read")
    second = queue.enqueue(concurrent_jobs.wait_together, redis_url, key, 2)

    assert work_in_burst(queue, runs=3) is True

    assert failing.get_status() == JobStatus.FAILED
    result = ended(failing)
    assert result.type == Result.Type.FAILED
    assert "ValueError: the page could not be read" in (result.exc_string or ""), result.exc_string
    assert failing.id in queue.failed_job_registry.get_job_ids()
    for job in (first, second):
        assert job.get_status() == JobStatus.FINISHED
        assert ended(job).return_value["seen"] == 2
    assert set(queue.finished_job_registry.get_job_ids()) == {first.id, second.id}
    assert queue.started_job_registry.get_job_ids() == []


def test_a_full_worker_keeps_its_own_record_and_its_maintenance_while_it_waits_for_a_slot(
        queue: Queue, monkeypatch: pytest.MonkeyPatch) -> None:
    """While every slot is taken RQ's loop is not running: the worker must still renew its own record
    (which lives worker_ttl + 60 s) and run the maintenance round (sweeps, due hard stops)."""
    from jobs.workers import concurrent_worker

    monkeypatch.setattr(concurrent_worker, "SLOT_WAIT_SECONDS", 0.05)
    monkeypatch.setattr(concurrent_worker, "SLOT_WAIT_HEARTBEAT_SECONDS", 0.0)
    worker = ConcurrentWorker([queue], connection=queue.connection, runs=1, maintenance_interval=0)
    worker._active["busy"] = (None, None, None)  # type: ignore[assignment]  # one slot, taken
    assert worker.last_heartbeat is None and worker.last_cleaned_at is None

    def free_the_slot() -> None:
        with worker._changed:
            worker._active.clear()
            worker._changed.notify_all()

    timer = threading.Timer(0.5, free_the_slot)
    timer.start()
    worker._wait_for_a_slot()
    timer.join()
    assert worker.last_heartbeat is not None, "the worker's own record was renewed while it was full"
    assert queue.connection.ttl(worker.key) > 0
    assert worker.last_cleaned_at is not None, "and the maintenance round ran"
