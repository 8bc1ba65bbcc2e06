"""What the engine counts for operators, without knowing how it is exported.

The engine says what happened (a thread file it could not read); the process that runs it
installs `EngineCounters` that turn it into metrics (jobs.metrics). Nothing installed: nothing
counted (the terminal, tests).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["EngineCounters", "counters", "install"]


class EngineCounters(Protocol):
    def file_refused(self, reason: str) -> None:
        """A thread file could not be read: `reason` is a short label (unsupported, unavailable)."""
        ...


class _Nothing:
    def file_refused(self, reason: str) -> None:
        return None


_installed: EngineCounters = _Nothing()


def install(engine_counters: EngineCounters) -> None:
    global _installed
    _installed = engine_counters


def counters() -> EngineCounters:
    return _installed
