"""The budget ledger: what a run has spent, against which limits, and the one place that
decides whether it may go on exploring, must write its answer now, or must end.

Persisted with the run (a checkpoint carries it), so a resumed run keeps what it spent.
Active time is the union of model and tool intervals: parallel work is counted once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from . import defaults
from .config import Budget
from .pricing import cost_usd

if TYPE_CHECKING:
    from .usage import Usage

# What the wrap-up warning asks of the lead (task agents, who write no report, get their own).
WRITE_NOW = (
    "Write every finding not yet in the report with write_section (or revise_section) now, while tools still work."
)

Clock = Callable[[], float]
LimitKey = Literal["requests", "active", "wall", "input_tokens", "output_tokens", "cost"]


@dataclass
class Decision:
    kind: Literal["explore", "finalize", "end"]
    reason: str = ""  # names the limit: "wall-time limit (120 min)"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


class Ledger(BaseModel):
    budget: Budget
    revision: int = 1  # bumped by every upgrade; deadlines, admission and the block read the same one
    started_at: float  # epoch seconds: wall time survives a restart
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    thinking_tokens: int = 0  # of output_tokens: what the model spent thinking (counted, and billed, as output)
    cost_usd: float = 0.0
    active_closed: float = 0.0
    busy_since: float | None = None  # set while any model or tool interval is open
    open_intervals: int = 0
    corrections: dict[str, int] = Field(default_factory=dict)
    # The last main turn's size: the final answer needs about as much again, so token and
    # cost limits keep at least that much back.
    last_turn_input: int = 0
    last_turn_output: int = 0
    last_turn_cost: float = 0.0

    @classmethod
    def start(cls, budget: Budget, clock: Clock = time.time) -> Ledger:
        return cls(budget=budget, started_at=clock())

    # --- spending ---------------------------------------------------------------------
    def begin(self, now: float) -> None:
        if self.open_intervals == 0:
            self.busy_since = now
        self.open_intervals += 1

    def end(self, now: float) -> None:
        self.open_intervals = max(0, self.open_intervals - 1)
        if self.open_intervals == 0 and self.busy_since is not None:
            self.active_closed += max(0.0, now - self.busy_since)
            self.busy_since = None

    def close_after_crash(self, at: float, since: float | None = None) -> None:
        """A crash's lost time is counted up to `at` (the run's last heartbeat), never refunded:
        from the interval left open by the crash, else from `since` (when the checkpoint was
        saved, the run's last known state)."""
        start = self.busy_since if self.busy_since is not None else since
        if start is not None:
            self.active_closed += max(0.0, at - start)
        self.busy_since, self.open_intervals = None, 0

    # --- checkpoints ------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def restore(cls, snapshot: dict[str, Any]) -> Ledger:
        return cls.model_validate(snapshot)

    def charge(self, model: str, usage: Usage, count_request: bool = True, own_turn: bool = True) -> None:
        """Tokens and cost of every model call; the request limit counts main-model turns only
        (page extraction calls are part of the tool that made them). A task agent's turn
        (`own_turn=False`) counts toward the run's requests but says nothing about the size
        of this agent's own final answer."""
        input_tokens, output_tokens = usage.context_tokens, usage.output_tokens
        cost = cost_usd(model, usage)
        if count_request:
            self.requests += 1
            if own_turn:
                self.last_turn_input = input_tokens
                self.last_turn_output, self.last_turn_cost = output_tokens, cost
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.thinking_tokens += usage.thinking_tokens
        self.cost_usd += cost

    def absorb(self, requests: int, input_tokens: int, output_tokens: int, cost: float) -> None:
        """Spending recorded elsewhere (a task agent that finished before a crash, whose result
        is reused after the resume): counted again, never refunded."""
        self.requests += requests
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.cost_usd += cost

    def upgrade(self, budget: Budget) -> None:
        self.budget = budget
        self.revision += 1

    def correction_refusal(self, section_id: str) -> str | None:
        """Why another correction is not allowed, or None. The counts are the thread's: a
        continuation starts from the revisions its report already has (see `count_revisions`)."""
        per_section, per_thread = self.budget.corrections_per_section, self.budget.corrections_per_thread
        if sum(self.corrections.values()) >= per_thread:
            return (
                f"the thread's correction capacity ({per_thread} revisions across all its runs, {self.budget.profile} "
                "profile) is used up. Keep the section as it is and state the remaining doubt in your final "
                "answer instead."
            )
        if self.corrections.get(section_id, 0) >= per_section:
            return (
                f"{section_id} has been revised {per_section} times in this thread already, the per-section "
                f"limit of the {self.budget.profile} profile. Put the new evidence in your final answer or in a "
                "new section about the open point."
            )
        return None

    def count_revisions(self, section_id: str, revisions: int) -> None:
        """A section inherited from an earlier run of the thread brings its revisions with it."""
        self.corrections[section_id] = max(self.corrections.get(section_id, 0), revisions)

    def record_correction(self, section_id: str) -> None:
        self.corrections[section_id] = self.corrections.get(section_id, 0) + 1

    # --- reading ----------------------------------------------------------------------
    def active(self, now: float) -> float:
        return self.active_closed + (now - self.busy_since if self.busy_since is not None else 0.0)

    def wall(self, now: float) -> float:
        return now - self.started_at

    def _limits(self, now: float) -> list[tuple[LimitKey, str, float, float, float]]:
        """(key, name, used, limit, room kept back for writing) for every limit in force."""
        b = self.budget
        limits: list[tuple[LimitKey, str, float, float, float]] = [
            (
                "requests",
                f"request limit ({b.max_requests} model requests)",
                self.requests,
                b.max_requests,
                b.reserve_requests,
            ),
            (
                "active",
                f"active-time limit ({_minutes(b.active_seconds)})",
                self.active(now),
                b.active_seconds,
                b.reserve_seconds,
            ),
            (
                "wall",
                f"wall-time limit ({_minutes(b.wall_seconds)})",
                self.wall(now),
                b.wall_seconds,
                b.reserve_seconds,
            ),
        ]
        spend = 1 - defaults.FINALIZE_AT_SPEND_SHARE
        again = defaults.FINAL_TURN_SIZE_FACTOR
        if b.max_input_tokens is not None:
            limits.append(
                (
                    "input_tokens",
                    f"input-token limit ({b.max_input_tokens:,})",
                    self.input_tokens,
                    b.max_input_tokens,
                    max(b.max_input_tokens * spend, self.last_turn_input * again),
                )
            )
        if b.max_output_tokens is not None:
            limits.append(
                (
                    "output_tokens",
                    f"output-token limit ({b.max_output_tokens:,})",
                    self.output_tokens,
                    b.max_output_tokens,
                    max(b.max_output_tokens * spend, self.last_turn_output * again),
                )
            )
        if b.max_cost_usd is not None:
            limits.append(
                (
                    "cost",
                    b.cost_limit_name or f"cost limit (${b.max_cost_usd:.2f})",
                    self.cost_usd,
                    b.max_cost_usd,
                    max(b.max_cost_usd * spend, self.last_turn_cost * again),
                )
            )
        return limits

    def decide(self, now: float) -> Decision:
        """The one place that decides whether the run explores, finalizes, or ends."""
        for _, name, used, limit, _ in self._limits(now):
            if used >= limit:
                return Decision("end", name)
        for _, name, used, limit, reserve in self._limits(now):
            if used >= limit - reserve:
                return Decision("finalize", name)
        return Decision("explore")

    def room(self, now: float) -> dict[LimitKey, float]:
        """What exploration may still spend of each limit in force before its reserve: the
        pool task agents' budgets are carved from, so the final answer keeps its reserve."""
        return {key: max(0.0, limit - reserve - used) for key, _, used, limit, reserve in self._limits(now)}

    def seconds_to_finalize(self, now: float) -> float:
        """How long exploration may still run before a time limit's reserve is reached."""
        b = self.budget
        return max(
            0.0,
            min(
                b.active_seconds - b.reserve_seconds - self.active(now),
                b.wall_seconds - b.reserve_seconds - self.wall(now),
            ),
        )

    def wrap_up(self, now: float) -> str | None:
        """A warning a few requests (or minutes) before the final turn, while tools still work,
        so findings get written into sections instead of being squeezed into the summary."""
        b = self.budget
        requests = b.max_requests - b.reserve_requests - self.requests
        seconds = self.seconds_to_finalize(now)
        if requests > defaults.WRAP_UP_REQUESTS and seconds > defaults.WRAP_UP_SECONDS:
            return None
        return (
            f"WRAP UP: about {max(0, requests)} model request(s) and {seconds / 60:.0f} min before the final "
            "turn. Start nothing new."
        )

    def seconds_to_end(self, now: float) -> float:
        b = self.budget
        return max(0.0, min(b.active_seconds - self.active(now), b.wall_seconds - self.wall(now)))

    def time_limit_name(self, now: float) -> str:
        b = self.budget
        active_left = b.active_seconds - self.active(now)
        wall_left = b.wall_seconds - self.wall(now)
        return (
            f"active-time limit ({_minutes(b.active_seconds)})"
            if active_left <= wall_left
            else f"wall-time limit ({_minutes(b.wall_seconds)})"
        )

    def block(
        self,
        now: float,
        sources: int,
        sections: list[str],
        finalize: str | None,
        wrap_up_advice: str = WRITE_NOW,
        *,
        context: tuple[int, int] | None = None,
        thinking: bool = False,
    ) -> str:
        """The budget block appended to every turn. `context` is (tokens in the context now, the
        budget it is managed to): the model sees compaction coming; `thinking` adds its tokens."""
        b = self.budget
        limit = f" of {b.max_input_tokens:,}" if b.max_input_tokens is not None else ""
        tokens = f"Tokens: {self.input_tokens:,}{limit} input used, {self.output_tokens:,} output"
        tokens += f" ({self.thinking_tokens:,} of them thinking)." if thinking else "."
        lines = [
            "<budget>",
            f"Model requests: {self.requests} of {b.max_requests} used, {b.max_requests - self.requests} left "
            f"({b.reserve_requests} kept for the final answer).",
            f"Time: {self.active(now) / 60:.0f} of {b.active_seconds / 60:.0f} min active, "
            f"{self.wall(now) / 60:.0f} of {b.wall_seconds / 60:.0f} min wall.",
            tokens,
            f"Profile: {b.profile} (budget revision {self.revision}).",
            f"Sources registered: {sources}. Sections written: {len(sections)}"
            + (f" (latest: {sections[-1]})." if sections else "."),
        ]
        if context is not None:
            used, budget = context
            share = used / budget if budget else 0.0
            lines.insert(
                4,
                f"Context: {used:,} of {budget:,} tokens ({share:.0%}); older notes are compacted into a summary "
                f"at {defaults.COMPACT_AT_SHARE:.0%}.",
            )
        if b.max_cost_usd is not None:
            lines.insert(3, f"Estimated cost: ${self.cost_usd:.2f} of ${b.max_cost_usd:.2f}.")
        if finalize:
            lines.append(
                f"FINAL TURN ({finalize}): call no tools. Write your final answer now from what you have, "
                "inside <summary></summary>, with citations, and name what could not be established."
            )
        elif (wrap_up := self.wrap_up(now)) is not None:
            lines.append(f"{wrap_up} {wrap_up_advice}")
        lines.append("</budget>")
        return "\n".join(lines)
