"""The RQ worker Deepthread runs: RQ's own, plus a sweep for runs whose worker died and for
stops whose grace ran out (serve checks those too: an idle worker or serve, whichever is alive)."""

from __future__ import annotations

import logging

from rq import Worker

from .metrics import metrics
from .recovery import sweep
from .runs import Runs
from .store import RunStore

log = logging.getLogger(__name__)

# RQ blocks on the queue for (worker_ttl - 15) s between maintenance rounds: keep both short
# so an idle worker notices an orphaned run within seconds, not RQ's default 7 minutes.
WORKER_TTL_SECONDS = 30
SWEEP_INTERVAL_SECONDS = 10


class DeepthreadWorker(Worker):
    def run_maintenance_tasks(self) -> None:
        super().run_maintenance_tasks()
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
