"""Runs: the Run record, enqueueing, the RQ job entry point, cancellation, upgrades,
checkpoints and resume, and run state in Redis (RunEvents applied, changes announced on a
stream).

The one owner of run records and their Redis keys: the bot asks through `Runs`/`AsyncRuns`,
never touching Redis itself. Uses the engine through `agent`'s exports and the storage and
control protocols it defines (kept in Redis here, jobs/records/stores.py and jobs/control/control.py), not
how it thinks. Knows nothing about Slack, and imports nothing from `bot`.

Its packages, top to bottom; each imports only those below it (tests/jobs/test_layout.py):

    workers     the research job (`execute`), the in-process run, our RQ workers
    upkeep      recovery of dead runs, retention and forgetting, the key audit, re-checks, gauges
    lifecycle   the API the bot uses (`Runs`), the queue, plan first, a job's runtime and model client
    budgets     the organization's model capacity, spend and budgets
    records     the Run record, run state and its store, the engine's stores in Redis, continuations
    control     a run's lease and fence, stops, upgrades and notes, the hard stop
    process     metrics, log context, background loops, the shared event loop, the runs carried
    keyspace    the Redis connection, every key's name and lifetime

and the ground every package may use: this module's exports and `exceptions` (the exception tree)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.lazy import lazy_exports

# Imported when first used (agent/lazy.py): the serve process asks for Runs and RunStore, and
# must not load the executor (and with it the engine and the model SDK).
if TYPE_CHECKING:
    from .exceptions import RunNotFound
    from .keyspace import keys
    from .lifecycle.queue import enqueue, job_timeout_for
    from .lifecycle.runs import AsyncRuns, Continuation, Runs, Upgrade
    from .lifecycle.runtime import JobRuntime, configure
    from .records.models import Run, RunState, RunStatus
    from .records.store import RunStore
    from .workers.executor import execute
    from .workers.inline import run_inline

__all__ = [
    "AsyncRuns",
    "Continuation",
    "JobRuntime",
    "Run",
    "RunNotFound",
    "RunState",
    "RunStatus",
    "RunStore",
    "Runs",
    "Upgrade",
    "configure",
    "enqueue",
    "execute",
    "job_timeout_for",
    "keys",
    "run_inline",
]

# RQ keeps a queued job's function by its dotted name: a run queued, or a re-check scheduled weeks
# ahead, before these modules moved into packages still names where they were.
MOVED_JOB_MODULES = {"executor": "jobs.workers.executor", "recheck": "jobs.upkeep.recheck"}

__getattr__, __dir__ = lazy_exports(__name__, __file__, moved=MOVED_JOB_MODULES)
