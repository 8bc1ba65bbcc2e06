"""What a search gives back: hits, a provider's failure, and the answer of a whole chain.

SearchFailed(kind)            one provider could not answer; its message says what to do
SearchAnswer                  the chain's answer: hits from the provider that answered,
                              and the failures of those tried before it (never raised)
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The error and its kinds are the engine's exceptions (agent/exceptions.py); they are named
# here too because every provider module takes what a search gives back from this one place.
from ...exceptions import FailureKind, SearchFailed

__all__ = ["DEGRADING", "FAILURE_WORDS", "FailureKind", "ProviderFailure", "SearchAnswer", "SearchFailed", "SearchHit"]

# The kinds of failure (FailureKind) worth telling a human about: search is weaker until
# someone acts or waits. The chain tries the next provider on every kind.
DEGRADING: frozenset[str] = frozenset({"blocked", "rate_limited", "configuration", "unavailable", "timeout"})


@dataclass
class SearchHit:
    title: str
    url: str
    snippet: str
    date: str | None = None


# What each kind of failure means, in words for a person (the message is written for the model).
FAILURE_WORDS: dict[str, str] = {
    "blocked": "is blocking automated searches (bot-check page)",
    "rate_limited": "is rate-limiting searches",
    "timeout": "is not answering in time",
    "configuration": "cannot be used as configured",
    "unavailable": "is failing (server errors or unreachable)",
    "refused_query": "refused the query",
}


@dataclass(frozen=True)
class ProviderFailure:
    provider: str  # the DEEPTHREAD_SEARCH name: "duckduckgo"
    label: str  # how people call it: "DuckDuckGo"
    kind: FailureKind
    message: str  # for the model: what went wrong and what to do instead

    @property
    def plainly(self) -> str:
        """What happened, for a person: "DuckDuckGo is rate-limiting searches"."""
        return f"{self.label} {FAILURE_WORDS[self.kind]}"


@dataclass
class SearchAnswer:
    """The chain's answer. `provider` is None when no provider answered."""

    provider: str | None
    label: str | None
    hits: list[SearchHit] = field(default_factory=list)
    failures: list[ProviderFailure] = field(default_factory=list)
    # True when the answering provider cannot tell "nothing matched" from "refused" (ddgs
    # reports both as no results), so an empty answer may be a block.
    uncertain_empty: bool = False

    @property
    def answered(self) -> bool:
        return self.provider is not None
