"""A Redis read cut short by an exception (RQ's StopRequested, raised by SIGTERM into a worker's
BLPOP; a job's timeout; Ctrl-C) must not leave its connection in the pool with the reply still to
come: the next command on it would read that reply as its own, and a dead BLPOP would pop a job.
Generated over every topology `connect()` builds and every exception that cuts a read short, with a
real redis-server and real `redis-server --sentinel` (found by bench.soak: redis-py's sync Sentinel
connection alone reads with disconnect_on_error=False)."""
from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from rq.exceptions import StopRequested
from rq.timeouts import JobTimeoutException

from jobs.keyspace.connection import connect
from tests.processes import SentinelTopology


class Cut(BaseException):
    """Any BaseException a signal handler may raise (not an Exception: nothing catches it on the way)."""


INTERRUPTS = [StopRequested, JobTimeoutException, KeyboardInterrupt, Cut]


@pytest.fixture(scope="module")
def sentinel_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    topology = SentinelTopology(Path(tmp_path_factory.mktemp("sentinel"))).start()
    yield topology.url
    topology.stop()


@pytest.fixture(params=["single", "sentinel"])
def url(request: pytest.FixtureRequest, redis_server: str) -> str:
    return f"{redis_server}/0" if request.param == "single" else request.getfixturevalue("sentinel_url")


@pytest.mark.parametrize("interrupt", INTERRUPTS, ids=lambda e: e.__name__)
def test_a_blocking_read_cut_short_leaves_no_reply_behind(url: str, interrupt: type[BaseException]) -> None:
    client, other = connect(url), connect(url)
    queue, key = f"queue-{uuid.uuid4().hex}", f"key-{uuid.uuid4().hex}"
    client.set(key, "mine")

    def cut(*_: object) -> None:
        raise interrupt()

    previous = signal.signal(signal.SIGALRM, cut)
    signal.setitimer(signal.ITIMER_REAL, 0.3)  # while the BLPOP waits on the server
    try:
        with pytest.raises(interrupt):
            client.blpop([queue], timeout=5)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

    other.lpush(queue, "job")  # a job arrives, as a hand-back's enqueue pushes one
    time.sleep(0.2)
    assert client.get(key) == b"mine", "the next command read its own reply, not the cut BLPOP's"
    assert other.lrange(queue, 0, -1) == [b"job"], "no dead BLPOP took the job"
