"""What a forget or a maintenance round deleted, and the sentence that says so."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Forgotten"]


@dataclass
class Forgotten:
    """What a forget or a round deleted."""

    runs: list[str] = field(default_factory=list)
    keys: int = 0
    threads: int = 0
    stopped: list[str] = field(default_factory=list)  # active runs stopped first
    kept_active: list[str] = field(default_factory=list)  # active runs the round left alone

    def add(self, other: Forgotten) -> None:
        self.runs += other.runs
        self.keys += other.keys
        self.threads += other.threads
        self.stopped += other.stopped
        self.kept_active += other.kept_active

    def summary(self) -> str:
        """What went, in a sentence (`forget this thread`, `deepthread forget`)."""
        if not self.runs and not self.keys:
            return "Nothing was stored for that, so nothing was deleted."
        runs = f"{len(self.runs)} run{'s' if len(self.runs) != 1 else ''}"
        threads = f"{self.threads} thread{'s' if self.threads != 1 else ''}"
        stopped = f" ({len(self.stopped)} stopped first)" if self.stopped else ""
        return (
            f"Deleted {runs}{stopped} in {threads}: {self.keys} stored record{'s' if self.keys != 1 else ''} "
            "(questions, reports, sources, page and file texts, request logs, the thread's memory and settings). "
            "The workspace's spend totals keep their sums."
        )
