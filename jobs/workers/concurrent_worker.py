"""A worker process that carries many research runs at once (DEEPTHREAD_WORKER_RUNS > 1).

A run spends almost all its hour waiting on the model: a process per run (RQ's forking worker)
holds ~125 MB to wait. This worker is RQ's own, on its extension points: it dequeues as RQ does,
and each run is still an RQ job, started in RQ's registries, heartbeaten, timed out, finished or
failed by RQ's own code (`perform_job`), so `rq info` and RQ's dashboard stay true. What changes
is where a job runs: in a thread of this process, whose coroutine goes to the one event loop every
run shares (jobs/process/shared_loop.py). CPU-heavy work (page extraction, charts) goes to a process pool
(agent/offload.py), so one run's page never delays another run's heartbeat.

A crash of this process loses no run: each is recovered from its checkpoint by the sweep, as a
dead work-horse's is. SIGTERM asks every run to hand itself back (jobs/process/running.py) and waits for
them to do so before exiting. RQ's stop command for one job (what a forced stop sends: a stop's grace
run out, the workspace uninstalled or its token revoked) kills a forking worker's work-horse; here it
stops that job's run at once (jobs/process/running.py), its model request in flight the last, and RQ
records the job stopped as it would a killed horse's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import importlib
import logging
import sys
import threading
import time
from typing import Any

from rq.command import parse_payload
from rq.exceptions import StopRequested
from rq.executions import Execution
from rq.job import Job
from rq.queue import Queue
from rq.timeouts import TimerDeathPenalty
from rq.utils import now
from rq.worker import BaseWorker, WorkerStatus

from agent import offload, sdk_warmup, tls

from ..process import running, shared_loop
from ..process.background import Stop
from ..process.loop_lag import watch_lag
from .worker import Upkeep

__all__ = ["ConcurrentWorker"]

log = logging.getLogger(__name__)

# RQ's heartbeat for each running job, in one pipeline for all of them, every four minutes (RQ's
# default is 30 s): five commands per job each time, most of an idle run's Redis traffic. RQ counts
# a job abandoned when its heartbeat (this plus 60 s) lapses; a dead run is found sooner by its
# lease (jobs/control/ownership.py) and resumed by the sweep, so this only keeps RQ's registries true.
JOB_MONITORING_SECONDS = 240
# What a run loads on first use (lazy exports, tools, and what the HTTP clients import on their first
# request): loaded at start-up instead, as is the process's TLS context (agent/tls.py, ~50 ms).
ENGINE_MODULES = (
    "jobs.workers.executor",
    "agent.run",
    "agent.loop",
    "agent.tools.read_page",
    "agent.tools.extract",
    "httpcore",
    "httpcore2",
    "h11",
    "anyio._backends._asyncio",
)
# While every slot is taken: how often the main thread looks up, and renews the worker's own record
# (it lives worker_ttl + 60 s).
SLOT_WAIT_SECONDS = 1.0
SLOT_WAIT_HEARTBEAT_SECONDS = 15.0
# How long SIGTERM waits for the runs to hand themselves back (each stops between its awaits).
HAND_BACK_SECONDS = 20.0
# How long a thread holds the interpreter's lock while another waits for it (Python's default: 5 ms).
# The loop gives the lock up at every socket call and waits this long to have it back whenever a job
# thread (starting a run, writing its state) holds it: at 5 ms, a few handoffs held every run's timers
# 60 ms while runs started.
SWITCH_INTERVAL_SECONDS = 0.001
# Runs start at most one per this long: fifty taken at once (a queue waiting for a fresh worker) each
# set up their research on the shared loop in the same moment, and held every run's timers for up
# to half a second; spaced, the fiftieth starts 2.5 s after the first.
START_SPACING_SECONDS = 0.1


class ConcurrentWorker(Upkeep, BaseWorker):
    """RQ's worker, running up to `runs` jobs at once, each in a thread of its own."""

    # RQ's timeout by a timer thread (a signal reaches only the main thread).
    death_penalty_class = TimerDeathPenalty

    def __init__(self, *args: Any, runs: int = 1, **kwargs: Any) -> None:
        kwargs.setdefault("job_monitoring_interval", JOB_MONITORING_SECONDS)
        super().__init__(*args, **kwargs)
        self.runs = max(1, runs)
        self._active: dict[str, tuple[Job, Execution, threading.Thread]] = {}
        self._changed = threading.Condition()
        self._dequeuing = False
        self._beating = threading.Event()
        self._stopped_jobs: set[str] = set()  # stopped by RQ's command: recorded stopped, not failed
        self._recording_failure = threading.Lock()  # RQ's own flag for that names one job at a time
        self._last_start = 0.0

    # --- RQ's extension points -------------------------------------------------------------

    def work(self, *args: Any, **kwargs: Any) -> bool:
        offload.use_processes()  # page extraction and charts off the shared loop
        # The engine, loaded now: imported by the first run, it would stall every run on the loop.
        for module in ENGINE_MODULES:
            importlib.import_module(module)
        tls.verified()
        sdk_warmup.warm_up()  # the SDK's first answers read here, not by the first runs on the shared loop
        sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
        gc.freeze()  # start-up objects live forever (jobs/workers/executor.py freezes per job when a horse runs one)
        loop = shared_loop.SharedLoop().start()
        shared_loop.install(loop)
        lag_stop = Stop()
        watching = asyncio.run_coroutine_threadsafe(watch_lag(lag_stop), loop.loop)
        beats = threading.Thread(target=self._keep_heartbeats, name="heartbeats", daemon=True)
        beats.start()
        try:
            return super().work(*args, **kwargs)
        finally:
            self._beating.set()
            beats.join(timeout=5)
            loop.call_soon(lag_stop.set)
            concurrent.futures.wait([watching], timeout=5)
            shared_loop.install(None)
            loop.stop()
            offload.use_threads()

    def execute_job(self, job: Job, queue: Queue) -> None:
        """Start the job in a thread and return as soon as there is room for another."""
        execution = self.prepare_execution(job)
        thread = threading.Thread(target=self._perform, args=(job, queue, execution), name=f"job-{job.id}", daemon=True)
        with self._changed:
            self._active[execution.id] = (job, execution, thread)
        time.sleep(max(0.0, self._last_start + START_SPACING_SECONDS - time.monotonic()))
        self._last_start = time.monotonic()
        thread.start()
        self._wait_for_a_slot()

    def _wait_for_a_slot(self) -> None:
        """Block while every slot is taken, doing what RQ's loop does between jobs meanwhile: the
        worker's own heartbeat (or it drops out of RQ's records) and the maintenance round (sweeps,
        due hard stops), so a full worker still does its share of both."""
        while True:
            with self._changed:
                if len(self._active) < self.runs or self._stop_requested:
                    return
                self._changed.wait(timeout=SLOT_WAIT_SECONDS)
                full = len(self._active) >= self.runs and not self._stop_requested
            if not full:
                return
            try:
                beat = self.last_heartbeat
                if beat is None or (now() - beat).total_seconds() >= SLOT_WAIT_HEARTBEAT_SECONDS:
                    self.heartbeat()
                if self.should_run_maintenance_tasks:
                    self.run_maintenance_tasks()
            except Exception as exc:  # Redis away: the next round tries again
                log.warning("worker %s: upkeep while full failed (%s)", self.name, exc)

    def dequeue_job_and_maintain_ttl(self, timeout: int | None, max_idle_time: int | None = None) -> Any:
        self._dequeuing = True
        try:
            if self._stop_requested:  # asked between RQ's own check and here: take no new job
                raise StopRequested()
            return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        finally:
            self._dequeuing = False

    def set_state(self, state: str, pipeline: Any = None) -> None:
        # RQ marks a worker idle while it waits for a job; this one may be carrying runs meanwhile.
        if state == WorkerStatus.IDLE and self._active:
            state = WorkerStatus.BUSY
        super().set_state(state, pipeline=pipeline)

    def _shutdown(self) -> None:
        """RQ's warm shutdown: waiting for a job ends at once; then teardown asks the runs under way to
        hand themselves back and waits for them."""
        self._stop_requested = True
        self.set_shutdown_requested_date()
        if self.scheduler:
            self.stop_scheduler()
        if self._dequeuing:
            raise StopRequested()
        with self._changed:
            self._changed.notify_all()

    def teardown(self) -> None:
        if self._stop_requested:
            # The runs are handed back here, once the loop takes no job, not in the signal handler: there
            # the main thread's BLMOVE is still blocked in Redis until the handler raises, after stopping
            # the scheduler (a join, ~1 s), and the first run's job pushed meanwhile went to that BLMOVE
            # and was dropped with its connection: in RQ's intermediate queue until RQ's cleanup and a
            # sweep (77 s in bench.soak; tests/e2e/test_worker_runs.py).
            asked = running.hand_back_all()
            if asked:
                log.info("worker %s: asking its %d running run(s) to hand themselves back", self.name, asked)
        self._wait_for_jobs(HAND_BACK_SECONDS if self._stop_requested else None)
        super().teardown()

    def handle_payload(self, message: dict[str, Any]) -> None:
        """RQ's commands (its pubsub thread): a stop for one of this worker's jobs stops that job's run;
        RQ's own handler would stop only the first job (get_current_job_id) by killing a horse there is not."""
        payload = parse_payload(message)
        if payload.get("command") in ("stop-job", "stop-execution"):
            self._stop_job(str(payload.get("job_id") or ""), payload.get("execution_id"))
            return
        super().handle_payload(message)

    def _stop_job(self, job_id: str, execution_id: str | None) -> None:
        with self._changed:
            found = [
                job
                for job, execution, _ in self._active.values()
                if job.id == job_id and execution_id in (None, execution.id)
            ]
        if not found:
            log.warning("worker %s: not working on job %s; its stop changes nothing", self.name, job_id)
            return
        with self._recording_failure:
            self._stopped_jobs.add(job_id)
        run_id = str(found[0].args[0]) if found[0].args else ""
        if running.stop(run_id):
            log.info("worker %s: job %s stopped by RQ's command; its run %s stops at once", self.name, job_id, run_id)
        else:  # not researching yet (about to start) or already ending: it ends on its own
            log.info(
                "worker %s: job %s stopped by RQ's command; its run %s is not under way", self.name, job_id, run_id
            )

    def handle_exception(self, job: Job, *exc_info: Any) -> None:
        if job.id in self._stopped_jobs:
            return  # a stop, not a crash: said once by the job (jobs/workers/executor.py), no traceback
        super().handle_exception(job, *exc_info)

    def handle_job_failure(self, job: Job, queue: Queue, *args: Any, **kwargs: Any) -> None:
        with self._recording_failure:
            if job.id in self._stopped_jobs:
                self._stopped_jobs.discard(job.id)
                self._stopped_job_id = job.id  # RQ then records it stopped, never retried
            super().handle_job_failure(job, queue, *args, **kwargs)

    def get_current_job_id(self) -> str | None:
        with self._changed:
            active = list(self._active.values())
        return active[0][0].id if active else None

    # --- ours ---------------------------------------------------------------------------------

    @property
    def active_job_ids(self) -> list[str]:
        with self._changed:
            return [job.id for job, _, _ in self._active.values()]

    def _perform(self, job: Job, queue: Queue, execution: Execution) -> None:
        try:
            self.perform_job(job, queue, execution)
        except Exception:  # perform_job records a job's failure itself; this is RQ's own bookkeeping failing
            log.exception("worker %s: job %s could not be recorded as ended", self.name, job.id)
        finally:
            with self._changed:
                self._active.pop(execution.id, None)
                idle = not self._active
                self._changed.notify_all()
            if idle:
                try:
                    self.set_state(WorkerStatus.IDLE)
                except Exception:  # the next heartbeat or job sets it again
                    log.debug("worker %s: could not record its idle state", self.name, exc_info=True)

    def _wait_for_jobs(self, timeout: float | None) -> None:
        with self._changed:
            threads = [thread for _, _, thread in self._active.values()]
        for thread in threads:
            thread.join(timeout)
        if any(thread.is_alive() for thread in threads):
            log.warning("worker %s: exiting with runs still winding down; the sweep recovers them", self.name)

    def _keep_heartbeats(self) -> None:
        """RQ's per-job heartbeat (what its forking worker does while a horse runs), for every job at once."""
        while not self._beating.wait(self.job_monitoring_interval):
            with self._changed:
                active = [(job, execution) for job, execution, _ in self._active.values()]
            if not active:
                continue
            try:
                self._beat(active)
            except Exception as exc:  # Redis away: the next beat tries again, well within the TTL
                log.warning("worker %s: heartbeat failed (%s)", self.name, exc)

    def _beat(self, active: list[tuple[Job, Execution]]) -> None:
        with self.connection.pipeline() as pipeline:
            self.heartbeat(self.job_monitoring_interval + 60, pipeline=pipeline)
            for job, execution in active:
                working = (now() - job.started_at).total_seconds() if job.started_at else 0.0
                ttl = int(self.get_heartbeat_ttl(job, working_time=working))
                execution.heartbeat(job.started_job_registry, ttl, pipeline=pipeline)
                job.heartbeat(now(), ttl, pipeline=pipeline, xx=True)
            pipeline.execute()
