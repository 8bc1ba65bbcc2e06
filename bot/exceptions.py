"""Every exception the bot raises, in one place. Each one's message is what a person reads.

Exception
├── SlotBusy            no free rate-limit slot now (take_slots(wait=False)); retry after .retry_after s
├── BaselineError       `deepthread eval --baseline DIR`: DIR holds no readable scorecard
├── QuestionFileError   `deepthread eval FILE`: a line of FILE cannot be used (names the line)
├── JudgeFailed         the judge model gave no usable grade (shown in the scorecard)
├── UnverifiedHttpMode  HTTP mode without SLACK_SIGNING_SECRET: serve refuses to start
└── ValueError
    └── BudgetSyntaxError   a `budget …` command that cannot be read (says the accepted forms)
"""

from __future__ import annotations

__all__ = ["BaselineError", "BudgetSyntaxError", "JudgeFailed", "QuestionFileError", "SlotBusy", "UnverifiedHttpMode"]

# What serve says when it would listen for unsigned requests (SLACK_APP_TOKEN unset or blank).
UNVERIFIED_HTTP_MODE = (
    "SLACK_SIGNING_SECRET is not set (or blank) and SLACK_APP_TOKEN is not set, so HTTP mode could not "
    "verify that requests come from Slack: set SLACK_SIGNING_SECRET (Basic Information → Signing Secret), "
    "or set SLACK_APP_TOKEN to use Socket Mode"
)


class SlotBusy(Exception):
    """`take_slots(..., wait=False)` found no free slot: try again after `retry_after` seconds."""

    def __init__(self, method: str, retry_after: float) -> None:
        super().__init__(f"no free {method} slot for {retry_after:.1f} s")
        self.retry_after = retry_after


class UnverifiedHttpMode(Exception):
    """HTTP mode was asked for without a signing secret: nothing would check that requests come from Slack."""

    def __init__(self) -> None:
        super().__init__(UNVERIFIED_HTTP_MODE)


class BaselineError(Exception):
    """The baseline directory holds no scorecard this command can read."""


class QuestionFileError(Exception):
    """The question file cannot be used; the message names the line and what to fix."""


class JudgeFailed(Exception):
    """The judge gave no usable answer; the message says why (shown in the scorecard)."""


class BudgetSyntaxError(ValueError):
    """What was wrong with a budget command, said so the person can fix it."""
