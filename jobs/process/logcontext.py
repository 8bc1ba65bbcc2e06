"""Which run (and workspace) a log line is about: a context variable every log line reads.

The job sets it for the whole run (jobs/workers/executor.py), the surface for the event it handles and
the publisher for the run it syncs; asyncio tasks inherit it, so a line logged deep inside the
engine still names its run. bot/cli/observability.py puts it on every line (text or JSON).
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["LogContext", "current_log_context", "log_context"]


@dataclass(frozen=True)
class LogContext:
    run_id: str | None = None
    team: str | None = None


NOWHERE = LogContext()  # frozen: shared safely as the default
_CURRENT: contextvars.ContextVar[LogContext] = contextvars.ContextVar("deepthread_log_context", default=NOWHERE)


def current_log_context() -> LogContext:
    return _CURRENT.get()


@contextmanager
def log_context(*, run_id: str | None = None, team: str | None = None) -> Iterator[None]:
    """Lines logged inside name this run and workspace (a value left None keeps the outer one)."""
    outer = _CURRENT.get()
    token = _CURRENT.set(LogContext(run_id=run_id or outer.run_id, team=team or outer.team))
    try:
        yield
    finally:
        _CURRENT.reset(token)
