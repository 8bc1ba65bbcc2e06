"""Fenced run ownership (jobs/control/ownership.py) on a real redis-server: one holder at a time, each with a
higher epoch; a lease renewed and released only by its holder; every kind of job write refused once
its lease is not the run's; a holder that cannot renew gives up on its own; progress resets the
recovery count; a resumed run goes to the front of the queue."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from rq import Queue

from agent import Progress, SectionWritten
from agent.results import Locator, StoredResult
from jobs import Run, Runs, RunStore, keys
from jobs.control import ownership
from jobs.control.ownership import Tenure
from jobs.exceptions import LeaseLost
from jobs.keyspace.connection import connect_async
from jobs.lifecycle.queue import enqueue
from jobs.records.stores import RedisCheckpointStore, RedisResultStore


def started(redis: Redis, question: str = "fees of VTI?") -> str:
    return Runs(RunStore(redis)).start(Run(question=question)).run.id


def test_one_holder_at_a_time_and_each_new_holder_has_a_higher_epoch(redis: Redis) -> None:
    run_id = started(redis)
    first = ownership.acquire(redis, run_id, "job-a", 30)
    assert first is not None and first.epoch == 1
    assert ownership.acquire(redis, run_id, "job-b", 30) is None, "held: nobody else gets it"
    assert ownership.holder(redis, run_id) == first.fence == "1:job-a"
    assert ownership.release(redis, first)
    second = ownership.acquire(redis, run_id, "job-b", 30)
    assert second is not None and second.epoch == 2


def test_only_the_holder_renews_or_releases_its_lease(redis: Redis, redis_url: str) -> None:
    run_id = started(redis)
    old = ownership.acquire(redis, run_id, "job-a", 0.05)
    assert old is not None
    time.sleep(0.1)  # it lapses
    new = ownership.acquire(redis, run_id, "job-b", 30)
    assert new is not None

    async def renewals() -> tuple[bool, bool]:
        client = connect_async(redis_url)
        try:
            return await ownership.renew(client, old, 30), await ownership.renew(client, new, 30)
        finally:
            await client.aclose()

    assert asyncio.run(renewals()) == (False, True), "compare-and-expire: the lapsed holder cannot revive it"
    assert not ownership.release(redis, old), "compare-and-delete: the old holder cannot free the new one's run"
    assert ownership.holder(redis, run_id) == new.fence
    assert redis.get(keys.alive(run_id)) is not None, "a renewal notes how far the run got"


# --- every job write, under a stale lease ------------------------------------------------------------
# Two ways a job's lease stops being the run's: it lapsed (nobody holds the run yet), or it lapsed and
# a new job took the run. Every kind of write the job makes must be refused in both.


def _state_event(redis: Redis, run_id: str, fence: str) -> Callable[[], Any]:
    store = RunStore(redis)
    return lambda: store.apply(store.get(run_id), SectionWritten(section_id="sec1", title="Stale", body="old"),
                               fence=fence)


def _state_failure(redis: Redis, run_id: str, fence: str) -> Callable[[], Any]:
    return lambda: RunStore(redis).mark_failed(run_id, "the old job crashed", fence=fence)


WRITES: dict[str, Callable[[Redis, str, str], Callable[[], Any]]] = {
    "run-state event": _state_event,
    "run-state failure": _state_failure,
}
ASYNC_WRITES: dict[str, Callable[[AsyncRedis, str, Tenure], Awaitable[Any]]] = {
    "checkpoint save": lambda r, run_id, t: RedisCheckpointStore(r, run_id, t).save({"turn": 9}, {0: {"x": 1}}),
    "checkpoint clear": lambda r, run_id, t: RedisCheckpointStore(r, run_id, t).clear(),
    "stored result": lambda r, run_id, t: RedisResultStore(r, run_id, t).put(
        StoredResult(id="r_stale", kind="web_search", text="old", locator=Locator(what="stale"))),
}


def _stale_lease(redis: Redis, run_id: str, situation: str) -> tuple[ownership.Lease, ownership.Lease | None]:
    old = ownership.acquire(redis, run_id, "job-old", 0.05)
    assert old is not None
    time.sleep(0.1)
    new = ownership.acquire(redis, run_id, "job-new", 30) if situation == "taken over" else None
    return old, new


def _what_is_stored(redis: Redis, run_id: str) -> Any:
    state = RunStore(redis).get(run_id)
    return (state.status, [s.title for s in state.sections], state.version,
            redis.hgetall(keys.checkpoint(run_id)), redis.get(keys.result(run_id, "r_stale")))


@pytest.mark.parametrize("situation", ["lapsed", "taken over"])
@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_run_state_write_under_a_stale_lease_is_refused(redis: Redis, write: str, situation: str) -> None:
    run_id = started(redis)
    old, _new = _stale_lease(redis, run_id, situation)
    before = _what_is_stored(redis, run_id)
    with pytest.raises(LeaseLost):
        WRITES[write](redis, run_id, old.fence)()
    assert _what_is_stored(redis, run_id) == before, "nothing of the old job's write landed"


@pytest.mark.parametrize("situation", ["lapsed", "taken over"])
@pytest.mark.parametrize("write", sorted(ASYNC_WRITES))
def test_a_checkpoint_or_result_write_under_a_stale_lease_is_refused_and_stops_the_job(
        redis: Redis, redis_url: str, write: str, situation: str) -> None:
    run_id = started(redis)
    redis.hset(keys.checkpoint(run_id), "meta", '{"turn": 3}')  # the checkpoint the new job resumes from
    old, _new = _stale_lease(redis, run_id, situation)
    tenure = Tenure(old, 0.05)
    stopped: list[bool] = []
    tenure.on_lost(lambda: stopped.append(True))
    before = _what_is_stored(redis, run_id)

    async def attempt() -> None:
        client = connect_async(redis_url)
        try:
            await ASYNC_WRITES[write](client, run_id, tenure)
        finally:
            await client.aclose()

    with pytest.raises(LeaseLost):
        asyncio.run(attempt())
    assert _what_is_stored(redis, run_id) == before, "nothing of the old job's write landed"
    assert stopped == [True] and tenure.lost, "the job was told to stop"


def test_the_current_holders_writes_land_and_the_updates_stream_names_its_epoch(redis: Redis) -> None:
    run_id = started(redis)
    lease = ownership.acquire(redis, run_id, "job-a", 30)
    assert lease is not None
    store = RunStore(redis)
    store.set_messages(run_id, progress="1.1", report="1.2")  # the bot's write: no lease, no epoch
    store.apply(store.get(run_id), Progress(phase="researching", activity="reading"), fence=lease.fence)
    bot, job = [fields for _, fields in redis.xrange(keys.UPDATES_STREAM)]
    assert b"epoch" not in bot and job[b"epoch"] == b"1"
    assert store.get(run_id).phase == "researching"


def test_a_holder_that_cannot_renew_in_time_gives_up_on_its_own(redis: Redis, redis_url: str) -> None:
    run_id = started(redis)
    lease = ownership.acquire(redis, run_id, "job-a", 0.3)
    assert lease is not None
    redis.delete(keys.lock(run_id))  # as if it lapsed during a pause: the next renewal is refused

    async def keep() -> str | None:
        client = connect_async(redis_url)
        tenure = Tenure(lease, 0.3)
        try:
            await asyncio.wait_for(tenure.keep(client), 5)
        finally:
            await client.aclose()
        return tenure.lost

    assert asyncio.run(keep()) == "the lock no longer holds it"


def test_a_holder_whose_redis_stops_answering_gives_up_before_its_lease_could_lapse(redis: Redis) -> None:
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts connections, never answers: a paused Redis
    run_id = started(redis)
    lease = ownership.acquire(redis, run_id, "job-a", 0.3)
    assert lease is not None

    async def keep() -> str | None:
        silent = connect_async(f"redis://127.0.0.1:{listener.getsockname()[1]}/0", socket_timeout=10)
        tenure = Tenure(lease, 0.3)
        try:
            await asyncio.wait_for(tenure.keep(silent), 5)
        finally:
            await silent.aclose()
        return tenure.lost

    try:
        assert asyncio.run(keep()) == "Redis did not answer a renewal within the lease's lifetime"
    finally:
        listener.close()


def test_a_saved_checkpoint_is_progress_so_the_recovery_count_starts_again(redis: Redis, redis_url: str) -> None:
    run_id = started(redis)
    redis.set(keys.attempts(run_id), 4)  # four crashes so far
    lease = ownership.acquire(redis, run_id, "job-a", 30)
    assert lease is not None

    async def save() -> None:
        client = connect_async(redis_url)
        try:
            await RedisCheckpointStore(client, run_id, Tenure(lease, 30)).save({"turn": 5}, {4: {"step": 4}})
        finally:
            await client.aclose()

    asyncio.run(save())
    assert redis.get(keys.attempts(run_id)) is None
    assert redis.hget(keys.checkpoint(run_id), "step:4") == b'{"step": 4}'


def test_a_run_queued_again_goes_to_the_front_of_the_queue(redis: Redis) -> None:
    runs = Runs(RunStore(redis))
    waiting = [runs.start(Run(question=f"question {n}")).run for n in range(3)]
    for run in waiting:
        enqueue(redis, run)
    resumed = runs.start(Run(question="the run whose worker died")).run
    enqueue(redis, resumed, attempt=1, resume=True)
    handed_back = runs.start(Run(question="the run handed back at shutdown")).run
    job = enqueue(redis, handed_back, resume=True)
    ids = Queue(keys.QUEUE, connection=redis).job_ids
    assert ids[:2] == [job.id, keys.job_id(resumed.id) + "-r1"], "resumed runs first, newest first"
    assert ids[2:] == [keys.job_id(r.id) for r in waiting], "new runs keep their order behind them"


def test_a_job_just_started_is_let_take_its_lease_but_one_started_long_ago_without_it_is_swept(
        redis: Redis) -> None:
    from datetime import timedelta

    from rq.job import Job, JobStatus

    from agent.events import utcnow
    from jobs.upkeep.recovery import JOB_START_GRACE_SECONDS, sweep

    runs = Runs(RunStore(redis))
    run = runs.start(Run(question="fees of VTI?")).run
    job = enqueue(redis, run)
    job = Job.fetch(job.id, connection=redis)
    job.set_status(JobStatus.STARTED)
    job.started_at = utcnow()
    job.save()
    assert sweep(redis) == [], "starting: it takes the lease in a moment"
    job.started_at = utcnow() - timedelta(seconds=JOB_START_GRACE_SECONDS + 1)
    job.save()
    assert sweep(redis) == [run.id], "its worker died before it took the lease: queued again"
