"""Every exception the bot raises, in one place. Each one's message is what a person reads.

Exception
├── SlotBusy            no free rate-limit slot now (take_slots(wait=False)); retry after .retry_after s
├── BaselineError       `deepthread eval --baseline DIR`: DIR holds no readable scorecard
├── QuestionFileError   `deepthread eval FILE`: a line of FILE cannot be used (names the line)
├── JudgeFailed         the judge model gave no usable grade (shown in the scorecard)
├── UnverifiedHttpMode  HTTP mode without SLACK_SIGNING_SECRET: serve refuses to start
├── TokenKeyMismatch    DEEPTHREAD_TOKEN_KEY cannot decrypt an installation's stored token
├── NotInstalled        a Slack call for an installation whose tokens are gone (uninstalled), or
│                       made without saying which installation it acts for (a bug); not a Slack
│                       error, so no "retry later" path swallows it
└── ValueError
    └── BudgetSyntaxError   a `budget …` command that cannot be read (says the accepted forms)
"""

from __future__ import annotations

__all__ = [
    "BaselineError",
    "BudgetSyntaxError",
    "JudgeFailed",
    "NotInstalled",
    "QuestionFileError",
    "SlotBusy",
    "TokenKeyMismatch",
    "UnverifiedHttpMode",
]

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


class TokenKeyMismatch(Exception):
    """A stored token does not decrypt with DEEPTHREAD_TOKEN_KEY: the key was changed or lost."""

    def __init__(self, record: str) -> None:
        super().__init__(
            f"DEEPTHREAD_TOKEN_KEY cannot decrypt the token stored in {record}: the key was changed. "
            "Put the old key after the new one (DEEPTHREAD_TOKEN_KEY=new,old) so both decrypt, "
            "or have the workspace install the app again"
        )
        self.record = record


class NotInstalled(Exception):
    """No token for the installation a Slack call acts for: uninstalled (or never said which)."""

    def __init__(self, installation: str | None) -> None:
        what = (
            f"the app is not installed in {installation} any more (its tokens were deleted)"
            if installation
            else "a Slack call was made without saying which installation it acts for"
        )
        super().__init__(what)
        self.installation = installation
