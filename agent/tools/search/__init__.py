"""Web search behind one interface: a query in, normalised hits out, over a fallback chain.

`search(client, config, query)` asks the providers named in `config.providers` in order
(DEEPTHREAD_SEARCH="brave,duckduckgo") and returns a SearchAnswer saying which provider
answered and why earlier ones did not. Each provider lives in its own module; they share
one transport (transport.py) and one normaliser (normalise.py).

Knows nothing of citations, the source registry or the loop: the web_search tool
(agent/tools/web_search.py) turns hits into cited results. Imports only the engine's
configuration, defaults and exceptions."""

from __future__ import annotations

from .chain import Provider, providers, search
from .duckduckgo import DDGSClient, DDGSFactory
from .health import SearchHealth, operator_advice
from .outcome import (
    DEGRADING,
    FailureKind,
    ProviderFailure,
    SearchAnswer,
    SearchFailed,
    SearchHit,
)

__all__ = [
    "DEGRADING",
    "DDGSClient",
    "DDGSFactory",
    "FailureKind",
    "Provider",
    "ProviderFailure",
    "SearchAnswer",
    "SearchFailed",
    "SearchHealth",
    "SearchHit",
    "operator_advice",
    "providers",
    "search",
]
