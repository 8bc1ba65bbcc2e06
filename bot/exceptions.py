"""Every exception the bot raises, in one place. Each one's message is what a person reads.

Exception
├── SlotBusy            no free rate-limit slot now (take_slots(wait=False)); retry after .retry_after s
├── BaselineError       `deepthread eval --baseline DIR`: DIR holds no readable scorecard
├── QuestionFileError   `deepthread eval FILE`: a line of FILE cannot be used (names the line)
├── JudgeFailed         the judge model gave no usable grade (shown in the scorecard)
└── ValueError
    └── BudgetSyntaxError   a `budget …` command that cannot be read (says the accepted forms)
"""

from __future__ import annotations

__all__ = ["BaselineError", "BudgetSyntaxError", "JudgeFailed", "QuestionFileError", "SlotBusy"]


class SlotBusy(Exception):
    """`take_slots(..., wait=False)` found no free slot: try again after `retry_after` seconds."""

    def __init__(self, method: str, retry_after: float) -> None:
        super().__init__(f"no free {method} slot for {retry_after:.1f} s")
        self.retry_after = retry_after


class BaselineError(Exception):
    """The baseline directory holds no scorecard this command can read."""


class QuestionFileError(Exception):
    """The question file cannot be used; the message names the line and what to fix."""


class JudgeFailed(Exception):
    """The judge gave no usable answer; the message says why (shown in the scorecard)."""


class BudgetSyntaxError(ValueError):
    """What was wrong with a budget command, said so the person can fix it."""
