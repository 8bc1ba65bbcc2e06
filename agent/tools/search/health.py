"""How search is doing over one run: which providers to stop asking, what a human must hear.

One SearchHealth per run, shared by the lead's web_search and its task agents' copies, so a
degraded condition is announced once per run whoever met it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .chain import OPERATOR_PROVIDERS
from .outcome import DEGRADING, ProviderFailure, SearchAnswer

__all__ = ["SearchHealth", "operator_advice"]

# Failures that will not mend within a run (a missing or rejected key): the provider is not
# asked again until the run ends, so each search does not pay for the same refusal.
LASTING_KINDS = frozenset({"configuration"})
# Failures that often pass by themselves: announced only when no provider answered.
TRANSIENT_KINDS = frozenset({"timeout", "unavailable"})
# ddgs reports a refusal as "no results": after this many empty answers in a row from a
# provider that cannot tell them apart, a human is told search may be blocked.
UNCERTAIN_EMPTY_STREAK = 2
# Providers an operator can add for sturdier search, in the order we suggest them.
_ALTERNATIVES = {name: f"{p.label} ({p.setting})" for name, p in OPERATOR_PROVIDERS.items()} | {
    "anthropic": "Anthropic web search (anthropic: the model key alone, billed per search)"
}


def operator_advice(chain: Sequence[str]) -> str:
    """What the operator can do to make search sturdier, given the providers already configured."""
    missing = [name for name in _ALTERNATIVES if name not in chain]
    if not missing:
        return "the operator should check the providers in DEEPTHREAD_SEARCH (`deepthread doctor`)"
    texts = [_ALTERNATIVES[name] for name in missing]
    listed = ", ".join(texts[:-1]) + (" or " if len(texts) > 1 else "") + texts[-1]
    example = ",".join([missing[0], *chain])  # the sturdier provider first, the current ones as fallback
    return f"the operator can add {listed} to DEEPTHREAD_SEARCH, e.g. DEEPTHREAD_SEARCH={example}"


@dataclass
class SearchHealth:
    dead: dict[str, ProviderFailure] = field(default_factory=dict)
    announced: set[str] = field(default_factory=set)  # "provider:kind" already shown to a human
    empty_streak: int = 0

    def observe(self, answer: SearchAnswer, chain: Sequence[str]) -> list[str]:
        """Record `answer`; return the notices a human has not yet seen this run (usually none)."""
        notices = []
        instead = f"; {answer.label} answered instead" if answer.hits else ""
        for failure in answer.failures:
            if failure.kind in LASTING_KINDS:
                self.dead[failure.provider] = failure
            if failure.kind in TRANSIENT_KINDS and answer.answered:
                continue  # a slow moment covered by the next provider is not worth a human's eye
            if failure.kind in DEGRADING and self._first(f"{failure.provider}:{failure.kind}"):
                notices.append(f"Search degraded: {failure.plainly}{instead}. {_capital(operator_advice(chain))}.")
        if answer.uncertain_empty:
            self.empty_streak += 1
            if self.empty_streak >= UNCERTAIN_EMPTY_STREAK and self._first(f"{answer.provider}:uncertain_empty"):
                notices.append(
                    f"Search may be degraded: {answer.label} returned nothing for "
                    f"{self.empty_streak} searches in a row, which often means it is refusing this "
                    f"server. {_capital(operator_advice(chain))}."
                )
        elif answer.hits:
            self.empty_streak = 0
        return notices

    def _first(self, key: str) -> bool:
        if key in self.announced:
            return False
        self.announced.add(key)
        return True

    # A resumed run must not announce again what a human already saw, nor ask a dead provider.
    def to_state(self) -> dict[str, Any]:
        return {
            "dead": {name: vars(f) for name, f in self.dead.items()},
            "announced": sorted(self.announced),
            "empty_streak": self.empty_streak,
        }

    def load(self, state: dict[str, Any]) -> None:
        """Take over a saved state in place (the object is shared with task agents' copies)."""
        self.dead.update({name: ProviderFailure(**f) for name, f in (state.get("dead") or {}).items()})
        self.announced.update(state.get("announced") or [])
        self.empty_streak = int(state.get("empty_streak") or 0)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
