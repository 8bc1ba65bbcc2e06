"""The fallback chain: try the configured providers in order until one answers.

A provider that fails (blocked, rate-limited, timed out, a bad key, a server error) hands
over to the next; the answer says which provider answered and why the earlier ones did not.
A provider whose empty answer may be a refusal (ddgs) also hands over when one is left.
The chain never raises: when no provider answers, the answer carries every failure.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import httpx
from ddgs import DDGS

from ... import defaults
from ...config import SearchConfig
from . import anthropic, brave, searxng, tavily
from .anthropic import AnthropicSearch, ServerSearchModel
from .duckduckgo import DDGSFactory, DuckDuckGo
from .outcome import ProviderFailure, SearchAnswer, SearchFailed, SearchHit

__all__ = ["OPERATOR_PROVIDERS", "Provider", "providers", "redact", "search"]

ProviderCall = Callable[[httpx.AsyncClient, SearchConfig, str], Awaitable[list[SearchHit]]]


@dataclass(frozen=True)
class Provider:
    name: str  # as written in DEEPTHREAD_SEARCH
    label: str  # as people call it
    run: ProviderCall
    empty_is_certain: bool = True  # False: an empty answer may hide a refusal


@dataclass(frozen=True)
class OperatorProvider:
    """A provider an operator adds by setting one thing (a key or a URL)."""

    label: str
    setting: str
    run: ProviderCall


# The one list of providers beyond the keyless default, by DEEPTHREAD_SEARCH name, in the
# order we suggest them to an operator (agent.config.SearchProvider names the same set).
OPERATOR_PROVIDERS: dict[str, OperatorProvider] = {
    "brave": OperatorProvider(brave.LABEL, brave.SETTING, brave.brave),
    "searxng": OperatorProvider(searxng.LABEL, searxng.SETTING, searxng.searxng),
    "tavily": OperatorProvider(tavily.LABEL, tavily.SETTING, tavily.tavily),
}


async def _no_model(client: httpx.AsyncClient, config: SearchConfig, query: str) -> list[SearchHit]:
    raise SearchFailed(
        "Anthropic's web search needs the run's model client, which this caller did not give; "
        "the operator can put another provider first in DEEPTHREAD_SEARCH",
        "configuration",
    )


def providers(ddgs: DDGSFactory = DDGS, model: ServerSearchModel | None = None) -> dict[str, Provider]:
    """Every provider by its DEEPTHREAD_SEARCH name; `ddgs` is the seam for the keyless one, `model`
    the run's model client that Anthropic's own web search runs through."""
    duck = DuckDuckGo(ddgs)
    keyless = {"duckduckgo": Provider("duckduckgo", duck.label, duck, duck.empty_is_certain)}
    server = {"anthropic": Provider("anthropic", anthropic.LABEL, AnthropicSearch(model) if model else _no_model)}
    return keyless | {name: Provider(name, p.label, p.run) for name, p in OPERATOR_PROVIDERS.items()} | server


def redact(message: str, config: SearchConfig) -> str:
    """Keys travel only in headers; this keeps them out of any message anyway."""
    for secret in (config.brave_api_key, config.tavily_api_key):
        secret = (secret or "").strip()
        if len(secret) >= 4:
            message = message.replace(secret, "[redacted]")
    return message


async def search(
    client: httpx.AsyncClient,
    config: SearchConfig,
    query: str,
    *,
    registry: Mapping[str, Provider] | None = None,
    skip: Mapping[str, ProviderFailure] | None = None,
) -> SearchAnswer:
    """Ask config.providers in order.

    `skip` holds providers known not to work for this run (a bad key), with their failure: they
    are not asked again, and their failure is reported only when no provider answers.
    """
    known = registry if registry is not None else providers()
    limit = config.results or defaults.SEARCH_RESULTS
    failures: list[ProviderFailure] = []
    skipped: list[ProviderFailure] = []
    uncertain: Provider | None = None  # the first provider whose empty answer may be a refusal
    for name in config.providers:
        provider = known.get(name)
        if provider is None:
            failures.append(
                ProviderFailure(
                    name,
                    name,
                    "configuration",
                    f"the {name} search provider is unknown; the operator can set "
                    "DEEPTHREAD_SEARCH to duckduckgo, searxng, brave, tavily or anthropic",
                )
            )
            continue
        if skip and name in skip:
            skipped.append(skip[name])
            continue
        try:
            hits = await provider.run(client, config, query)
        except SearchFailed as exc:
            failures.append(ProviderFailure(name, provider.label, exc.kind, redact(str(exc), config)))
            continue
        if hits or provider.empty_is_certain:
            return SearchAnswer(provider=name, label=provider.label, hits=hits[:limit], failures=failures)
        uncertain = uncertain or provider
    if uncertain is not None:
        return SearchAnswer(provider=uncertain.name, label=uncertain.label, failures=failures, uncertain_empty=True)
    return SearchAnswer(provider=None, label=None, failures=skipped + failures)
