"""Model usage: one type for the model client, the budget ledger, run state, spend and `inspect`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel

from .provider_values import token_count

if TYPE_CHECKING:  # only a type here: what reads usage (the serve process) need not import the SDK
    from anthropic.types import Message

__all__ = ["Usage", "usage_by_model"]


class Usage(BaseModel):
    requests: int = 0
    input_tokens: int = 0  # uncached input
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    # Of output_tokens, those the model spent thinking (the API reports them; they are billed as output).
    thinking_tokens: int = 0
    # Server-side web searches the API ran (billed per search, agent/model_capabilities.py).
    web_search_requests: int = 0
    # Estimated USD at list prices (agent/pricing.py) when someone priced it; 0 until then.
    cost_usd: float = 0.0

    @classmethod
    def of(cls, message: Message) -> Usage:
        """One response's usage: the one place that reads the API's usage fields, each held to a
        whole count the provider could mean: a negative or non-numeric figure counts as 0 (it cannot
        refund a budget), one past provider_values.MAX_TOKENS_PER_ANSWER as that much."""
        u = message.usage
        details = u.output_tokens_details
        server = u.server_tool_use
        return cls(
            requests=1,
            input_tokens=token_count(u.input_tokens),
            output_tokens=token_count(u.output_tokens),
            cache_read_tokens=token_count(u.cache_read_input_tokens),
            cache_creation_tokens=token_count(u.cache_creation_input_tokens),
            thinking_tokens=token_count(details.thinking_tokens) if details is not None else 0,
            web_search_requests=token_count(server.web_search_requests) if server is not None else 0,
        )

    @property
    def context_tokens(self) -> int:
        """What the request's context held: new, cached and cache-written input together."""
        return self.input_tokens + self.cache_read_tokens + self.cache_creation_tokens

    def add(self, other: Usage | _Counted) -> None:
        self.requests += getattr(other, "requests", 1)
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_creation_tokens += other.cache_creation_tokens
        self.thinking_tokens += getattr(other, "thinking_tokens", 0)
        self.web_search_requests += getattr(other, "web_search_requests", 0)
        self.cost_usd += getattr(other, "cost_usd", 0.0)


class _Counted(Protocol):
    """A record of one request's tokens (the request log's RequestRecord)."""

    model: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_creation_tokens: int


def usage_by_model(records: Iterable[_Counted]) -> dict[str, Usage]:
    """Logged requests summed per model: how `inspect` and spend price a run (each model at its rate)."""
    by_model: dict[str, Usage] = {}
    for record in records:
        by_model.setdefault(record.model, Usage()).add(record)
    return by_model
