"""A worker asked to stop (SIGTERM: a deploy, a scale-down) gets out of RQ's teardown within a
platform's grace, both kinds of it. RQ reads its command channel in a thread that waited up to 60 s
for a message, and redis-py 8 joins that thread on the way out: when the thread had read the
unsubscribe's answer before the main thread asked it to stop (a busy machine), the worker hung up to
a minute and was killed instead (jobs/workers/worker.py, PUBSUB_WAIT_SECONDS). The race is made
certain here by letting the thread read that answer first."""

from __future__ import annotations

import threading
import time

import pytest
from redis import Redis
from rq import Queue

from jobs.workers.concurrent_worker import ConcurrentWorker
from jobs.workers.worker import DeepthreadWorker

# What a platform commonly gives a process between SIGTERM and SIGKILL (Kubernetes' default is 30 s,
# Heroku's 30): the bound here is a third of that, not a speed target. RQ's wait alone was 60 s.
GRACE_SECONDS = 10.0
# Long enough for the channel's thread to read the unsubscribe's answer and wait for the next message.
ANSWER_READ_SECONDS = 1.0


@pytest.mark.parametrize("kind", ["forking", "several runs"])
def test_a_stopping_worker_ends_its_command_channel_within_a_platforms_grace(redis_url: str, kind: str) -> None:
    redis = Redis.from_url(redis_url)
    queue = Queue("deepthread", connection=redis)
    worker = (
        DeepthreadWorker([queue], connection=redis)
        if kind == "forking"
        else ConcurrentWorker([queue], connection=redis, runs=4)
    )
    worker.subscribe()
    worker.pubsub.unsubscribe()  # the teardown's first step, its answer read before the thread is stopped
    time.sleep(ANSWER_READ_SECONDS)
    teardown = threading.Thread(target=worker.unsubscribe, daemon=True)
    teardown.start()
    teardown.join(GRACE_SECONDS)
    assert not teardown.is_alive(), f"the worker's command channel was still being stopped after {GRACE_SECONDS:.0f} s"
