"""The writes a run's start depends on survive the moment of a failover when two servers take writes.

A Sentinel failover promotes the replica and the sentinels name it before the old primary is told it
is a replica: a client still connected to the old one writes there, and what it wrote is lost when
that server resyncs from the new primary (found by bench.soak: a run posted in Slack, gone from
Redis, its thread left "Researching" for ever). That moment is held still here: the replica promoted
and named by every sentinel, the old primary never demoted, a client's pooled connection still on it.
Generated over each write of a run's start: its record, its continuation, its job, its messages."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from redis import Redis
from rq.job import Job

from jobs import RunStore, keys
from jobs.connection import connect, on_primary
from jobs.models import Run, RunStatus
from jobs.runs import Runs
from tests.processes import SentinelTopology, wait_for

TEAM, CHANNEL, THREAD = "T0SPLIT", "C0SPLIT", "1700000000.000100"


@pytest.fixture
def topology(tmp_path: Path) -> Iterator[SentinelTopology]:
    running = SentinelTopology(tmp_path / "redis").start()
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
