"""Every exception the engine raises, in one place.

    Exception
    ├── ModelUnavailable     the model could not answer after the SDK's retries (the message is for users)
    │   ├── ModelThrottled   one request was throttled again and again: the run ends with what it has
    │   ├── RequestTooLarge  one request is larger than a whole minute of the organization's limit
    │   └── BudgetSpent      the run's monthly budget is spent, by it and the runs it shares it with
    ├── Interrupted          a model or tool await was cut short: by a stop, or by a time limit's reserve
    ├── TaskRefused          spawn_tasks cannot run task agents now (budget too small)
    ├── WorkspaceError       the thread could not be read
    │   ├── FileUnavailable  one file cannot be read (gone, not shared here, too large, no access)
    │   └── NoWorkspace      the run has no thread (started outside Slack)
    ├── UnsupportedFile      a thread file of a kind (or in a state) we cannot read
    ├── UnreadableContent    a fetched resource of a kind we cannot read
    ├── ConversionRefused    a document the converter would not or could not convert (the reason)
    │   └── ConversionBudgetSpent  the run spent its total conversion time
    ├── FetchError           a page could not be fetched
    ├── SearchFailed         a search provider could not answer (`kind`, a FailureKind, says how)
    ├── CalculationError     a calculation that cannot be done (`position` points at the problem)
    └── ValueError
        ├── UnknownCitation  a text cites markers the source registry never issued
        └── BlockedURL       the address guard refuses a URL (private, reserved, not allowed)

Only ModelUnavailable and Interrupted cross the loop; the others become tool results or
rewrite requests whose message says what to do instead (tool errors are prompt).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .control import StopRequest

__all__ = [
    "NO_WORKSPACE",
    "BlockedURL",
    "CalculationError",
    "FailureKind",
    "FetchError",
    "FileUnavailable",
    "Interrupted",
    "ModelUnavailable",
    "ModelThrottled",
    "RequestTooLarge",
    "BudgetSpent",
    "NoWorkspace",
    "SearchFailed",
    "TaskRefused",
    "UnknownCitation",
    "UnreadableContent",
    "ConversionBudgetSpent",
    "ConversionRefused",
    "UnsupportedFile",
    "WorkspaceError",
]

NO_WORKSPACE = (
    "This run has no thread to read files or messages from (it was started outside Slack). "
    "Work from the question, web_search and read_page."
)


class ModelUnavailable(Exception):
    """The model could not answer after the SDK's retries; the message is for users."""


class ModelThrottled(ModelUnavailable):
    """One request was throttled (429) more times than a request is retried; the run finishes with
    what it has rather than waiting on, and the other runs' share is left alone."""


class RequestTooLarge(ModelUnavailable):
    """One request needs more than a whole minute of a limit the operator or the service named: it
    can never be sent as it is (compact the notes, split the work, or stop)."""


class BudgetSpent(ModelUnavailable):
    """A monthly budget the run counts against is spent (by this run and the runs it shares the
    budget with): no further request is sent, and the run ends with what it has."""


class Interrupted(Exception):
    """A model or tool await was cut short: by a stop, or by a time limit's reserve."""

    def __init__(self, reason: str, stop: StopRequest | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.stop = stop


class TaskRefused(Exception):
    """No task agents can run now; the message tells the lead what to do instead."""


class WorkspaceError(Exception):
    """The thread could not be read; the message says what to do instead."""


class FileUnavailable(WorkspaceError):
    """One file cannot be read (gone, not shared here, too large, no access). The message is for
    the model; `for_people`, when a person in the thread can fix it, says so in their words."""

    def __init__(self, message: str, *, for_people: str = "") -> None:
        super().__init__(message)
        self.for_people = for_people


class NoWorkspace(WorkspaceError):
    def __init__(self) -> None:
        super().__init__(NO_WORKSPACE)


class UnsupportedFile(Exception):
    """The file is of a kind (or in a state) we cannot read; the message says what to do.
    `for_people`, when the sandbox refused it and a person in the thread can help, says so to them;
    `lasting` False when the refusal is about the run, not the file (not remembered for the file)."""

    def __init__(self, message: str, *, for_people: str = "", lasting: bool = True) -> None:
        super().__init__(message)
        self.for_people = for_people
        self.lasting = lasting


class UnreadableContent(Exception):
    """The resource is of a kind we cannot read; the message says what to do."""


class ConversionRefused(Exception):
    """The converter did not convert a document: the message says what went wrong (over a limit,
    unparsable, stopped), and the caller adds what to do instead."""


class ConversionBudgetSpent(ConversionRefused):
    """The run spent its total conversion time: not this file's fault, so not remembered against it."""


class FetchError(Exception):
    """The page could not be fetched; the message tells the model what to do instead."""


# Why a search provider did not answer: part of the error, so the error owns it. The chain
# tries the next provider on every kind; which kinds degrade search is its business
# (tools/search/outcome.DEGRADING).
FailureKind = Literal["blocked", "rate_limited", "timeout", "configuration", "unavailable", "refused_query"]


class SearchFailed(Exception):
    """The provider could not answer; the message tells the model what to try."""

    def __init__(self, message: str, kind: FailureKind = "unavailable") -> None:
        super().__init__(message)
        self.kind: FailureKind = kind


class CalculationError(Exception):
    """A calculation that cannot be done; the message says where and what to write instead."""

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position  # 0-based index into the cleaned expression, for the caret

    def describe(self, expression: str) -> str:
        if self.position is None:
            return str(self)
        return f"{self}\n  {expression}\n  {' ' * self.position}^"


class UnknownCitation(ValueError):
    """A text cites markers the registry never issued."""

    def __init__(self, unknown: list[str], known_count: int) -> None:
        self.unknown = unknown
        listed = ", ".join(f"[{m}]" for m in unknown)
        known = f"[s1]–[s{known_count}]" if known_count else "none yet: search or read a page first"
        super().__init__(
            f"unknown citation {listed}: cite only markers that appear in tool results (issued so far: {known})."
        )


class BlockedURL(ValueError):
    """The URL may not be fetched; the message says why and what to do."""
