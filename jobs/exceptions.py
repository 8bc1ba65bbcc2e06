"""Every exception the job layer raises, in one place.

    Exception
    ├── KeyError
    │   └── RunNotFound   no run under this id (never created, or expired with its state)
    └── ThreadMoved       a continuation lost the race: another run already follows its parent
                          in the thread (`latest` names it)

Redis connection errors are not wrapped: connections ride out a restart (jobs/connection.py),
and what still fails reaches the worker's one handler, which marks the run failed.
"""

from __future__ import annotations

__all__ = ["RunNotFound", "ThreadMoved"]


class RunNotFound(KeyError):
    """No run under this id (never created, or expired with its state)."""


class ThreadMoved(Exception):
    """A continuation lost the race: another run already follows its parent in the thread."""

    def __init__(self, latest: str | None) -> None:
        super().__init__(latest)
        self.latest = latest
