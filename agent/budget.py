"""The budget the loop manages to, and the block that tells the model where it stands.

Simple caps for now (requests, wall time); issue 5 grows this into the full ledger.
One place, `BudgetTracker.should_finalize`, decides that exploration is over.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from .config import Budget

# Exploration ends when this share of the wall-time budget is gone, leaving room to write.
FINALIZE_AT_WALL_SHARE = 0.9


@dataclass
class BudgetTracker:
    budget: Budget
    started: float = field(default_factory=time.monotonic)
    requests: int = 0

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def requests_left(self) -> int:
        return self.budget.max_requests - self.requests

    def exhausted(self) -> str | None:
        """The limit that forbids any further request, named, or None."""
        if self.requests >= self.budget.max_requests:
            return f"request limit ({self.budget.max_requests} model requests) reached"
        if self.elapsed() >= self.budget.wall_seconds:
            return f"wall-time limit ({self.budget.wall_seconds / 60:.0f} min) reached"
        return None

    def should_finalize(self) -> str | None:
        """Why exploration must stop now (the reserve is for writing), or None."""
        if self.requests_left() <= self.budget.reserve_requests:
            return f"only {self.requests_left()} model requests left, kept for the final answer"
        if self.elapsed() >= self.budget.wall_seconds * FINALIZE_AT_WALL_SHARE:
            return f"{(self.budget.wall_seconds - self.elapsed()) / 60:.0f} min of time left"
        return None

    def block(self, sources: int, sections: list[str], finalize_reason: str | None) -> str:
        minutes = self.elapsed() / 60
        total_minutes = self.budget.wall_seconds / 60
        lines = [
            "<budget>",
            f"Model requests: {self.requests} of {self.budget.max_requests} used, {self.requests_left()} left "
            f"({self.budget.reserve_requests} kept for the final answer).",
            f"Time: {minutes:.0f} of {total_minutes:.0f} min used.",
            f"Sources registered: {sources}. Sections written: {len(sections)}"
            + (f" (latest: {sections[-1]})." if sections else "."),
        ]
        if finalize_reason:
            lines.append(
                f"FINAL TURN ({finalize_reason}): call no tools. Write your final answer now from "
                "what you have, with citations, and name what could not be established."
            )
        lines.append("</budget>")
        return "\n".join(lines)
