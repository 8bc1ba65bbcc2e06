"""A forget holds after a failover (real redis-servers and sentinels, tests/processes.py SentinelTopology).

Deletions acknowledged by a primary are lost when that primary is demoted (the moment the sentinels
name a new one while the old still takes writes) or dies before its replica had them: the replica
promoted in its place still holds what a person asked to be forgotten. jobs/upkeep/forgotten.py
`held` waits until a replica of the primary the sentinels name has the deletions, and deletes again
on the new primary when a failover came first."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis

from jobs import RunStore, keys
from jobs.keyspace.connection import connect
from jobs.lifecycle.runs import Runs
from jobs.records.models import Run, RunStatus
from jobs.upkeep.retention import Forgotten, Retention
from tests.processes import SentinelTopology, wait_for

TEAM, CHANNEL, THREAD = "T0FORGET", "C0FORGET", "1700000000.000100"


@pytest.fixture
def topology(tmp_path: Path) -> Iterator[SentinelTopology]:
    """Without min-replicas-to-write: the old primary takes writes in the failover's moment."""
    running = SentinelTopology(tmp_path / "redis", min_replicas_to_write=0).start()
    yield running
    running.stop()


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[SentinelTopology]:
    """As docs/operating.md asks: min-replicas-to-write 1."""
    running = SentinelTopology(tmp_path / "redis").start()
    yield running
    running.stop()


def _thread_with_a_run(client: Redis, replica_port: int) -> list[str]:
    """A finished run in the thread, on the replica too; the keys that name it."""
    runs = Runs(RunStore(client))
    run = Run(question="expense ratio VTI", team=TEAM, channel=CHANNEL, thread_ts=THREAD)
    runs.start(run)
    runs.store.finish(run.id, RunStatus.completed, "")
    named = [keys.run_state(run.id), keys.thread_runs(TEAM, CHANNEL, THREAD)]
    wait_for(lambda: Redis(port=replica_port).exists(*named) == len(named), 10, "the thread on the replica")
    return named


def _split_brain(topology: SentinelTopology) -> tuple[Redis, Redis]:
    """The replica promoted and named by every sentinel; the old primary still a primary (as
    tests/jobs/test_failover_writes.py does it). Returns (old, new)."""
    old, new = Redis(port=topology.primary_port), Redis(port=topology.replica_port)
    new.replicaof("NO", "ONE")
    for port in topology.sentinel_ports:
        sentinel = Redis(port=port)
        sentinel.execute_command("SENTINEL", "REMOVE", topology.SERVICE)
        sentinel.execute_command("SENTINEL", "MONITOR", topology.SERVICE, "127.0.0.1", topology.replica_port, 2)
    wait_for(lambda: topology.primary()[1] == topology.replica_port, 10, "every sentinel to name the new primary")
    assert old.info("replication")["role"] == "master"
    return old, new


def test_a_forget_at_the_moment_of_a_failover_holds_after_the_old_primary_is_demoted(
    topology: SentinelTopology,
) -> None:
    client = connect(topology.url)
    named = _thread_with_a_run(client, topology.replica_port)
    client.ping()  # a pooled connection to the primary, open before the failover
    old, new = _split_brain(topology)

    def demote() -> None:  # the sentinels' correction, later: the old primary resyncs from the new
        import time

        time.sleep(1.5)
        old.replicaof("127.0.0.1", topology.replica_port)

    later = threading.Thread(target=demote, daemon=True)
    later.start()
    gone = Retention(client).forget_thread(TEAM, CHANNEL, THREAD, "forget")
    later.join(10)
    assert len(gone.runs) == 1
    assert new.exists(*named) == 0, "the deletions are on the new primary"
    wait_for(lambda: old.info("replication").get("master_link_status") == "up", 20, "the demoted primary to resync")
    assert old.exists(*named) == 0, "and stay deleted on the demoted one once it resynced"


def test_a_forget_its_primary_acknowledged_but_did_not_replicate_before_dying_is_done_again_on_the_new_one(
    topology: SentinelTopology,
) -> None:
    client = connect(topology.url)
    named = _thread_with_a_run(client, topology.replica_port)
    primary, replica = topology.primary_port, topology.replica_port
    held_back = topology.pids()[replica]
    forgotten: list[Forgotten] = []
    # The replica falls behind: stopped, its link cut, so nothing the primary acknowledges now reaches it.
    os.kill(held_back, signal.SIGSTOP)
    try:
        Redis(port=primary).client_kill_filter(_type="replica")
        forgetting = threading.Thread(
            target=lambda: forgotten.append(Retention(client).forget_thread(TEAM, CHANNEL, THREAD, "forget")),
            daemon=True,
        )
        forgetting.start()
        wait_for(lambda: Redis(port=primary).exists(*named) == 0, 10, "the primary to acknowledge the deletions")
        topology.kill_primary()
    finally:
        os.kill(held_back, signal.SIGCONT)
    assert topology.wait_for_failover(primary) == replica
    topology.revive(primary)  # back, as a replica of the new primary
    forgetting.join(90)
    assert not forgetting.is_alive() and forgotten
    assert Redis(port=replica).exists(*named) == 0, "deleted again on the new primary, which never had the deletions"
    wait_for(lambda: Redis(port=primary).exists(*named) == 0, 20, "and on its replica")
