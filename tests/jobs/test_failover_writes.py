"""Writes survive the moment of a failover when two servers would take writes.

A Sentinel failover promotes the replica and the sentinels name it before the old primary is told it
is a replica (~8-11 s later: a sentinel waits that long before correcting a server's role): a client
still connected to the old one writes there, and what it wrote is lost when that server resyncs from
the new primary (found by bench.soak: a run posted in Slack, gone from Redis, its thread left
"Researching" for ever; runs ended, then run again; a report posted twice).

The class is closed by the deployment: a primary with min-replicas-to-write 1 refuses every write once
its replica has left it, and jobs/keyspace/connection.py takes that refusal (NOREPLICAS) as a primary on its way
out: it asks the sentinels again and retries. Generated here over every kind of write the code makes,
sync and async. A deployment without that setting (doctor --live says so) still has the older guard,
tested below it: a run's start and end are checked on the primary the sentinels name and written there
again."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from redis.exceptions import ResponseError
from redis.sentinel import Sentinel
from rq.job import Job

from jobs import RunStore, keys
from jobs.keyspace.connection import connect, connect_async, on_primary
from jobs.lifecycle.runs import Runs
from jobs.records.models import Run, RunStatus
from tests.processes import SentinelTopology, wait_for

TEAM, CHANNEL, THREAD = "T0SPLIT", "C0SPLIT", "1700000000.000100"


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[SentinelTopology]:
    """A deployment as docs/operating.md asks: min-replicas-to-write 1."""
    running = SentinelTopology(tmp_path / "redis").start()
    yield running
    running.stop()


@pytest.fixture
def topology(tmp_path: Path) -> Iterator[SentinelTopology]:
    """A deployment without min-replicas-to-write: the old primary takes writes in that moment."""
    running = SentinelTopology(tmp_path / "redis", min_replicas_to_write=0).start()
    yield running
    running.stop()


def split_brain(topology: SentinelTopology) -> tuple[Redis, Redis]:
    """The replica promoted and named by every sentinel; the old primary still a primary. Returns
    (old, new) clients straight to each server."""
    old, new = Redis(port=topology.primary_port), Redis(port=topology.replica_port)
    new.replicaof("NO", "ONE")
    for port in topology.sentinel_ports:
        sentinel = Redis(port=port)
        sentinel.execute_command("SENTINEL", "REMOVE", topology.SERVICE)
        sentinel.execute_command("SENTINEL", "MONITOR", topology.SERVICE, "127.0.0.1", topology.replica_port, 2)
    wait_for(lambda: topology.primary()[1] == topology.replica_port, 10, "every sentinel to name the new primary")
    assert old.info("replication")["role"] == "master", "the old primary still takes writes"
    return old, new


# --- a deployment with min-replicas-to-write: the old primary refuses, the write waits for the new ---

DEMOTED_AFTER_SECONDS = 1.5  # the sentinels take ~8-11 s; the moment's length does not matter here


def demote_later(topology: SentinelTopology, old: Redis, key: str, seen: list[int]) -> threading.Thread:
    """The sentinels' correction, later: note whether `key` reached the old primary in that moment,
    then make it a replica of the new one (which has had no replica, and so no write, until then)."""

    def demote() -> None:
        import time

        time.sleep(DEMOTED_AFTER_SECONDS)
        seen.append(old.exists(key))
        old.replicaof("127.0.0.1", topology.replica_port)

    thread = threading.Thread(target=demote, daemon=True)
    thread.start()
    return thread


def _plain(redis: Redis, key: str) -> None:
    redis.set(key, "1")


def _hash(redis: Redis, key: str) -> None:
    redis.hset(key, mapping={"status": "running", "turn": 3})


def _stream(redis: Redis, key: str) -> None:
    redis.xadd(key, {"kind": "section"}, maxlen=100)


def _transaction(redis: Redis, key: str) -> None:
    with redis.pipeline(transaction=True) as pipe:
        pipe.set(key, "1").expire(key, 60).incr(key + ":n")
        pipe.execute()


def _watched(redis: Redis, key: str) -> None:
    """A compare-and-set, as RunStore.write does: WATCH, read, MULTI, write; a WatchError means again."""
    from redis.exceptions import WatchError

    while True:
        with redis.pipeline() as pipe:
            try:
                pipe.watch(key)
                version = int(pipe.get(key) or 0)
                pipe.multi()
                pipe.set(key, version + 1)
                pipe.execute()
                return
            except WatchError:
                continue


def _script(redis: Redis, key: str) -> None:
    redis.register_script("redis.call('SET', KEYS[1], ARGV[1]) return 1")(keys=[key], args=["1"])


def _enqueue(redis: Redis, key: str) -> None:
    from rq import Queue

    Queue("deepthread", connection=redis).enqueue("operator.add", 1, 2, job_id=key.removeprefix("rq:job:"))


async def _async_plain(redis: AsyncRedis, key: str) -> None:
    await redis.set(key, "1")


async def _async_transaction(redis: AsyncRedis, key: str) -> None:
    async with redis.pipeline(transaction=True) as pipe:
        await pipe.set(key, "1").expire(key, 60).execute()


SYNC_WRITES: dict[str, Callable[[Redis, str], None]] = {
    "a command": _plain,
    "a hash": _hash,
    "a stream entry": _stream,
    "a transaction": _transaction,
    "a compare-and-set": _watched,
    "a Lua script": _script,
    "an RQ job": _enqueue,
}
ASYNC_WRITES: dict[str, Callable[[AsyncRedis, str], object]] = {
    "an async command": _async_plain,
    "an async transaction": _async_transaction,
}


@pytest.mark.parametrize("write", SYNC_WRITES.values(), ids=SYNC_WRITES.keys())
def test_with_min_replicas_to_write_a_write_in_that_moment_waits_for_the_new_primary(
    guarded: SentinelTopology, write: Callable[[Redis, str], None]
) -> None:
    client = connect(guarded.url)
    client.ping()  # a pooled connection to the primary, open before the failover
    key = "rq:job:split-write" if write is _enqueue else "split:write"
    old, new = split_brain(guarded)
    seen: list[int] = []
    demotion = demote_later(guarded, old, key, seen)
    write(client, key)
    demotion.join(10)
    assert new.exists(key), "the write is on the new primary"
    assert seen == [0], "the old primary refused it in that moment, so nothing was written to be lost"


@pytest.mark.parametrize("write", ASYNC_WRITES.values(), ids=ASYNC_WRITES.keys())
def test_with_min_replicas_to_write_an_async_write_in_that_moment_waits_for_the_new_primary(
    guarded: SentinelTopology, write: Callable[[AsyncRedis, str], object]
) -> None:
    key = "split:async"
    held, release = threading.Event(), threading.Event()

    async def scenario() -> None:
        redis = connect_async(guarded.url, max_connections=4)
        try:
            await redis.ping()  # its pooled connection on the old primary
            held.set()
            while not release.is_set():
                await asyncio.sleep(0.01)
            await write(redis, key)
        finally:
            await redis.aclose()

    writer = threading.Thread(target=lambda: asyncio.run(scenario()), daemon=True)
    writer.start()
    assert held.wait(10)
    old, new = split_brain(guarded)
    seen: list[int] = []
    demotion = demote_later(guarded, old, key, seen)
    release.set()
    writer.join(40)
    demotion.join(10)
    assert not writer.is_alive() and new.exists(key), "the write is on the new primary"
    assert seen == [0], "the old primary refused it in that moment"


def test_redis_py_alone_fails_the_write_a_primary_without_its_replica_refuses(guarded: SentinelTopology) -> None:
    """Why jobs/keyspace/connection.py reads NOREPLICAS itself: redis-py's own Sentinel client hands the refusal to
    the caller as an error, so the setting alone would turn lost writes into failed ones."""
    plain = Sentinel([("127.0.0.1", port) for port in guarded.sentinel_ports]).master_for(guarded.SERVICE)
    plain.ping()
    split_brain(guarded)
    with pytest.raises(ResponseError, match="NOREPLICAS"):
        plain.set("split:plain", "1")


# --- a deployment without it: a run's start and end are checked on the new primary -----------------


def start(runs: Runs) -> str:
    run = Run(question="expense ratio VTI", team=TEAM, channel=CHANNEL, thread_ts=THREAD)
    runs.start(run)
    return keys.run_state(run.id)


def launch(runs: Runs) -> str:
    run = Run(question="expense ratio VTI", team=TEAM, channel=CHANNEL, thread_ts=THREAD)
    runs.launch(run)
    return str(Job.key_for(keys.job_id(run.id)))


def attach(runs: Runs) -> str:
    run_id = runs.store.thread_run_ids(TEAM, CHANNEL, THREAD)[-1]  # recorded before the failover began
    runs.attach_messages(run_id, progress="1700000000.000200", report="1700000000.000300")
    return keys.message_run(TEAM, CHANNEL, "1700000000.000200")


WRITES: dict[str, Callable[[Runs], str]] = {"its record": start, "its job": launch, "its messages": attach}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_a_write_of_a_runs_start_reaches_the_primary_the_sentinels_name(
    topology: SentinelTopology, write: Callable[[Runs], str]
) -> None:
    client = connect(topology.url)
    runs = Runs(RunStore(client))
    if write is attach:  # the run itself was recorded (and replicated) before the failover began
        before = Run(question="expense ratio VTI", team=TEAM, channel=CHANNEL, thread_ts=THREAD)
        runs.start(before)
        wait_for(lambda: Redis(port=topology.replica_port).exists(keys.run_state(before.id)), 10, "it replicated")
    client.ping()  # a pooled connection to the primary, open before the failover
    _, new = split_brain(topology)
    key = write(runs)
    assert new.exists(key), f"{key} is on the new primary"
    assert on_primary(client, key)


def test_a_continuation_started_at_that_moment_is_linked_on_the_new_primary(topology: SentinelTopology) -> None:
    client = connect(topology.url)
    runs = Runs(RunStore(client))
    parent = Run(question="expense ratio VTI", team=TEAM, channel=CHANNEL, thread_ts=THREAD)
    runs.start(parent)
    runs.store.finish(parent.id, RunStatus.completed, "")
    wait_for(lambda: Redis(port=topology.replica_port).exists(keys.run_state(parent.id)), 10, "the parent replicated")
    client.ping()
    _, new = split_brain(topology)
    state = runs.store.get(parent.id)
    continued = runs.continue_from(state, "Now add ITOT", requester="U0ANA", author="U0ANA", event_id="Ev1")
    assert continued is not None
    run_id = continued.state.run.id
    assert new.exists(keys.run_state(run_id))
    assert RunStore(new).thread_run_ids(TEAM, CHANNEL, THREAD)[-1] == run_id


def _finished_by_its_job(store: RunStore, run_id: str) -> None:
    from agent import Finished

    store.apply(store.get(run_id), Finished(status="completed", summary="0.03%", reason=""))


ENDS: dict[str, Callable[[RunStore, str], object]] = {
    "its job's Finished event": _finished_by_its_job,
    "a stop carried out": lambda store, run_id: store.finish(run_id, RunStatus.stopped, "stopped by <@U0ANA>"),
    "a failure": lambda store, run_id: store.mark_failed(run_id, "the model service kept failing"),
}


@pytest.mark.parametrize("end", ENDS.values(), ids=ENDS.keys())
def test_a_runs_end_written_at_that_moment_reaches_the_new_primary(
    topology: SentinelTopology, end: Callable[[RunStore, str], object]
) -> None:
    """Found by bench.soak: a worker ended two runs on the old primary ~3 s into the ~11 s before it was
    demoted; the ends were lost, the runs looked alive and ran again, and a follow-up asked meanwhile
    was taken as a note."""
    client = connect(topology.url)
    runs = Runs(RunStore(client))
    run = Run(question="expense ratio VTI", team=TEAM, channel=CHANNEL, thread_ts=THREAD)
    runs.start(run)
    wait_for(lambda: Redis(port=topology.replica_port).exists(keys.run_state(run.id)), 10, "it replicated")
    client.ping()  # a pooled connection to the primary, open before the failover
    _, new = split_brain(topology)
    end(runs.store, run.id)
    assert RunStore(new).get(run.id).status.finished, "the end is on the new primary"
    assert runs.store.get(run.id).status.finished
