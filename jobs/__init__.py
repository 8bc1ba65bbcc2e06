"""Runs: records, state in Redis, the queue and the job entry point. Knows nothing about Slack."""

from __future__ import annotations

from . import keys
from .exceptions import RunNotFound
from .executor import execute
from .inline import run_inline
from .models import Run, RunState, RunStatus
from .queue import enqueue, job_timeout_for
from .runs import AsyncRuns, Continuation, Runs, Upgrade
from .runtime import JobRuntime, configure
from .store import RunStore

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
