"""The RQ worker Deepthread runs: RQ's own, plus a sweep for runs whose worker died and for
stops whose grace ran out (serve does both too: whichever process is alive), and a shutdown
that hands a running research back instead of waiting an hour for it.

On SIGTERM RQ's warm shutdown waits for the current job, and a platform kills the process after
its grace (about 30 s) whatever it is doing. A research run lasts up to an hour, so the worker
passes the signal on to its work-horse: the job stops at once, keeps its checkpoint, lets go of
the run's lease and queues the run again at the front (jobs/workers/executor.py); the worker then exits
as RQ would, within seconds.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from typing import Any

from rq import Worker
from rq.job import Job
from rq.queue import Queue
from rq.utils import now

from ..lifecycle.runs import Runs
from ..process.metrics import metrics
from ..records.store import RunStore
from ..upkeep.recovery import sweep

log = logging.getLogger(__name__)

# RQ blocks on the queue for (worker_ttl - 15) s between maintenance rounds: keep both short
# so an idle worker notices an orphaned run within seconds, not RQ's default 7 minutes.
WORKER_TTL_SECONDS = 30
SWEEP_INTERVAL_SECONDS = 10
# RQ's own round (its registries, its dead workers, its intermediate queue: ~13 commands) at most this
# often, not at every sweep: nothing of ours waits on it, and every 10 s it was most of a worker's
# own Redis traffic (RQ's default is 10 minutes).
RQ_MAINTENANCE_SECONDS = 60.0
# RQ reads its worker's channel (stop and kill commands) in a thread that waits up to 60 s for each
# message, and redis-py 8's PubSubWorkerThread.stop() joins that thread: a warm shutdown hung up to a
# minute after its last job, past a platform's SIGTERM grace (10-30 s), and was killed. Waiting this
# long at a time bounds the shutdown; it sends Redis nothing more (the wait is on the socket).
PUBSUB_WAIT_SECONDS = 0.5


class QuickCommandChannel:
    """RQ's worker with its command channel's thread waiting at most PUBSUB_WAIT_SECONDS at a time:
    every worker of ours, and any RQ worker a test or bench runs in burst mode."""

    connection: Any
    # RQ's, for its command channel
    pubsub: Any
    pubsub_thread: Any
    pubsub_channel_name: str
    handle_payload: Callable[[dict[str, Any]], None]
    _pubsub_exception_handler: Callable[..., None]

    def subscribe(self) -> None:
        """RQ's subscription to this worker's command channel, its thread waiting at most
        PUBSUB_WAIT_SECONDS at a time, so that it ends that soon once the worker stops."""
        log.info("worker %s: subscribing to channel %s", getattr(self, "name", "?"), self.pubsub_channel_name)
        self.pubsub = self.connection.pubsub()
        self.pubsub.subscribe(**{self.pubsub_channel_name: self.handle_payload})
        self.pubsub_thread = self.pubsub.run_in_thread(
            sleep_time=PUBSUB_WAIT_SECONDS, daemon=True, exception_handler=self._pubsub_exception_handler
        )


class Upkeep(QuickCommandChannel):
    """What both of our worker classes add to RQ's: the sweeps in its maintenance round (and
    `maintenance` callbacks, e.g. the bot's retention round), and `on_shutdown` callbacks run at
    the first SIGTERM (e.g. to turn the health check unready)."""

    connection: Any
    last_cleaned_at: Any  # RQ's: when its maintenance round last ran

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.on_shutdown: list[Callable[[], object]] = []
        self.maintenance: list[Callable[[], object]] = []
        self.in_horse: list[Callable[[], object]] = []
        self._rq_maintained: float | None = None

    def run_maintenance_tasks(self) -> None:
        if self._rq_maintained is None or time.monotonic() - self._rq_maintained >= RQ_MAINTENANCE_SECONDS:
            super().run_maintenance_tasks()  # type: ignore[misc]
            self._rq_maintained = time.monotonic()
        else:
            self.last_cleaned_at = now()  # RQ's clock for the next round: ours come every SWEEP_INTERVAL
        try:
            sweep(self.connection)
            metrics().sweeps.labels(outcome="done").inc()
        except Exception:  # a failed sweep must not stop the worker; the next one retries
            metrics().sweeps.labels(outcome="failed").inc()
            log.exception("recovery sweep failed")
        try:
            Runs(RunStore(self.connection)).force_due_stops()
        except Exception:  # as above: the deadline stays recorded until someone carries it out
            log.exception("hard-stop check failed")
        for task in self.maintenance:
            try:
                task()
            except Exception:  # as above: the next round retries
                log.exception("maintenance task %s failed", getattr(task, "__name__", task))

    def handle_warm_shutdown_request(self) -> None:
        super().handle_warm_shutdown_request()  # type: ignore[misc]
        for callback in self.on_shutdown:
            callback()


class DeepthreadWorker(Upkeep, Worker):
    """RQ's forking worker (one run per work-horse) with our sweeps and shutdown. `in_horse`
    callbacks run in each work-horse right after the fork (e.g. to close an inherited socket)."""

    def main_work_horse(self, job: Job, queue: Queue) -> None:
        for callback in self.in_horse:
            callback()
        super().main_work_horse(job, queue)

    def handle_warm_shutdown_request(self) -> None:
        super().handle_warm_shutdown_request()
        if self.horse_pid:
            log.info("worker %s: asking the running job to hand its run back", self.name)
            try:
                os.kill(self.horse_pid, signal.SIGTERM)
            except ProcessLookupError:  # the job just ended
                pass
