"""Every exception the job layer raises, in one place.

    Exception
    ├── KeyError
    │   └── RunNotFound   no run under this id (never created, or expired with its state)
    ├── ThreadMoved       a continuation lost the race: another run already follows its parent
    │                     in the thread (`latest` names it)
    ├── LeaseLost         this job no longer holds the run (another took it over, or the lease
    │                     lapsed): its write was refused and it must stop working the run
    └── JobStopped        RQ's stop command reached the job in a worker carrying many runs: it
                          ended at once, as a killed work-horse does, and RQ records it stopped

Redis connection errors are not wrapped: connections ride out a restart (jobs/connection.py),
and what still fails reaches the worker's one handler, which marks the run failed.
"""

from __future__ import annotations

__all__ = ["JobStopped", "LeaseLost", "RunNotFound", "ThreadMoved"]


class RunNotFound(KeyError):
    """No run under this id (never created, or expired with its state)."""


class ThreadMoved(Exception):
    """A continuation lost the race: another run already follows its parent in the thread."""

    def __init__(self, latest: str | None) -> None:
        super().__init__(latest)
        self.latest = latest


class LeaseLost(Exception):
    """This job no longer holds the run's lease: its write was refused (jobs/control/ownership.py)."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id}: another job holds it now; this one stops")
        self.run_id = run_id


class JobStopped(Exception):
    """RQ's stop command for this job (jobs/workers/concurrent_worker.py): the run's work ended at once."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id}: its job was stopped (RQ's stop command); the run's work ended at once")
        self.run_id = run_id
